"""Images sent over the network are data, not paths; locally, an image path is read beneath the project.

A hostile API client names files in a `user_turn`'s images — a secret outside the roots under a `.png`
name, a symlink `x.png` inside the project pointing out, a relative `../` path, `/etc/passwd` — or sends a
data URL whose bytes are no image, over HTTP and over `/acp`. Judged by effect: the answer is 400 (an ACP
error), and the secret's bytes (as text or base64) are in no request the mock model received. Controls: a
real PNG data URL still reaches the model, and `Session.run(images=[path])` sends a file of the caller's
own as data. Locally the engine reads an image path only beneath the project root, and a stored message
that still names a path is never read again: the model gets a note.
"""

from __future__ import annotations

import asyncio
import base64
import os
import time
from pathlib import Path

import pytest

import auger
from auger.protocol import events as ev
from auger.protocol.items import AssistantMessage, UserMessage
from auger.protocol.ops import UserTurn
from auger.store.base import SessionRecord
from auger.store.sqlite import SqliteStore
from tests.support.harness import run_session
from tests.support.mock_openai import MockChatServer, Reply
from tests.support.serve import TOKEN, served

TIMEOUT = 90
SECRET = b"root:x:0:0:rc28-secret-7d1c:/root:/bin/bash\n"
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")
PNG_URL = "data:image/png;base64," + base64.b64encode(PNG).decode()


