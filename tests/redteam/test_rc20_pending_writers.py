"""Pending mode holds back every writer, an ACP backend agent included: what the agent writes through
auger (fs/write_text_file) and with its own tools lands in the session's pending copy and its queue,
`auger pending list` shows it, and the real project is untouched until `auger pending apply`. The
agent reads the pending view, and a backend turn leaves auger's own tools working on the copy.

Judged by the real tree's bytes (tests/support/trees.py), the queue in the store and what the
scripted agent (tests/support/acp_agent.py) was told."""

from __future__ import annotations

import asyncio
import json
import sys

from auger.protocol import events as ev
from auger.protocol.ops import SetBackend, Shutdown, UserTurn
from tests.support.harness import Run, auger_cli, json_events
from tests.support.mock_openai import Reply, ToolCall
from tests.support.trees import tree_state
from tests.test_backends import AGENT, _collect, _until, open_with_backend, script
from tests.test_backends_cli import FAST
from tests.test_pending import load_pending


def test_an_agents_writes_are_queued_and_the_project_untouched_until_apply(isolated_home, project, server):
    (isolated_home / "config.toml").write_text(f"[backends.scripted]\ncommand = {json.dumps(sys.executable)}\n"
                                               f"args = [{json.dumps(str(AGENT))}]\n")
    (project / "a.txt").write_text("old\n")
    before = tree_state(project)
    steps = script({"write": str(project / "a.txt"), "content": "new\n"},  # through auger, by the project's path
                   {"touch": "own.txt", "content": "by the agent itself\n"},  # its own tools, in its working dir
                   {"read": str(project / "a.txt")}, {"say": "done"})
    result = auger_cli("exec", "--json", "--pending", "--approve-all", "--backend", "scripted", "--base-url",
                       server.base_url, "-m", "m", *FAST, steps, home=isolated_home, cwd=project)
    assert result.returncode == 0, result.stderr
    events = json_events(result.stdout)
    said = "".join(e["text"] for e in events if e["type"] == "agent_message")
    assert "wrote" in said and "read: new" in said, said
    assert tree_state(project) == before, "nothing reached the project"

    listed = auger_cli("pending", "list", home=isolated_home, cwd=project)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert any(line.startswith("M a.txt") for line in lines), lines
    assert any(line.startswith("A own.txt") for line in lines), lines

    applied = auger_cli("pending", "apply", home=isolated_home, cwd=project)
    assert applied.returncode == 0, applied.stderr
    assert (project / "a.txt").read_text() == "new\n"
    assert (project / "own.txt").read_text() == "by the agent itself\n"


def test_an_agent_reads_the_pending_view_and_leaves_augers_tools_on_the_copy(project, server):
    (project / "a.txt").write_text("real\n")
    before = tree_state(project)
    server.add(Reply(tool_calls=[ToolCall("write_file", {"path": "queued.txt", "content": "queued by auger\n"})]),
               Reply(text="queued"),
               Reply(tool_calls=[ToolCall("write_file", {"path": "later.txt", "content": "after the agent\n"})]),
               Reply(text="queued again"))
    agent_turn = script({"read": str(project / "queued.txt")}, {"write": str(project / "a.txt"), "content": "agent\n"},
                        {"read": str(project / "a.txt")})

    async def main():
        session, store = await open_with_backend(project, server, project.parent / "sessions.db",
                                                 project.parent / "agent.log", "pending=true", "mode=auto",
                                                 "approve_all=true", backend=None)
        run = Run(session_id=session.id)
        follow = asyncio.create_task(_collect(session, run))
        try:
            turns = 0
            for op in (UserTurn("write it"), SetBackend("scripted"), UserTurn(agent_turn), SetBackend(""),
                       UserTurn("and another")):
                session.submit(op)
                if isinstance(op, UserTurn):
                    turns += 1
                    await _until(lambda done=turns: len(run.of(ev.TurnEnded)) == done)
            session.submit(Shutdown())
            await asyncio.wait_for(follow, 30)
            return run
        finally:
            await store.aclose()

    run = asyncio.run(asyncio.wait_for(main(), 60))
    assert [e.reason for e in run.of(ev.TurnEnded)] == ["complete"] * 3
    said = "".join(e.text for e in run.of(ev.AgentMessage))
    assert "read: queued by auger" in said, "the agent reads what is queued, not the real tree"
    assert "read: agent" in said, "and its own queued write"
    assert tree_state(project) == before, "neither the agent nor auger's tools after it wrote the project"
    queued = {r.path for r in load_pending(project.parent / "sessions.db", run.session_id)}
    assert queued == {"queued.txt", "a.txt", "later.txt"}, queued
