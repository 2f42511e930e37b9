"""Results as branches and pull requests, for real: a worker with a `[forge]` pushes a task's diff on
`auger/<task>-<title>` to a local bare repository (real git) and opens one pull request through a loopback
stand-in for GitHub's REST API that checks the documented request shapes; a webhook delivery sent twice
makes one task and one pull request, and the delivery repeated opens none; an `@auger` comment is answered
in its issue's thread, once; a review task's findings land as line comments on the lines the pull request
adds. The token is the worker's: the model's commands never see it."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import subprocess

import psycopg
import pytest

from auger.fleet.forge import GitHub, forge_from_config, ForgeConfigError
from tests.support.fleet import make_repo, start_worker, submit, wait_final
from tests.support.harness import conversation
from tests.support.mock_github import GitHubStandIn
from tests.support.mock_openai import MockChatServer, Reply, ToolCall
from tests.support.serve import in_process

TOKEN = "ghs_forgetoken0123456789abcdefABCDEF"
SECRET = "a webhook secret of the operator"


def git(cwd, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "PATH": "/usr/bin:/bin"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True).stdout


@pytest.fixture
def bare(tmp_path):
    """org/app: a bare repository with `main`, and a `feature` branch that adds lines to app.py."""
    src = make_repo(tmp_path / "src")
    (src / "app.py").write_text("def one():\n    return 1\n")
    git(src, "add", "-A")
    git(src, "commit", "-qm", "app")
    git(src, "checkout", "-qb", "feature")
    (src / "app.py").write_text("def one():\n    return 1\n\n\ndef two():\n    return 'two'\n")
    git(src, "commit", "-qam", "two")
    git(src, "checkout", "-q", "main")
    path = tmp_path / "app.git"
    git(tmp_path, "clone", "-q", "--bare", str(src), str(path))
    return path


def configure(home, stand_in: GitHubStandIn, bare, **intake) -> None:
    lines = [f"[forge]\napi_url = {json.dumps(stand_in.url)}\ntoken_env = \"GITHUB_TOKEN\"\n",
             f"[forge.repos]\n{json.dumps(str(bare))} = \"org/app\"\n"]
    if intake:
        table = {"secret": SECRET, "repo": str(bare), "ref": "main", "events": ["issue_comment"], **intake}
        lines.append("[intake.gh]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in table.items()))
    (home / "config.toml").write_text("\n".join(lines))


def deliver_twice(project, model, url, payload: dict) -> list[int]:
    """The same signed delivery posted twice to `auger serve` on the fleet's database (a forge's retry)."""
    body = json.dumps(payload).encode()
    headers = {"content-type": "application/json", "x-github-event": "issue_comment", "x-github-delivery": "gh-42",
               "x-hub-signature-256": "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()}

    async def main():
        async with in_process(project, model, url) as (client, _):
            import httpx

            bare_client = httpx.AsyncClient(transport=client._transport, base_url=str(client.base_url))
            return [(await bare_client.post("/api/hooks/gh", content=body, headers=headers)).status_code
                    for _ in range(2)]

    return asyncio.run(main())


def issue_comment(text: str) -> dict:
    return {"action": "created", "issue": {"number": 7, "title": "Flaky date test", "body": "fails on Mondays"},
            "comment": {"body": text}}


def changing_model() -> MockChatServer:
    """Writes fix.txt, and env.txt with every variable its commands see; then answers."""
    def step(body):
        if not any(m["role"] == "tool" for m in conversation(body["messages"])):
            return Reply(tool_calls=[ToolCall("shell", {"command": "env > env.txt; echo fixed > fix.txt"})])
        return Reply(text="Fixed the flaky date test: the timezone is pinned.")
    return MockChatServer([step], loop=True)


def result_of(url: str, task_id: str) -> tuple:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute("SELECT t.state, t.error, r.delivery, r.final_message, r.diff FROM tasks t "
                            "LEFT JOIN task_results r ON r.task_id = t.id WHERE t.id = %s", (task_id,)).fetchone()


def only_task(url: str) -> str:
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute("SELECT id FROM tasks").fetchall()
    assert len(rows) == 1, rows
    return rows[0][0]


def test_a_delivery_sent_twice_pushes_one_branch_and_opens_one_pull_request(bare, project, isolated_home, tmp_path,
                                                                            postgres_url):
    with GitHubStandIn(TOKEN, {"org/app": bare}) as github, changing_model() as model:
        configure(isolated_home, github, bare, prompt="Fix what this comment reports: {{comment.body}}",
                  deliver="pr", title="{{issue.title}}", mode="auto")
        statuses = deliver_twice(project, model, postgres_url, issue_comment("@auger please fix it"))
        task_id = only_task(postgres_url)
        worker = start_worker(isolated_home, postgres_url, model, env_extra={"GITHUB_TOKEN": TOKEN},
                              log=tmp_path / "worker.log")
        try:
            wait_final(postgres_url, 1, timeout=60)
        finally:
            worker.kill()
            worker.wait(10)
        state, error, delivery, final, diff = result_of(postgres_url, task_id)
        assert sorted(statuses) == [200, 202] and state == "done", (error, (tmp_path / "worker.log").read_text())
        branch = f"auger/{task_id[:12]}-flaky-date-test"
        opened = [r for r in github.requests if r.method == "POST" and r.path == "/repos/org/app/pulls"]
        assert len(opened) == 1 and opened[0].status == 201
        assert opened[0].body["head"] == branch and opened[0].body["base"] == "main"
        assert opened[0].body["title"] == "Flaky date test" and "timezone is pinned" in opened[0].body["body"]
        assert all(r.headers["authorization"] == f"Bearer {TOKEN}" for r in github.requests)
        assert json.loads(delivery)["pull_request"]["number"] == github.pulls["org/app"][0]["number"]
        # the branch, pushed with real git: one commit on main holding exactly the task's diff
        assert git(bare, "rev-parse", f"{branch}^") == git(bare, "rev-parse", "main")
        assert git(bare, "show", f"{branch}:fix.txt") == "fixed\n"
        assert "auger task " + task_id in git(bare, "log", "-1", "--format=%B", branch)
        assert TOKEN not in git(bare, "show", f"{branch}:env.txt")  # the model's commands never saw the token

        # the delivery repeated (an attempt retried after it had delivered): no second pull request, no push
        from auger.fleet.deliver import Delivery
        from auger.fleet.policy import check_spec

        with psycopg.connect(postgres_url, autocommit=True) as conn:
            spec = check_spec(json.loads(conn.execute("SELECT spec FROM tasks").fetchone()[0]))
        base = git(bare, "rev-parse", "main").strip()
        again = asyncio.run(Delivery(forge_from_config({"forge": {"api_url": github.url}}, {"GITHUB_TOKEN": TOKEN}),
                                     "org/app", tmp_path / "again").change(spec, task_id, base, diff.decode(),
                                                                            final.decode()))
        assert again["pull_request"]["number"] == json.loads(delivery)["pull_request"]["number"]
        assert len([r for r in github.requests if r.method == "POST" and r.path == "/repos/org/app/pulls"]) == 1


def test_an_auger_mention_is_answered_in_its_issues_thread_once(bare, project, isolated_home, tmp_path, postgres_url):
    def answer(body):
        return Reply(text="It fails on Mondays because the test's clock is not pinned.")

    with GitHubStandIn(TOKEN, {"org/app": bare}) as github, MockChatServer([answer], loop=True) as model:
        configure(isolated_home, github, bare, prompt="Answer this question: {{comment.body}}", mention="@auger",
                  deliver="comment", issue="{{issue.number}}", mode="plan")
        statuses = deliver_twice(project, model, postgres_url, issue_comment("@auger why does it fail?"))
        worker = start_worker(isolated_home, postgres_url, model, env_extra={"GITHUB_TOKEN": TOKEN},
                              log=tmp_path / "worker.log")
        try:
            rows = wait_final(postgres_url, 1, timeout=60)
        finally:
            worker.kill()
            worker.wait(10)
    assert sorted(statuses) == [200, 202] and rows[0][1] == "done", rows
    posted = github.comments[("org/app", 7)]
    assert len(posted) == 1 and "clock is not pinned" in posted[0]["body"]
    assert f"<!-- auger-task:{rows[0][0]} -->" in posted[0]["body"]
    assert not github.pulls  # an answer, not a change


def test_a_review_tasks_findings_land_as_line_comments_on_added_lines(bare, tmp_path, isolated_home, postgres_url):
    review = {"verdict": "needs changes", "summary": "two() returns a string.",
              "findings": [
                  {"title": "two() returns a str", "body": "Callers expect an int.", "priority": 1,
                   "confidence": 0.9, "file": "app.py", "line_start": 5, "line_end": 6},
                  {"title": "README is thin", "body": "Say what app.py does.", "priority": 3, "confidence": 0.4,
                   "file": "README.md", "line_start": 1, "line_end": 1},
                  {"title": "No tests", "body": "Add one for two().", "priority": 2, "confidence": 0.7,
                   "file": None, "line_start": None, "line_end": None}]}
    with GitHubStandIn(TOKEN, {"org/app": bare}) as github, \
            MockChatServer([Reply(text=json.dumps(review))], loop=True) as model:
        pull = github.add_pull("org/app", "feature", "main")
        git(bare, "update-ref", f"refs/pull/{pull['number']}/head", "feature")  # as GitHub keeps a PR's head
        configure(isolated_home, github, bare)
        submit(isolated_home, postgres_url, model, bare, "Review for correctness.", "--review", "--ref",
               f"refs/pull/{pull['number']}/head",
               "--base", "main", "--deliver", "comment", "--issue", str(pull["number"]))
        worker = start_worker(isolated_home, postgres_url, model, env_extra={"GITHUB_TOKEN": TOKEN},
                              log=tmp_path / "worker.log")
        try:
            rows = wait_final(postgres_url, 1, timeout=60)
        finally:
            worker.kill()
            worker.wait(10)
    assert rows[0][1] == "done", (rows, (tmp_path / "worker.log").read_text())
    posted = github.reviews[("org/app", pull["number"])]
    assert len(posted) == 1 and posted[0]["commit_id"] == pull["head"]["sha"]
    assert [(c["path"], c["line"], c["side"]) for c in posted[0]["comments"]] == [("app.py", 5, "RIGHT")]
    assert github.review_lines == [("app.py", 5)]  # accepted by the stand-in: a line the pull request adds
    assert "README.md:1" in posted[0]["body"] and "No tests" in posted[0]["body"]
    assert "needs changes" in posted[0]["body"]


def test_a_worker_without_a_forge_refuses_a_task_that_asks_to_push(bare, tmp_path, isolated_home, postgres_url):
    with changing_model() as model:
        submit(isolated_home, postgres_url, model, bare, "task push", "--deliver", "pr")
        worker = start_worker(isolated_home, postgres_url, model, log=tmp_path / "worker.log")
        try:
            rows = wait_final(postgres_url, 1, timeout=60)
        finally:
            worker.kill()
            worker.wait(10)
    assert rows[0][1:3] == ("failed", "refused") and "[forge]" in rows[0][3]
    assert git(bare, "branch", "--list", "auger/*") == ""


def test_the_forge_knows_its_repositories_and_sends_its_token_only_to_its_own_hosts(tmp_path):
    github = GitHub("tok", hosts=("github.com",), repos={str(tmp_path.resolve() / "m.git"): "org/mirror"})
    assert github.repository("https://github.com/Org/App.git") == "Org/App"
    assert github.repository("git@github.com:org/app.git") == "org/app"
    assert github.repository("https://gitlab.com/org/app.git") is None
    assert github.repository(str(tmp_path / "m.git")) == "org/mirror"
    assert github.push_config("https://github.com/org/app.git")[0][0] == "http.https://github.com/.extraheader"
    for elsewhere in ("https://evil.example/org/app.git", "http://github.com/org/app.git", "git@github.com:org/app",
                      str(tmp_path / "m.git")):
        assert github.push_config(elsewhere) == []
    enterprise = forge_from_config({"forge": {"api_url": "https://ghe.corp.example/api/v3"}}, {"GITHUB_TOKEN": "t"})
    assert enterprise.hosts == ("ghe.corp.example",) and enterprise.api_url == "https://ghe.corp.example/api/v3"
    assert enterprise.repository("https://ghe.corp.example/team/svc") == "team/svc"
    with pytest.raises(ForgeConfigError, match="GITHUB_TOKEN"):
        forge_from_config({"forge": {}}, {})
