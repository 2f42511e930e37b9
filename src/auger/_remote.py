"""Sessions on an `auger serve`: `auger.connect(url, token=…)` gives a `Client` whose sessions have the same
methods as local ones, spoken over the server's HTTP API and event streams (docs/server.md).

Two promises of the server make a flaky network harmless, and this client leans on both:

* Every op is posted under a submission id this client chooses, so a post whose answer was lost is
  simply posted again: the server recognises the id and starts nothing twice (`repeated: true`).
  Creating a session has no such id, so it is never retried.
* A session's event stream is numbered by `seq` and resumable: a stream that drops (or that the
  server closes because this client fell behind) is opened again with `Last-Event-ID` = the last seq
  read, and continues with the next envelope — each is read exactly once.

A session the server runs asks every approval of its clients. Without a callback, this client answers
as a headless local session would: deny (or approve, with `approve_all=True`).
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any, AsyncGenerator, Mapping, Sequence

import httpx

from auger._errors import AugerError, ConfigError, Refused, RemoteError, SessionBusy, SessionNotFound
from auger._session import Opening, Session, new_id
from auger._types import Approver, Result, Task, TurnChange
from auger.protocol.envelope import Envelope
from auger.protocol.events import ApprovalRequest
from auger.protocol.items import ChangedFile
from auger.protocol.ops import ApprovalDecision, Op, Shutdown

__all__ = ["Client", "connect"]

TOKEN_ENV = "AUGER_SERVER_TOKEN"
ATTEMPTS = 6  # tries of a request that may be repeated, and reconnections of a stream without progress
STREAM_READ_S = 60.0  # the server pings an idle stream every 15 s: this much silence is a dead connection
_STATUS: dict[int, type[AugerError]] = {400: Refused, 403: Refused, 404: SessionNotFound, 409: SessionBusy,
                                        413: Refused}


def connect(url: str, *, token: str | None = None, timeout: float = 30.0, name: str | None = None) -> Client:
    """A client of the `auger serve` at `url` (`http://127.0.0.1:8765`). `token` is the server's API
    token (default: `AUGER_SERVER_TOKEN`); `name` tells the server who answers approvals (it shows
    in `approval_resolved.by`). Use it as an async context manager, or `aclose()` it."""
    return Client(url, token=token, timeout=timeout, name=name)


class Client:
    """One server's sessions: `open`, `resume` and `run`, as `auger.open`, `auger.resume` and `auger.run`
    are for this process — except that paths are the server's, and the model and mode are within what
    the server allows (its providers; at most its `--mode`)."""

    def __init__(self, url: str, *, token: str | None = None, timeout: float = 30.0, name: str | None = None) -> None:
        token = token or os.environ.get(TOKEN_ENV)
        if not token:
            raise ConfigError(f"no token for {url}: pass token=… or set {TOKEN_ENV} (`auger serve` prints "
                              "where its token is)")
        headers = {"authorization": f"Bearer {token}"}
        if name:
            headers["x-auger-client"] = name
        self.url = url.rstrip("/")
        self._http = httpx.AsyncClient(base_url=self.url, headers=headers, timeout=timeout)
        self._stream_timeout = httpx.Timeout(timeout, read=max(timeout, STREAM_READ_S))

    def open(self, cwd: str, *, model: str | None = None, provider: str | None = None, mode: str | None = None,
             approve: Approver | None = None, approve_all: bool | None = None) -> Opening:
        """A new session in `cwd`, a directory on the server's machine inside one of its roots."""
        body: dict[str, Any] = {"cwd": cwd}
        body.update({key: value for key, value in (("model", model), ("provider", provider), ("mode", mode))
                     if value is not None})
        return Opening(lambda: self._session(body, approve, approve_all))

    def resume(self, session_id: str, *, approve: Approver | None = None,
               approve_all: bool | None = None) -> Opening:
        """A stored session (its full id), opened in the server with its history, model and mode."""
        return Opening(lambda: self._session({"resume": session_id}, approve, approve_all))

    async def run(self, prompt: str, *, cwd: str, model: str | None = None, provider: str | None = None,
                  mode: str | None = None, approve: Approver | None = None, approve_all: bool | None = None,
                  output_schema: Mapping[str, Any] | None = None, images: Sequence[str] = (),
                  until: str | None = None, goal: str | None = None, max_turns: int | None = None) -> Result:
        """One prompt in a new session on the server, which is shut down after; as `auger.run` (`until`,
        `goal`, `max_turns`: a goal run, its command run in the server's sandbox)."""
        async with self.open(cwd, model=model, provider=provider, mode=mode, approve=approve,
                             approve_all=approve_all) as session:
            return await session.run(prompt, output_schema=output_schema, images=images, until=until, goal=goal,
                                     max_turns=max_turns)

    async def submit(self, prompt: str, *, repo: str, ref: str = "HEAD", model: str | None = None,
                     provider: str | None = None, mode: str | None = None, token_budget: int | None = None,
                     cost_budget: float | None = None, approval_timeout: float | None = None,
                     labels: Sequence[str] = (), priority: int = 0, queue: str = "default", max_attempts: int = 3,
                     submission_id: str | None = None) -> Task:
        """Queue a task for the fleet's workers (a server on a PostgreSQL database), as `auger submit`
        does: data only — the workers' operators decide everything else. It is posted under a submission
        id (this client's, or `submission_id`), so a post whose answer was lost is posted again and
        queues nothing twice; the same id for another task is `Refused`."""
        body: dict[str, Any] = {"prompt": prompt, "repo": repo, "ref": ref, "labels": list(labels),
                                "priority": priority, "queue": queue, "max_attempts": max_attempts,
                                "submission_id": submission_id or new_id("task")}
        body.update({key: value for key, value in (("model", model), ("provider", provider), ("mode", mode),
                                                   ("token_budget", token_budget), ("cost_budget", cost_budget),
                                                   ("approval_timeout_s", approval_timeout)) if value is not None})
        record = await self.request("POST", "/api/fleet/tasks", json=body, repeatable=True,
                                    statuses={409: Refused, 404: ConfigError})
        return Task.of(record)

    async def task(self, task_id: str) -> Task:
        """A fleet task's record now (its full 32-digit id)."""
        return Task.of(await self.request("GET", f"/api/fleet/tasks/{task_id}", repeatable=True,
                                          statuses={404: Refused}))

    async def info(self) -> dict[str, Any]:
        """What the server says of itself and of you (`GET /api/server`): its roots, its mode (the most a
        session may get), its model and provider, and `user` — your name and role."""
        info: dict[str, Any] = await self.request("GET", "/api/server", repeatable=True)
        return info

    async def sessions(self, *, limit: int = 50) -> list[dict[str, Any]]:
        """The server's stored sessions, newest first, as it lists them: `id`, `title`, `cwd`, `updated`,
        `created_by`, `open` (running in the server), `running` (a turn runs now), `cost`."""
        listed = await self.request("GET", "/api/sessions", params={"limit": str(limit)}, repeatable=True)
        return list(listed["sessions"])

    async def describe(self, session_id: str) -> dict[str, Any]:
        """A session's record and its state now (`GET /api/sessions/{id}`): `state.last_seq`,
        `state.running_turn`, `state.pending_approvals`, `state.mode`, `state.model`…"""
        snapshot: dict[str, Any] = await self.request("GET", f"/api/sessions/{session_id}", repeatable=True)
        return snapshot

    async def attach(self, session_id: str, *, approve: Approver | None = None,
                     approve_all: bool | None = None) -> Session:
        """A session of the server as it is — running a turn, waiting for an approval, or stored — to follow
        (`Session.follow`) and drive alongside its other clients; the server opens it when an op needs it.
        Leaving it without `close()` leaves it as it is (`close()` shuts it down)."""
        snapshot = await self.describe(session_id)
        return Session(_RemoteLink(self, snapshot), approve if approve is not None else _policy(bool(approve_all)))

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def _session(self, body: dict[str, Any], approve: Approver | None, approve_all: bool | None) -> Session:
        snapshot = await self.request("POST", "/api/sessions", json=body, statuses={400: ConfigError})
        return Session(_RemoteLink(self, snapshot), approve if approve is not None else _policy(bool(approve_all)))

    async def request(self, method: str, path: str, *, json: Any = None, params: Mapping[str, str] | None = None,
                      repeatable: bool = False, statuses: Mapping[int, type[AugerError]] | None = None) -> Any:
        """The JSON answer of one request; a `repeatable` one is tried again after a lost connection or a
        503. A refusal is the API's error for its status (`statuses` over the defaults)."""
        failure: AugerError = RemoteError(f"no answer from {self.url}")
        for attempt in range(ATTEMPTS if repeatable else 1):
            if attempt:
                await asyncio.sleep(_backoff(attempt))
            try:
                response = await self._http.request(method, path, json=json, params=params)
            except httpx.TransportError as exc:
                failure = RemoteError(f"cannot reach {self.url}: {exc or type(exc).__name__}")
                continue
            if response.status_code == 503:
                failure = _refusal(response, statuses)
                continue
            if response.is_success:
                return response.json()
            raise _refusal(response, statuses)
        raise failure

    async def stream(self, path: str, after: int) -> AsyncGenerator[Envelope, None]:
        """A session's envelopes after seq `after`, without end: reconnected with `Last-Event-ID` when the
        stream drops or is closed; RemoteError after ATTEMPTS reconnections that brought nothing."""
        from httpx_sse import aconnect_sse

        cursor, failures = after, 0
        while True:
            if failures:
                if failures >= ATTEMPTS:
                    raise RemoteError(f"lost the event stream of {self.url}{path} after seq {cursor}")
                await asyncio.sleep(_backoff(failures))
            failures += 1
            try:
                async with aconnect_sse(self._http, "GET", path, headers={"last-event-id": str(cursor)},
                                        timeout=self._stream_timeout) as source:
                    if not source.response.is_success:
                        await source.response.aread()
                        raise _refusal(source.response, None)
                    async for sse in source.aiter_sse():
                        if sse.event != "message" or not sse.data:  # the state, `closing` (reconnect), `retry:`
                            continue
                        try:
                            data = json.loads(sse.data)
                        except ValueError:
                            continue
                        seq = data.get("seq") if isinstance(data, dict) else None
                        if not isinstance(seq, int) or seq <= cursor:
                            continue
                        cursor, failures = seq, 0
                        try:
                            envelope = Envelope.from_json(data)
                        except ValueError:  # an event type this version does not know: skipped, as readers do
                            continue
                        yield envelope
            except httpx.TransportError:
                continue


