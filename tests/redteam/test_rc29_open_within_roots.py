"""Whatever `auger serve` opens, forks or resumes lies inside its roots; a fleet task's session is followed
and answered, never opened here.

A fleet task's session is visible whatever the roots (its checkout is on a worker's machine). A hostile
client asks the server to fork it, resume it, or send it an op that would open it — over HTTP and over
`/acp` — and does the same with a plain stored session outside the roots. The model would write
`pwned.txt` in whatever directory a session it could drive works in (the server runs in auto mode), so
the attack is judged by effect: the 201/200/202 does not happen (403, or 404 for what is not visible),
no file appears in the worker's checkout, no session row is added, the model is never asked. The fleet
session stays readable (its snapshot, items and event stream) and answerable (an approval and an
interrupt are relayed to its worker through the store).
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import psycopg
import pytest

from auger.protocol import events as ev
from auger.protocol.envelope import Envelope
from auger.protocol.items import AssistantMessage, UserMessage
from auger.store.base import SessionRecord
from tests.support.mock_openai import MockChatServer, Reply, ToolCall
from tests.support.serve import TOKEN, served

TIMEOUT = 90
SID = "0000f1ee-0000-4000-8000-000000000029"


def _model() -> MockChatServer:
    """A model that writes pwned.txt where the session works, whenever it is asked."""
    write = Reply(tool_calls=[ToolCall("write_file", {"path": "pwned.txt", "content": "written by a client\n"})])
    return MockChatServer([write, Reply(text="done")] * 4)


def _checkout(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "README.md").write_text("a worker's checkout\n")
    return path


async def _seed(store, cwd: Path, *, running: bool) -> None:
    """A stored session in `cwd` with one exchange; `running`: the store shows a turn started, not ended (a
    worker runs it now)."""
    now = time.time()
    await store.create_session(SessionRecord(SID, now, now, str(cwd), "openai-compatible", "mock-model", "auto",
                                             "a task"))
    await store.append(SID, "t1", UserMessage("task fix the bug"))
    await store.append(SID, "t1", AssistantMessage("working on it"))
    if running:
        await store.append_events(SID, [Envelope(SID, 1, ev.TurnStarted("t2"), time=now)])


async def _own_by_a_task(store, url: str) -> None:
    from auger.fleet.tasks import Tasks, TaskSpec

    task, _ = await Tasks(store).submit(TaskSpec(prompt="task fix the bug", repo="/srv/repo.git"))
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("UPDATE tasks SET state = 'running', session_id = %s WHERE id = %s", (SID, task.id))


def _sessions(url: str) -> int:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute("SELECT count(*) FROM sessions").fetchone()[0]


async def _attacks(client, cwd: Path) -> dict[str, int]:
    """Every way an HTTP client might get the session opened here; their statuses."""
    answers = {
        "fork": await client.post("/api/sessions", json={"fork": SID}),
        "fork with cwd": await client.post("/api/sessions", json={"fork": SID, "cwd": str(cwd)}),
        "resume": await client.post("/api/sessions", json={"resume": SID}),
        "user_turn": await client.post(f"/api/sessions/{SID}/ops", json={
            "submission_id": "attack-turn", "op": {"type": "user_turn", "text": "write pwned.txt"}}),
        "set_mode": await client.post(f"/api/sessions/{SID}/ops", json={
            "submission_id": "attack-mode", "op": {"type": "set_mode", "mode": "auto"}}),
        "run_shell": await client.post(f"/api/sessions/{SID}/ops", json={
            "submission_id": "attack-shell", "op": {"type": "run_shell", "command": "touch pwned.txt"}}),
    }
    return {name: answer.status_code for name, answer in answers.items()}


async def _acp(url: str, cwd: Path, project: Path) -> tuple[list[str], list[str]]:
    """Load, resume and fork the session over /acp (from its own directory and from the root); the
    refusals, and the ids session/list shows."""
    from acp import RequestError, connect_to_agent
    from acp.schema import ClientCapabilities
    from acp.ws.client import create_websocket_stream

    class Editor:
        async def session_update(self, session_id, update, **kwargs):
            pass

        def on_connect(self, conn):
            pass

    transport = await create_websocket_stream(url.replace("http", "ws") + "/acp",
                                              headers={"Authorization": f"Bearer {TOKEN}"})
    conn = connect_to_agent(Editor(), transport)
    await conn.initialize(protocol_version=1, client_capabilities=ClientCapabilities())
    refused, opened = [], []
    try:
        for where in {str(cwd), str(project)}:
            for attempt in (lambda: conn.load_session(cwd=where, session_id=SID, mcp_servers=[]),
                            lambda: conn.resume_session(session_id=SID, cwd=where, mcp_servers=[]),
                            lambda: conn.fork_session(session_id=SID, cwd=where, mcp_servers=[])):
                try:
                    opened.append(await attempt())
                except RequestError as exc:
                    refused.append(str(exc.data))
        listed = [s.session_id for s in (await conn.list_sessions()).sessions]
    finally:
        await conn.close()
        await transport.close()
    assert opened == [], opened
    return refused, listed


def test_a_fleet_session_outside_the_roots_is_followed_and_answered_never_opened(tmp_path, project, postgres_url):
    pytest.importorskip("acp", reason="the agent-client-protocol SDK (the `acp` extra) is not installed")
    checkout = _checkout(tmp_path / "worker" / "checkout")

    async def main(mock):
        async with served(project, mock, postgres_url, mode="auto") as srv:
            await _seed(srv.store, checkout, running=True)
            await _own_by_a_task(srv.store, postgres_url)
            await srv.store.add_pending(SID, "README.md", "x", b"queued by the worker\n", None, "main", "c1",
                                        "write_file")
            statuses = await _attacks(srv.client, checkout)
            statuses["pending (reads the checkout)"] = (await srv.client.get(f"/api/sessions/{SID}/pending")).status_code
            refused, _ = await _acp(srv.url, checkout, project)
            snapshot = await srv.client.get(f"/api/sessions/{SID}")
            items = await srv.client.get(f"/api/sessions/{SID}/items")
            listed = [s["id"] for s in (await srv.client.get("/api/sessions")).json()["sessions"]]
            async with srv.events(SID) as stream:
                first = await anext(stream)
            approval = await srv.client.post(f"/api/sessions/{SID}/ops", json={
                "submission_id": "answer-1", "op": {"type": "approval_decision", "request_id": "r1",
                                                     "decision": "approve"}})
            interrupt = await srv.client.post(f"/api/sessions/{SID}/ops", json={
                "submission_id": "stop-1", "op": {"type": "interrupt"}})
            relayed = await srv.store.take_ops(SID)
            await asyncio.sleep(0.5)  # a session opened by an attack would have asked the model by now
            live = srv.server.hub.live(SID)
            return statuses, refused, snapshot, items, listed, first, approval, interrupt, relayed, live

    with _model() as mock:
        (statuses, refused, snapshot, items, listed, first, approval, interrupt, relayed,
         live) = asyncio.run(asyncio.wait_for(main(mock), TIMEOUT))
        assert statuses.pop("pending (reads the checkout)") == 409  # its files are read where it runs
        assert statuses == {name: 403 for name in statuses}, statuses
        assert len(refused) == 6, refused
        assert mock.chat_requests == []
    assert sorted(p.name for p in checkout.iterdir()) == ["README.md"]  # nothing written in the worker's checkout
    assert _sessions(postgres_url) == 1 and live is None  # no fork, nothing opened here
    assert snapshot.status_code == 200 and items.status_code == 200 and SID in listed
    assert first.get("event") == "state" and first["data"]["id"] == SID
    assert approval.status_code == 202 and approval.json().get("relayed") is True
    assert interrupt.status_code == 202 and interrupt.json().get("relayed") is True
    assert [json.loads(op)["type"] for op in relayed] == ["approval_decision", "interrupt"]  # for its worker


def test_a_fleet_session_whose_checkout_is_inside_a_root_is_still_never_opened_here(tmp_path, project,
                                                                                    postgres_url):
    pytest.importorskip("acp", reason="the agent-client-protocol SDK (the `acp` extra) is not installed")
    checkout = _checkout(project / "worker-checkout")  # a worker on this machine, checking out under a root

    async def main(mock):
        async with served(project, mock, postgres_url, mode="auto") as srv:
            await _seed(srv.store, checkout, running=False)
            await _own_by_a_task(srv.store, postgres_url)
            statuses = await _attacks(srv.client, checkout)
            refused, acp_listed = await _acp(srv.url, checkout, project)
            await asyncio.sleep(0.5)
            return statuses, refused, acp_listed, srv.server.hub.live(SID)

    with _model() as mock:
        statuses, refused, acp_listed, live = asyncio.run(asyncio.wait_for(main(mock), TIMEOUT))
        assert statuses == {name: 403 for name in statuses}, statuses
        assert any("fleet task" in why for why in refused), refused
        assert SID not in acp_listed and mock.chat_requests == []
    assert sorted(p.name for p in checkout.iterdir()) == ["README.md"]
    assert _sessions(postgres_url) == 1 and live is None


def test_a_plain_stored_session_outside_the_roots_is_neither_opened_nor_listed(tmp_path, project):
    pytest.importorskip("acp", reason="the agent-client-protocol SDK (the `acp` extra) is not installed")
    elsewhere = _checkout(tmp_path / "elsewhere")  # `auger exec` ran there, on the same database

    async def main(mock):
        async with served(project, mock, tmp_path / "s.db", mode="auto") as srv:
            await _seed(srv.store, elsewhere, running=False)
            statuses = await _attacks(srv.client, elsewhere)
            refused, acp_listed = await _acp(srv.url, elsewhere, project)
            snapshot = await srv.client.get(f"/api/sessions/{SID}")
            await asyncio.sleep(0.5)
            return statuses, refused, acp_listed, snapshot, srv.server.hub.live(SID)

    with _model() as mock:
        statuses, refused, acp_listed, snapshot, live = asyncio.run(asyncio.wait_for(main(mock), TIMEOUT))
        assert set(statuses.values()) <= {403, 404}, statuses
        assert len(refused) == 6 and SID not in acp_listed, acp_listed
        assert snapshot.status_code == 404 and mock.chat_requests == [] and live is None
    assert sorted(p.name for p in elsewhere.iterdir()) == ["README.md"]