def _layout(tmp_path: Path, project: Path) -> dict[str, str]:
    """A secret outside the project under an image's name, a symlink to it inside, and the refs that name
    them as a hostile client would."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "passwd.png").write_bytes(SECRET)
    (project / "x.png").symlink_to(outside / "passwd.png")
    return {"outside": str(outside / "passwd.png"), "symlink": str(project / "x.png"),
            "relative": os.path.relpath(outside / "passwd.png", os.getcwd()), "dotdot": "../outside/passwd.png",
            "etc": "/etc/passwd", "not an image": "data:image/png;base64," + base64.b64encode(SECRET).decode(),
            "wrong type": "data:image/jpeg;base64," + base64.b64encode(PNG).decode()}


def _leaked(mock: MockChatServer) -> list[str]:
    """The requests that carried the secret, as text or base64."""
    marks = (SECRET[:30], base64.b64encode(SECRET)[:40])
    return [r.path for r in mock.requests if any(mark in r.raw for mark in marks)]


def _images_sent(mock: MockChatServer) -> list[str]:
    return [part["image_url"]["url"] for r in mock.chat_requests for m in r.messages
            if isinstance(m.get("content"), list) for part in m["content"] if part.get("type") == "image_url"]


async def _wait_for(predicate, what: str, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_user_turn_over_http_naming_files_or_sending_no_image_is_400_and_nothing_reaches_the_model(
        project, tmp_path):
    refs = _layout(tmp_path, project)

    async def main(mock):
        async with served(project, mock, tmp_path / "s.db") as srv:
            sid = (await srv.client.post("/api/sessions", json={"cwd": str(project)})).json()["id"]
            answers = {}
            for n, (name, ref) in enumerate(refs.items()):
                answers[name] = await srv.client.post(f"/api/sessions/{sid}/ops", json={
                    "submission_id": f"attack-{n}", "op": {"type": "user_turn", "text": "what is this?",
                                                           "images": [ref]}})
            control = await srv.client.post(f"/api/sessions/{sid}/ops", json={
                "submission_id": "control", "op": {"type": "user_turn", "text": "a pixel", "images": [PNG_URL]}})
            await _wait_for(lambda: PNG_URL in _images_sent(mock), "the control image to reach the model")
            await asyncio.sleep(0.5)  # a turn started by an attack would have asked the model by now
            return answers, control

    with MockChatServer([Reply(text="seen")] * 12) as mock:
        answers, control = asyncio.run(asyncio.wait_for(main(mock), TIMEOUT))
        assert {name: a.status_code for name, a in answers.items()} == {name: 400 for name in refs}, \
            {name: a.text for name, a in answers.items()}
        assert "reads no file a client names" in answers["outside"].json()["error"]
        assert "no image" in answers["not an image"].json()["error"]
        assert "says image/jpeg but its data is a PNG image" in answers["wrong type"].json()["error"]
        assert _leaked(mock) == []
        assert control.status_code == 202 and _images_sent(mock) == [PNG_URL]


def test_an_image_block_over_acp_that_is_no_image_is_an_acp_error_and_a_real_one_reaches_the_model(
        project, tmp_path):
    pytest.importorskip("acp", reason="the agent-client-protocol SDK (the `acp` extra) is not installed")
    from acp import RequestError, connect_to_agent, image_block, text_block
    from acp.schema import ClientCapabilities
    from acp.ws.client import create_websocket_stream

    class Editor:
        async def session_update(self, session_id, update, **kwargs):
            pass

        def on_connect(self, conn):
            pass

    async def main(mock):
        async with served(project, mock, tmp_path / "s.db") as srv:
            transport = await create_websocket_stream(srv.url.replace("http", "ws") + "/acp",
                                                      headers={"Authorization": f"Bearer {TOKEN}"})
            conn = connect_to_agent(Editor(), transport)
            await conn.initialize(protocol_version=1, client_capabilities=ClientCapabilities())
            sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
            refused = []
            for data, mime in ((base64.b64encode(SECRET).decode(), "image/png"),
                               (base64.b64encode(PNG).decode(), "image/gif"), ("not base64!", "image/png")):
                with pytest.raises(RequestError) as error:
                    await conn.prompt(prompt=[text_block("what is this?"), image_block(data, mime)], session_id=sid)
                refused.append(str(error.value.data))
            reply = await conn.prompt(prompt=[text_block("a pixel"), image_block(base64.b64encode(PNG).decode(),
                                                                                 "image/png")], session_id=sid)
            await conn.close()
            await transport.close()
            return refused, reply

    with MockChatServer([Reply(text="seen")] * 6) as mock:
        refused, reply = asyncio.run(asyncio.wait_for(main(mock), TIMEOUT))
        assert len(refused) == 3 and "no image" in refused[0] and "image/gif" in refused[1], refused
        assert _leaked(mock) == []
        assert reply.stop_reason == "end_turn" and _images_sent(mock) == [PNG_URL]


def test_a_library_client_sends_its_own_file_as_data_to_a_server(project, tmp_path):
    mine = tmp_path / "mine"  # the caller's own file, outside every root of the server
    mine.mkdir()
    (mine / "dot.png").write_bytes(PNG)

    async def main(mock):
        async with served(project, mock, tmp_path / "s.db") as srv:
            async with auger.connect(srv.url, token=TOKEN) as client:
                async with client.open(str(project)) as session:
                    result = await session.run("a pixel", images=[str(mine / "dot.png")])
                    with pytest.raises(auger.ConfigError, match="cannot read image"):
                        await session.run("and this?", images=[str(mine / "gone.png")])
            return result

    with MockChatServer([Reply(text="a pixel indeed")]) as mock:
        result = asyncio.run(asyncio.wait_for(main(mock), TIMEOUT))
        assert result.text == "a pixel indeed" and _images_sent(mock) == [PNG_URL]


def test_the_engine_reads_an_image_path_only_beneath_the_project_and_records_data(project, tmp_path):
    refs = _layout(tmp_path, project)
    (project / "dot.png").write_bytes(PNG)
    turns = [UserTurn("a", images=[refs["outside"]]), UserTurn("b", images=[refs["symlink"]]),
             UserTurn("c", images=[refs["dotdot"]]), UserTurn("d", images=["dot.png"])]
    db = tmp_path / "local.db"
    with MockChatServer([Reply(text="a pixel")]) as mock:
        run = run_session(project, mock, *turns, db=db)
        ends = run.of(ev.TurnEnded)
        assert [e.reason for e in ends] == ["error", "error", "error", "complete"], [e.message for e in ends]
        assert all("outside the project" in (e.message or "") for e in ends[:3]), [e.message for e in ends]
        assert _leaked(mock) == [] and _images_sent(mock) == [PNG_URL]

    async def stored() -> list[list[str]]:
        store = SqliteStore(db)
        try:
            return [s.item.images for s in await store.load_items(run.session_id) if isinstance(s.item, UserMessage)]
        finally:
            await store.aclose()

    assert asyncio.run(stored()) == [[PNG_URL]]  # the message holds the image itself, not a path


def test_a_stored_message_naming_a_path_is_never_read_the_model_gets_a_note(project, tmp_path):
    refs = _layout(tmp_path, project)
    db = tmp_path / "old.db"

    async def seed() -> str:
        store = SqliteStore(db)
        try:
            now = time.time()
            await store.create_session(SessionRecord("0000aaaa-0000-4000-8000-000000000028", now, now, str(project),
                                                     "openai-compatible", "mock-model", "safe", "old"))
            await store.append("0000aaaa-0000-4000-8000-000000000028", "t1", UserMessage("look", [refs["outside"]]))
            await store.append("0000aaaa-0000-4000-8000-000000000028", "t1", AssistantMessage("I see it"))
            return "0000aaaa-0000-4000-8000-000000000028"
        finally:
            await store.aclose()

    session_id = asyncio.run(seed())
    with MockChatServer([Reply(text="fine")]) as mock:
        run = run_session(project, mock, "and now?", db=db, resume=session_id)
        assert run.ended.reason == "complete", run.ended.message
        assert _leaked(mock) == [] and _images_sent(mock) == []
        assert b"no longer available" in mock.chat_requests[0].raw
