"""A turn parked at a tool approval (Session.park) waits for a person without holding its process: its
open calls stay open in the store, the request is not withdrawn, and a session resumed anywhere later
(`resume(parked=True)`) continues it with the answer (`continue_parked`): the call that asked runs once —
or is denied with the answer's note — and the model carries on from its output, as if the approval had
only taken long."""

from __future__ import annotations

import asyncio

from auger.engine.turn.history import INTERRUPTED_OUTPUT
from auger.engine.session.sessions import SessionManager, run_prompt
from auger.engine.workspace import Workspace
from auger.models.registry import client_for
from auger.protocol import events as ev
from auger.protocol.items import ToolCall as CallItem, ToolOutput
from auger.protocol.ops import ApprovalDecision, UserTurn
from auger.protocol.vocab import ApprovalOption
from auger.store.sqlite import SqliteStore
from tests.support.harness import make_config
from tests.support.mock_openai import MockChatServer, Reply, ToolCall


def _manager(project, server, db):
    config = make_config("provider=openai-compatible", f"base_url={server.base_url}", "model=mock-model", "mode=safe")
    store = SqliteStore(db)
    return SessionManager(Workspace.open(project, config), store), client_for(config, env={"OPENAI_API_KEY": "k"})


async def _park(project, server, db):
    """Run a prompt whose write asks; park at the request. (session id, request, events)."""
    manager, client = _manager(project, server, db)
    session = await manager.create(client, mode="safe", interactive=True)
    envelopes = []

    def on_envelope(envelope):
        envelopes.append(envelope)
        if isinstance(envelope.event, ev.ApprovalRequest):
            assert session.park(envelope.event.request_id)

    await run_prompt(session, UserTurn("write it"), on_envelope=on_envelope)
    await manager.store.aclose()
    return session.id, next(e.event for e in envelopes if isinstance(e.event, ev.ApprovalRequest)), envelopes


async def _continue(project, server, db, session_id, answer, call_id):
    manager, client = _manager(project, server, db)
    session = await manager.resume(session_id, client=client, interactive=True, parked=True)
    session.continue_parked(answer, call_id)
    envelopes = []
    await run_prompt(session, turns=1, on_envelope=envelopes.append)
    items = [s.item for s in await manager.store.load_items(session_id)]
    await manager.store.aclose()
    return envelopes, items


def test_a_parked_approval_is_continued_with_its_answer_and_the_call_runs_once(project, tmp_path):
    db = tmp_path / "s.db"
    write = ToolCall("write_file", {"path": "out.txt", "content": "approved\n"})
    with MockChatServer([Reply(tool_calls=[write]), Reply(text="written")]) as server:
        session_id, request, parked = asyncio.run(_park(project, server, db))
        ended = [e.event for e in parked if isinstance(e.event, ev.TurnEnded)]
        assert ended[0].reason == "cancelled" and ended[0].message.startswith("parked: waiting for an answer")
        assert not any(isinstance(e.event, ev.ApprovalResolved) for e in parked)  # not withdrawn
        assert not (project / "out.txt").exists() and len(server.chat_requests) == 1
        answer = ApprovalDecision(request.request_id, ApprovalOption.APPROVE, by="alice")
        envelopes, items = asyncio.run(_continue(project, server, db, session_id, answer, request.details.call_id))
    resolved = [e.event for e in envelopes if isinstance(e.event, ev.ApprovalResolved)]
    assert [(r.request_id, r.decision, r.by) for r in resolved] == [(request.request_id, "approve", "alice")]
    assert not any(isinstance(e.event, ev.ApprovalRequest) for e in envelopes)  # not asked again
    assert (project / "out.txt").read_text() == "approved\n"
    outputs = [i for i in items if isinstance(i, ToolOutput)]
    assert len(outputs) == 1 and outputs[0].ok and outputs[0].output != INTERRUPTED_OUTPUT
    assert sum(isinstance(i, CallItem) for i in items) == 1
    assert [e.event.reason for e in envelopes if isinstance(e.event, ev.TurnEnded)] == ["complete"]
    tool_messages = [m for m in server.chat_requests[-1].body["messages"] if m["role"] == "tool"]
    assert len(tool_messages) == 1 and "out.txt" in tool_messages[0]["content"]


def test_a_parked_approval_answered_deny_tells_the_model_and_writes_nothing(project, tmp_path):
    db = tmp_path / "s.db"
    write = ToolCall("write_file", {"path": "out.txt", "content": "no\n"})
    with MockChatServer([Reply(tool_calls=[write]), Reply(text="ok, not written")]) as server:
        session_id, request, _ = asyncio.run(_park(project, server, db))
        answer = ApprovalDecision(request.request_id, ApprovalOption.DENY, feedback="not today", by="bob")
        envelopes, items = asyncio.run(_continue(project, server, db, session_id, answer, request.details.call_id))
    assert not (project / "out.txt").exists()
    outputs = [i for i in items if isinstance(i, ToolOutput)]
    assert len(outputs) == 1 and not outputs[0].ok and "not today" in outputs[0].output
    assert [e.event.reason for e in envelopes if isinstance(e.event, ev.TurnEnded)] == ["complete"]


def test_a_parked_session_resumed_without_its_answer_closes_the_open_call(project, tmp_path):
    """Resumed as any session is (say `auger resume`), the call a parked turn left open is interrupted, so the
    conversation stays sendable."""
    db = tmp_path / "s.db"
    write = ToolCall("write_file", {"path": "out.txt", "content": "x\n"})
    with MockChatServer([Reply(tool_calls=[write]), Reply(text="fine")]) as server:
        session_id, _, _ = asyncio.run(_park(project, server, db))

        async def resume():
            manager, client = _manager(project, server, db)
            session = await manager.resume(session_id, client=client)
            await run_prompt(session, UserTurn("go on"))
            items = [s.item for s in await manager.store.load_items(session_id)]
            await manager.store.aclose()
            return items

        items = asyncio.run(resume())
    outputs = [i for i in items if isinstance(i, ToolOutput)]
    assert len(outputs) == 1 and outputs[0].output == INTERRUPTED_OUTPUT
    assert not (project / "out.txt").exists()
