"""A loopback stand-in for the part of GitHub's REST API that auger's forge adapter uses, refusing what the
real API refuses, over a real bare git repository (the one the fleet's tasks push to).

It checks the documented request shapes (docs.github.com/rest, API version 2022-11-28):

- every request: `Authorization: Bearer TOKEN` (401 "Bad credentials" otherwise), `Accept:
  application/vnd.github+json`, `X-GitHub-Api-Version: 2022-11-28`, a `User-Agent` (403 without one);
- `POST /repos/{owner}/{repo}/pulls`: `title`, `head`, `base` strings (and only the documented optional
  fields); head and base must be branches of the repository, and one open pull request per head and base
  (422 "Validation Failed" otherwise) — 201 with `number`, `html_url`, `head`, `base`;
- `GET /repos/{owner}/{repo}/pulls?head=OWNER:BRANCH&state=all`, `GET …/pulls/{n}`;
- `POST /repos/{owner}/{repo}/issues/{n}/comments`: `body` only — 201;
- `POST /repos/{owner}/{repo}/pulls/{n}/reviews`: `commit_id` (the pull request's head, when given),
  `body`, `event` (APPROVE, REQUEST_CHANGES, COMMENT), `comments` — each `path`, `body` and `line` (with
  `side` LEFT or RIGHT, optional `start_line`); a line must be part of the pull request's diff (422 "Pull
  request review thread line must be part of the diff"); this stand-in is stricter and asks for a line the
  pull request *adds* (a comment on a changed line), recorded in `review_lines`;
- `GET` of an issue's comments and of a pull request's reviews, paged (`per_page`, `page`).
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

API_VERSION = "2022-11-28"
_PULL_FIELDS = {"title", "head", "head_repo", "base", "body", "maintainer_can_modify", "draft", "issue"}
_REVIEW_FIELDS = {"commit_id", "body", "event", "comments"}
_REVIEW_COMMENT_FIELDS = {"path", "position", "body", "line", "side", "start_line", "start_side"}


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any
    status: int = 0


@dataclass
class GitHubStandIn:
    token: str
    repos: dict[str, Path]  # owner/name -> bare repository
    requests: list[Recorded] = field(default_factory=list)
    pulls: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    comments: dict[tuple[str, int], list[dict[str, Any]]] = field(default_factory=dict)
    reviews: dict[tuple[str, int], list[dict[str, Any]]] = field(default_factory=dict)
    review_lines: list[tuple[str, int]] = field(default_factory=list)
    _next: int = 100
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __enter__(self) -> GitHubStandIn:
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self._serve("GET")

            def do_POST(self) -> None:
                self._serve("POST")

            def _serve(self, method: str) -> None:
                parts = urlsplit(self.path)
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = "<not json>"
                record = Recorded(method, parts.path, parse_qs(parts.query),
                                  {k.lower(): v for k, v in self.headers.items()}, body)
                with stand_in._lock:
                    stand_in.requests.append(record)
                    status, answer = stand_in.answer(record)
                record.status = status
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json; charset=utf-8")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._server.shutdown()
        self._server.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def add_pull(self, repository: str, head: str, base: str, title: str = "a change") -> dict[str, Any]:
        """A pull request opened by someone else (the one a review task reviews)."""
        with self._lock:
            return self._open(repository, {"title": title, "head": head, "base": base, "body": ""})

    # -- the API -------------------------------------------------------------------------
    def answer(self, r: Recorded) -> tuple[int, Any]:
        h = r.headers
        if h.get("authorization") != f"Bearer {self.token}":
            return 401, {"message": "Bad credentials", "documentation_url": "https://docs.github.com/rest"}
        if not h.get("user-agent"):
            return 403, {"message": "Request forbidden by administrative rules. Please make sure your request has "
                                    "a User-Agent header"}
        if h.get("accept") != "application/vnd.github+json" or h.get("x-github-api-version") != API_VERSION:
            return 400, {"message": "the stand-in takes Accept: application/vnd.github+json and "
                                    f"X-GitHub-Api-Version: {API_VERSION}"}
        m = re.fullmatch(r"/repos/([^/]+/[^/]+)/(pulls|issues)(?:/(\d+))?(?:/(comments|reviews))?", r.path)
        if m is None or m.group(1) not in self.repos:
            return 404, {"message": "Not Found"}
        repository, kind, number, sub = m.group(1), m.group(2), m.group(3), m.group(4)
        n = int(number) if number else None
        if kind == "pulls" and n is None:
            return self._pulls(repository, r)
        if kind == "pulls" and sub is None and r.method == "GET":
            pull = self._pull(repository, n)
            return (200, pull) if pull else (404, {"message": "Not Found"})
        if kind == "issues" and sub == "comments":
            return self._comments(repository, n, r)
        if kind == "pulls" and sub == "reviews":
            return self._reviews(repository, n, r)
        return 404, {"message": "Not Found"}

    def _pulls(self, repository: str, r: Recorded) -> tuple[int, Any]:
        if r.method == "GET":
            pulls = self.pulls.get(repository, [])
            head = (r.query.get("head") or [None])[0]
            if head is not None:
                owner, _, branch = head.partition(":")
                pulls = [p for p in pulls if p["head"]["ref"] == branch and owner == repository.split("/")[0]]
            if (r.query.get("state") or ["open"])[0] == "open":
                pulls = [p for p in pulls if p["state"] == "open"]
            return 200, self._page(pulls, r)
        body = r.body
        if not isinstance(body, dict) or set(body) - _PULL_FIELDS or \
                not all(isinstance(body.get(k), str) and body.get(k) for k in ("title", "head", "base")):
            return 422, {"message": "Validation Failed", "errors": [{"resource": "PullRequest", "code": "invalid"}]}
        for name in ("head", "base"):
            if self._sha(repository, body[name]) is None:
                return 422, {"message": "Validation Failed",
                             "errors": [{"resource": "PullRequest", "field": name, "code": "invalid"}]}
        if any(p["head"]["ref"] == body["head"] and p["base"]["ref"] == body["base"] and p["state"] == "open"
               for p in self.pulls.get(repository, [])):
            return 422, {"message": "Validation Failed", "errors": [{
                "resource": "PullRequest", "code": "custom",
                "message": f"A pull request already exists for {repository.split('/')[0]}:{body['head']}."}]}
        return 201, self._open(repository, body)

    def _open(self, repository: str, body: dict[str, Any]) -> dict[str, Any]:
        self._next += 1
        pull = {"number": self._next, "state": "open", "title": body["title"], "body": body.get("body"),
                "html_url": f"https://github.example/{repository}/pull/{self._next}",
                "head": {"ref": body["head"], "sha": self._sha(repository, body["head"])},
                "base": {"ref": body["base"], "sha": self._sha(repository, body["base"])}}
        self.pulls.setdefault(repository, []).append(pull)
        return pull

    def _pull(self, repository: str, n: int | None) -> dict[str, Any] | None:
        return next((p for p in self.pulls.get(repository, []) if p["number"] == n), None)

    def _comments(self, repository: str, n: int | None, r: Recorded) -> tuple[int, Any]:
        assert n is not None
        found = self.comments.setdefault((repository, n), [])
        if r.method == "GET":
            return 200, self._page(found, r)
        if not isinstance(r.body, dict) or set(r.body) != {"body"} or not isinstance(r.body["body"], str):
            return 422, {"message": "Validation Failed", "errors": [{"field": "body", "code": "missing_field"}]}
        self._next += 1
        comment = {"id": self._next, "body": r.body["body"],
                   "html_url": f"https://github.example/{repository}/issues/{n}#issuecomment-{self._next}"}
        found.append(comment)
        return 201, comment

    def _reviews(self, repository: str, n: int | None, r: Recorded) -> tuple[int, Any]:
        pull = self._pull(repository, n)
        if pull is None:
            return 404, {"message": "Not Found"}
        found = self.reviews.setdefault((repository, pull["number"]), [])
        if r.method == "GET":
            return 200, self._page(found, r)
        body = r.body
        if not isinstance(body, dict) or set(body) - _REVIEW_FIELDS:
            return 422, {"message": "Validation Failed"}
        if body.get("event") not in (None, "APPROVE", "REQUEST_CHANGES", "COMMENT"):
            return 422, {"message": "Validation Failed", "errors": [{"field": "event", "code": "invalid"}]}
        if body.get("commit_id") not in (None, pull["head"]["sha"]):
            return 422, {"message": "Validation Failed", "errors": [{"field": "commit_id", "code": "invalid"}]}
        added = self._added(repository, pull["base"]["sha"], pull["head"]["sha"])
        for c in body.get("comments") or []:
            if not isinstance(c, dict) or set(c) - _REVIEW_COMMENT_FIELDS or not isinstance(c.get("path"), str) \
                    or not isinstance(c.get("body"), str) or not isinstance(c.get("line"), int) \
                    or c.get("side", "RIGHT") not in ("LEFT", "RIGHT"):
                return 422, {"message": "Validation Failed", "errors": [{"resource": "PullRequestReviewComment",
                                                                         "code": "invalid"}]}
            if c["line"] not in added.get(c["path"], set()):
                return 422, {"message": "Unprocessable Entity",
                             "errors": ["Pull request review thread line must be part of the diff"]}
        for c in body.get("comments") or []:
            self.review_lines.append((c["path"], c["line"]))
        self._next += 1
        review = {"id": self._next, "body": body.get("body") or "", "state": "COMMENTED",
                  "commit_id": body.get("commit_id") or pull["head"]["sha"], "comments": body.get("comments") or [],
                  "html_url": f"https://github.example/{repository}/pull/{pull['number']}#review-{self._next}"}
        found.append(review)
        return 200, review

    @staticmethod
    def _page(items: list[Any], r: Recorded) -> list[Any]:
        size = int((r.query.get("per_page") or ["30"])[0])
        page = int((r.query.get("page") or ["1"])[0])
        return items[(page - 1) * size: page * size]

    def _sha(self, repository: str, branch: str) -> str | None:
        done = subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}"],
                              cwd=self.repos[repository], capture_output=True, text=True)
        return done.stdout.strip() if done.returncode == 0 else None

    def _added(self, repository: str, base: str, head: str) -> dict[str, set[int]]:
        """File -> the head side's line numbers the pull request adds (its diff from the merge base)."""
        diff = subprocess.run(["git", "diff", "--no-color", "--unified=0", f"{base}...{head}"],
                              cwd=self.repos[repository], capture_output=True, text=True, check=True).stdout
        added: dict[str, set[int]] = {}
        current: set[int] | None = None
        for line in diff.splitlines():
            if line.startswith("+++ "):
                current = None if line[4:] == "/dev/null" else added.setdefault(line[6:], set())
            elif (m := re.match(r"@@ -\S+ \+(\d+)(?:,(\d+))? @@", line)) and current is not None:
                start, count = int(m.group(1)), int(m.group(2) or 1)
                current.update(range(start, start + count))
        return added
