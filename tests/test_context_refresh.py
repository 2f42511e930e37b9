"""Instructions, skills and the environment are read again at each user turn and on resume; only changes
are recorded, so a resumed session rebuilds exactly what it sent and then tells what changed."""

from __future__ import annotations

import asyncio
import json
import subprocess

from auger.engine.session.context import INSTRUCTIONS_CHANGED
from auger.protocol import events as ev
from auger.protocol.items import ContextMessage
from auger.protocol.ops import Compact, UserTurn
from auger.store.sqlite import SqliteStore
from tests.support.harness import drive, open_session
from tests.support.mock_openai import Reply

CHANGED_MARK = INSTRUCTIONS_CHANGED.split("\n")[0]


def messages_text(request) -> str:
    return json.dumps(request.body["messages"])


def instruction_items(db, session_id) -> list[ContextMessage]:
    async def load():
        store = SqliteStore(db)
        try:
            return [s.item for s in await store.load_items(session_id)]
        finally:
            await store.aclose()

    return [i for i in asyncio.run(load()) if isinstance(i, ContextMessage) and i.kind == "instructions"]


def test_an_agents_md_edit_during_a_session_is_told_once_at_the_next_turn(project, server, tmp_path):
    (project / "AGENTS.md").write_text("Rule: indent with RULE-TABS.\n")
    server.add(Reply(text="one"), Reply(text="two"), Reply(text="three"))
    db = tmp_path / "s.db"
    edited = []

    def on_event(session, event):
        if isinstance(event, ev.TurnEnded) and not edited:
            edited.append(1)
            (project / "AGENTS.md").write_text("Rule: indent with RULE-SPACES.\n")

    async def main():
        session, store = await open_session(project, server, db)
        try:
            return await asyncio.wait_for(drive(session, "a", "b", "c", on_event=on_event), 30)
        finally:
            await store.aclose()

    run = asyncio.run(main())
    first, second, third = server.chat_requests
    assert "RULE-TABS" in messages_text(first) and "RULE-SPACES" not in messages_text(first)
    changed = [m["content"] for m in second.body["messages"] if CHANGED_MARK in str(m["content"])]
    assert len(changed) == 1 and "RULE-SPACES" in changed[0]
    assert second.body["messages"][-1]["content"] == "b" and second.body["messages"][-2]["content"] == changed[0]
    assert messages_text(third).count(CHANGED_MARK) == 1  # nothing changed again: nothing new recorded
    assert len(instruction_items(db, run.session_id)) == 2


def test_a_resumed_session_rebuilds_what_it_sent_then_records_the_edit(project, server, tmp_path):
    (project / "AGENTS.md").write_text("Rule: the codename is OLD-RULE.\n")
    server.add(Reply(text="first answer"), Reply(text="resumed answer"))
    db = tmp_path / "s.db"

    async def main():
        session, store = await open_session(project, server, db)
        await asyncio.wait_for(drive(session, "first"), 30)
        await store.aclose()
        (project / "AGENTS.md").write_text("Rule: the codename is NEW-RULE.\n")
        resumed, store = await open_session(project, server, db, resume=session.id)
        await asyncio.wait_for(drive(resumed, "second"), 30)
        await store.aclose()
        return session.id

    session_id = asyncio.run(main())
    before, after = [r.body["messages"] for r in server.chat_requests]
    recorded = before + [{"role": "assistant", "content": "first answer"}]
    assert after[:len(recorded)] == recorded  # what was recorded is sent byte for byte as before
    told = after[len(recorded):]
    assert CHANGED_MARK in told[0]["content"] and "NEW-RULE" in told[0]["content"]
    assert told[-1]["content"] == "second"
    assert "OLD-RULE" not in json.dumps(told)
    (original, replacement) = instruction_items(db, session_id)
    assert "OLD-RULE" in original.text and replacement.data == {"instructions": replacement.text.split("\n", 1)[1]}


def test_a_skill_added_mid_session_is_listed_and_can_be_requested(project, server):
    server.add(Reply(text="one"), Reply(text="two"))
    added = []

    def on_event(session, event):
        if isinstance(event, ev.TurnEnded) and not added:
            added.append(1)
            skill = project / ".auger" / "skills" / "deploy"
            skill.mkdir(parents=True)
            (skill / "SKILL.md").write_text("---\nname: deploy\ndescription: How to deploy.\n---\nRun DEPLOY-STEPS.\n")
            session.submit(UserTurn("ship it", skills=["deploy"]))

    async def main():
        session, store = await open_session(project, server, project.parent / "s.db")
        try:
            return await asyncio.wait_for(drive(session, "hello", turns=2, on_event=on_event), 30)
        finally:
            await store.aclose()

    run = asyncio.run(main())
    assert [e.reason for e in run.of(ev.TurnEnded)] == ["complete", "complete"]
    assert "How to deploy." not in messages_text(server.chat_requests[0])
    second = messages_text(server.chat_requests[1])
    assert "deploy: How to deploy." in second and "DEPLOY-STEPS" in second


def test_a_branch_switch_between_turns_is_told_as_an_environment_change(project, server):
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q", "-b", "main"], cwd=project, check=True)
    server.add(Reply(text="one"), Reply(text="two"))
    switched = []

    def on_event(session, event):
        if isinstance(event, ev.TurnEnded) and not switched:
            switched.append(1)
            subprocess.run([*git, "checkout", "-q", "-b", "feature-x"], cwd=project, check=True)

    async def main():
        session, store = await open_session(project, server, project.parent / "s.db")
        try:
            return await asyncio.wait_for(drive(session, "a", "b", on_event=on_event), 30)
        finally:
            await store.aclose()

    asyncio.run(main())
    first, second = [r.body["messages"] for r in server.chat_requests]
    assert "<git_branch>main</git_branch>" in json.dumps(first)
    told = "<environment_context>\n  <git_branch>feature-x</git_branch>\n</environment_context>"
    assert second[-2]["content"] == told


def test_after_a_compaction_only_the_current_instructions_remain(project, server, tmp_path):
    (project / "AGENTS.md").write_text("Rule: OLD-RULE.\n")
    server.add(Reply(text="one"), Reply(text="two"), Reply(text="SUMMARY of the work"), Reply(text="three"))
    steps = []

    def on_event(session, event):
        if isinstance(event, ev.TurnEnded):
            steps.append(1)
            if len(steps) == 1:
                (project / "AGENTS.md").write_text("Rule: NEW-RULE.\n")
                session.submit(UserTurn("b"))
            elif len(steps) == 2:
                session.submit(Compact())
            elif len(steps) == 3:
                session.submit(UserTurn("c"))

    async def main():
        session, store = await open_session(project, server, tmp_path / "s.db")
        try:
            return await asyncio.wait_for(drive(session, "a", turns=4, on_event=on_event), 30)
        finally:
            await store.aclose()

    run = asyncio.run(main())
    assert run.of(ev.ContextCompacted)
    last = messages_text(server.chat_requests[-1])
    assert "NEW-RULE" in last and "OLD-RULE" not in last and "SUMMARY of the work" in last