class _RemoteLink:
    """A session of an `auger serve`, as `auger/_session.py` drives it."""

    def __init__(self, client: Client, snapshot: Mapping[str, Any]) -> None:
        self._client = client
        self._id = str(snapshot["id"])
        self._cwd = str(snapshot["cwd"])
        self._path = f"/api/sessions/{self._id}"

    @property
    def session_id(self) -> str:
        return self._id

    @property
    def cwd(self) -> str:
        return self._cwd

    async def cursor(self) -> int:
        snapshot = await self._client.request("GET", self._path, repeatable=True)
        return int(snapshot["state"]["last_seq"])

    async def submit(self, op: Op, submission_id: str) -> None:
        data = op.to_json()
        if isinstance(op, ApprovalDecision):
            data.pop("by", None)  # the server names who answered
        await self._client.request("POST", f"{self._path}/ops", json={"submission_id": submission_id, "op": data},
                                   repeatable=True)

    async def answer(self, decision: ApprovalDecision, submission_id: str) -> None:
        try:
            await self.submit(decision, submission_id)
        except SessionBusy:  # 409: another client answered first
            pass

    def envelopes(self, after: int) -> AsyncGenerator[Envelope, None]:
        return self._client.stream(f"{self._path}/events", after)

    async def changes(self, turn: str | None) -> list[TurnChange]:
        found = await self._client.request("GET", f"{self._path}/diff", params={} if turn is None else {"turn": turn},
                                           repeatable=True, statuses={404: Refused})
        return [TurnChange(t["number"], t["turn_id"], [ChangedFile(**f) for f in t["files"]], t["diff"],
                           bool(t["complete"])) for t in found["turns"]]

    async def fork(self, before: int | None, mode: str | None, approver: Approver | None) -> Session:
        body: dict[str, Any] = {"fork": self._id}
        body.update({key: value for key, value in (("before", before), ("mode", mode)) if value is not None})
        snapshot = await self._client.request("POST", "/api/sessions", json=body, statuses={400: ConfigError})
        return Session(_RemoteLink(self._client, snapshot), approver if approver is not None else _policy(False))

    async def close(self) -> None:
        await self.submit(Shutdown(), new_id("shutdown"))


def _policy(approve_all: bool) -> Approver:
    """What a headless session does with what would be asked: deny it, or approve it (`approve_all`)."""
    def answer(request: ApprovalRequest) -> bool:
        return approve_all

    return answer


def _refusal(response: httpx.Response, statuses: Mapping[int, type[AugerError]] | None) -> AugerError:
    try:
        message = str(response.json()["error"])
    except (ValueError, KeyError, TypeError):
        message = response.text.strip()[:300] or response.reason_phrase
    kind = {**_STATUS, **(statuses or {})}.get(response.status_code)
    if kind is None:
        return RemoteError(f"{response.status_code} from {response.request.url}: {message}", response.status_code)
    return kind(message)


def _backoff(attempt: int) -> float:
    return float(min(0.1 * 2 ** attempt, 5.0))
