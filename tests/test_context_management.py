"""Context management through real sessions: compaction that keeps the thread, exact resume, rollback, fork,
instructions, skills, prompts, titles."""

from __future__ import annotations

import asyncio
import json
import sqlite3

import pytest

from auger.engine.turn.compact import SUMMARY_PROMPT, keep_user_messages
from auger.engine.turn.history import cap_output
from auger.protocol import events as ev
from auger.protocol.ops import Compact, Rollback, SetMode, Shutdown, UserTurn
from tests.support.harness import conversation, drive, open_session, run_session
from tests.support.mock_openai import Reply, ToolCall

SMALL = ("model_context_window=8000", "model_auto_compact_token_limit=3000")
SUMMARY_MARK = SUMMARY_PROMPT.splitlines()[0]


def is_summary_request(body) -> bool:
    last = body["messages"][-1]
    return last["role"] == "user" and isinstance(last["content"], str) and SUMMARY_MARK in last["content"]


class Scripted:
    """Answers summary requests itself (numbered) and other requests from a queue of replies."""

    def __init__(self, replies):
        self.replies = list(replies)
        self.summaries = 0

    def __call__(self, body):
        if is_summary_request(body):
            self.summaries += 1
            return Reply(text=f"SUMMARY {self.summaries}: working on the report generator.")
        return self.replies.pop(0)

    def install(self, server, extra: int = 20):
        for _ in range(len(self.replies) + extra):
            server.add(self)


def all_text(body) -> str:
    return "\n".join(m["content"] if isinstance(m.get("content"), str) else json.dumps(m) for m in body["messages"])


def big_command(tag: str) -> str:
    return f"python3 -c \"print('\\\\n'.join('{tag} line %d ' % i + 'x' * 60 for i in range(200)))\""


CORRECTIONS = ["Correction: name the module report_gen, not reports.",
               "Correction: dates must be ISO 8601.",
               "Correction: never touch setup.py.",
               "Correction: output CSV with a header row."]
PLAN = [{"step": "write generator", "status": "in_progress"}, {"step": "add tests", "status": "pending"}]


def long_task_script():
    replies = [Reply(tool_calls=[ToolCall("update_plan", {"plan": PLAN})])]
    for n in range(len(CORRECTIONS) + 1):
        replies += [Reply(tool_calls=[ToolCall("shell", {"command": big_command(f"out{n}a")})]),
                    Reply(tool_calls=[ToolCall("shell", {"command": big_command(f"out{n}b")})]),
                    Reply(text=f"done step {n}")]
    return replies


async def _stored_usage(db, session_id: str):
    from auger.store.sqlite import SqliteStore

    store = SqliteStore(db)
    try:
        return await store.usage_breakdown(session_id)
    finally:
        await store.aclose()


@pytest.mark.parametrize("small", [None, "mini"], ids=["session-model", "small-model"])
def test_crossing_the_threshold_repeatedly_keeps_instructions_corrections_and_plan(project, server, small):
    (project / "AGENTS.md").write_text("Project rule: codename ZEBRA-42; always use tabs.\n")
    script = Scripted(long_task_script())
    script.install(server)
    run = run_session(project, server, "Build the report generator.", *CORRECTIONS,
                      overrides=(*SMALL, *([f"small_model={small}"] if small else [])))
    summaries = [r.body["model"] for r in server.chat_requests if is_summary_request(r.body)]
    assert summaries and set(summaries) == {small or "mock-model"}  # the small model summarises, when set
    assert {u.model for u in run.of(ev.TokenUsage) if u.purpose == "compaction"} == {small or "mock-model"}
    stored = asyncio.run(_stored_usage(project.parent / "sessions.db", run.session_id))
    assert {(model, purpose) for model, purpose, _ in stored} == {("mock-model", "turn"),
                                                                  (small or "mock-model", "compaction")}
    compactions = run.of(ev.ContextCompacted)
    assert len(compactions) >= 3, [e.TYPE for e in run.events]
    assert all(c.reason == "auto" and c.items_archived > 0 and c.tokens_after < c.tokens_before for c in compactions)
    assert [e.reason for e in run.of(ev.TurnEnded)] == ["complete"] * 5
    normal = [r.body for r in server.chat_requests if not is_summary_request(r.body)]
    given = ["Build the report generator."]
    checked = 0
    for body in normal:
        text = all_text(body)
        users = [m["content"] for m in body["messages"] if m["role"] == "user"]
        given += [c for c in CORRECTIONS if c in users and c not in given]
        assert "ZEBRA-42" in text, "project instructions lost"
        for said in given:
            assert said in text, f"user correction lost: {said}"
        if "SUMMARY" in text:  # after a compaction the plan is carried as state
            assert "<current_plan>" in text and "[>] write generator" in text
            checked += 1
    assert checked >= 3
    assert len(given) == len(CORRECTIONS) + 1


def _snapshot(db, copy):
    src, dst = sqlite3.connect(db), sqlite3.connect(copy)
    with dst:
        src.backup(dst)
    src.close()
    dst.close()


def test_resume_after_compaction_and_rollback_rebuilds_a_byte_identical_request(project, server, tmp_path):
    (project / "AGENTS.md").write_text("Use tabs.\n")
    script = Scripted([Reply(tool_calls=[ToolCall("update_plan", {"plan": PLAN})]), Reply(text="one"),
                       Reply(tool_calls=[ToolCall("shell", {"command": big_command("a")})]), Reply(text="two"),
                       Reply(text="three"), Reply(text="next, live"), Reply(text="next, resumed")])
    script.install(server)
    db, copy = tmp_path / "live.db", tmp_path / "copy.db"

    async def main():
        session, store = await open_session(project, server, db, *SMALL)
        await drive_no_shutdown(session, "first task", "second, with a big output", "third")
        session.submit(Compact())
        await until(session, ev.ContextCompacted)
        await until(session, ev.TurnEnded)
        session.submit(Rollback(1))
        await until(session, ev.RolledBack)
        _snapshot(db, copy)  # the store as a crash right now would leave it
        session.submit(UserTurn("next"))
        await until(session, ev.TurnEnded)
        live_request = server.chat_requests[-1].raw
        session.submit(Shutdown())
        await session.wait_closed()
        await store.aclose()
        resumed, store2 = await open_session(project, server, copy, *SMALL, resume=session.id)
        resumed.submit(UserTurn("next"))
        await until(resumed, ev.TurnEnded)
        resumed_request = server.chat_requests[-1].raw
        resumed.submit(Shutdown())
        await resumed.wait_closed()
        await store2.aclose()
        return live_request, resumed_request

    live, resumed = asyncio.run(main())
    assert live == resumed
    body = json.loads(live)
    text = all_text(body)
    assert "SUMMARY" in text and "<current_plan>" in text and "Use tabs." in text
    users = [m["content"] for m in body["messages"] if m["role"] == "user"]
    assert "third" not in users and users[-1] == "next"  # the rolled-back turn is gone


async def drive_no_shutdown(session, *prompts):
    for prompt in prompts:
        session.submit(UserTurn(prompt))
        await until(session, ev.TurnEnded)


async def until(session, kind):
    while True:
        event = await asyncio.wait_for(session.next_event(), 30)
        if isinstance(event, kind):
            return event


def test_summary_request_that_overflows_drops_oldest_items_and_retries(project, server):
    from tests.support.mock_openai import Fault

    server.add(Reply(text="a"), Reply(text="b"), Fault.context_length(), Reply(text="SUMMARY after trimming"))
    done = []

    def on_event(session, event):
        if isinstance(event, ev.TurnEnded) and len(done) == 1:
            session.submit(Compact())
        if isinstance(event, ev.TurnEnded):
            done.append(event)

    run = run_session(project, server, "one", "two", on_event=on_event, turns=3)
    (compacted,) = run.of(ev.ContextCompacted)
    assert compacted.reason == "manual" and compacted.summary == "SUMMARY after trimming"
    first_try, second_try = [r.body for r in server.chat_requests[2:4]]
    assert len(second_try["messages"]) < len(first_try["messages"])


def test_rollback_and_its_refusals(project, server):
    server.add(Reply(text="a1"), Reply(tool_calls=[ToolCall("shell", {"command": "sleep 1"})]), Reply(text="a2"))
    sent = []

    def on_event(session, event):
        if isinstance(event, ev.TurnEnded) and not sent:
            sent.append(1)
            session.submit(Rollback(0))
            session.submit(Rollback(5))
            session.submit(Rollback(1))
            session.submit(UserTurn("after rollback"))
        elif isinstance(event, ev.ToolCallStarted):
            session.submit(Rollback(1))  # refused: a turn is running

    run = run_session(project, server, "first", on_event=on_event, turns=2)
    warnings = [w.message for w in run.of(ev.WarningEvent)]
    assert any("not 0" in w for w in warnings) and any("not 5" in w for w in warnings)
    assert any("a turn is running" in w for w in warnings)
    assert [(r.turns, r.user_messages_left) for r in run.of(ev.RolledBack)] == [(1, 0)]
    users = [m["content"] for m in conversation(server.chat_requests[1].body["messages"]) if m["role"] == "user"]
    assert users == ["after rollback"]


def test_fork_copies_history_and_can_cut_before_a_user_message(project, server, tmp_path):
    from auger.engine.session.sessions import SessionManager
    from auger.engine.workspace import Workspace
    from auger.models.registry import client_for
    from auger.store.sqlite import SqliteStore
    from tests.support.harness import make_config

    server.add(Reply(text="r1"), Reply(text="r2"), Reply(text="forked answer"))
    db = tmp_path / "f.db"
    run = run_session(project, server, "alpha", "beta", db=db)

    async def main():
        config = make_config("provider=openai-compatible", f"base_url={server.base_url}", "model=mock-model")
        store = SqliteStore(db)
        forked = await SessionManager(Workspace.open(project, config), store).fork(
            run.session_id, before_user_message=2, client=client_for(config, env={"OPENAI_API_KEY": "k"}))
        result = await drive(forked, "gamma")
        original = await store.load_items(run.session_id)
        await store.aclose()
        return forked.id, result, original

    fork_id, result, original = asyncio.run(main())
    assert fork_id != run.session_id and result.ended.reason == "complete"
    users = [m["content"] for m in conversation(server.chat_requests[-1].body["messages"]) if m["role"] == "user"]
    assert users == ["alpha", "gamma"]
    assert sum(1 for s in original if s.item.TYPE == "user_message") == 2  # the source is untouched


def test_instructions_environment_and_mode_changes_are_told_once(project, server, isolated_home):
    (isolated_home / "AGENTS.md").write_text("Global: answer in English.\n")
    (project / "AGENTS.md").write_text("Project: run make test before finishing.\n")
    (project / "sub").mkdir()
    server.add(Reply(text="ok"), Reply(text="ok2"))
    switched = []

    def on_event(session, event):
        if isinstance(event, ev.TurnEnded) and not switched:
            switched.append(1)
            session.submit(SetMode("safe"))

    run_session(project, server, "one", "two", on_event=on_event)
    first, second = [r.body["messages"] for r in server.chat_requests]
    opening = first[1]["content"]
    assert opening.startswith("<user_instructions>") and "Global: answer in English." in opening
    assert "Project: run make test" in opening
    assert first[2]["content"].startswith("<environment_context>") and "<trust_mode>auto</trust_mode>" in first[2]["content"]
    change = [m["content"] for m in second if m["role"] == "user" and "<trust_mode>safe" in str(m["content"])]
    assert change == ["<environment_context>\n  <trust_mode>safe</trust_mode>\n</environment_context>"]
    assert first[0]["role"] == "system" and "environment_context" not in first[0]["content"]


def test_skills_are_listed_loaded_and_invocable(project, server):
    skill = project / ".auger" / "skills" / "release"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: release\ndescription: How to cut a release.\n---\n"
                                    "Bump the version, tag it, push the tag.\n")
    server.add(Reply(tool_calls=[ToolCall("skill", {"name": "release"})]), Reply(text="done"), Reply(text="again"))
    done = []

    def on_event(session, event):
        if isinstance(event, ev.TurnEnded) and not done:
            done.append(1)
            session.submit(UserTurn("do it again", skills=["release"]))

    run_session(project, server, "release it", on_event=on_event, turns=2)
    first = server.chat_requests[0].body
    assert "release" in {t["function"]["name"] for t in first["tools"]} or "skill" in {
        t["function"]["name"] for t in first["tools"]}
    assert "How to cut a release." in all_text(first)
    loaded = [m["content"] for m in server.chat_requests[1].body["messages"] if m["role"] == "tool"][-1]
    assert "Bump the version" in loaded
    last = server.chat_requests[2].body["messages"]
    assert "Bump the version" in last[-2]["content"] and last[-1]["content"] == "do it again"


def test_custom_prompt_slash_command_expands(project, server, isolated_home):
    (isolated_home / "prompts").mkdir()
    (isolated_home / "prompts" / "fix.md").write_text("Fix issue $1 in $2. Context: $ARGUMENTS\n")
    server.add(Reply(text="ok"))
    run_session(project, server, '/fix 42 "src/app.py"')
    assert server.chat_requests[0].body["messages"][-1]["content"] == \
        'Fix issue 42 in src/app.py. Context: 42 "src/app.py"'


def test_token_usage_reports_context_fill(project, server):
    server.add(Reply(text="hi", usage={"prompt_tokens": 2000, "completion_tokens": 100}))
    run = run_session(project, server, "hi", overrides=("model_context_window=10000",))
    (usage,) = run.of(ev.TokenUsage)
    assert usage.context_window == 10000 and usage.context_used == 2100 and usage.context_left_percent == 79.0


def test_title_is_generated_in_the_background_and_failures_are_harmless(project, server):
    server.add(Reply(text="answer"), Reply(text='"Fixing The Flaky Login Test Suite Today Now"'))
    run = run_session(project, server, "the login test is flaky", overrides=("generate_titles=true",),
                      turns=1, until=ev.SessionTitle)
    (title,) = run.of(ev.SessionTitle)
    assert title.title == "Fixing The Flaky Login Test Suite"


def test_long_outputs_keep_head_and_tail_in_the_prompt(project, server):
    (project / "big.txt").write_text("".join(f"line {n} " + "y" * 50 + "\n" for n in range(400)))
    server.add(Reply(tool_calls=[ToolCall("read_file", {"path": "big.txt"})]), Reply(text="ok"))
    run_session(project, server, "count", overrides=("model_context_window=20000",))
    out = [m["content"] for m in server.chat_requests[-1].body["messages"] if m["role"] == "tool"][0]
    assert "characters cut from the middle" in out and "recall with call_id" in out
    assert "line 0 " in out and "line 399 " in out and len(out) < 5000


def test_user_message_budget_and_cap_output_units():
    kept = keep_user_messages(["a" * 400, "b" * 400, "c" * 400], budget_tokens=250)
    assert kept.messages == ["b" * 400, "c" * 400] and kept.dropped == 1
    only = keep_user_messages(["z" * 10_000], budget_tokens=100)
    assert len(only.messages) == 1 and "was cut" in only.messages[0]
    text = "H" * 5000 + "T" * 5000
    capped = cap_output(text, 4000, "c9")
    assert capped.startswith("H" * 2400) and capped.endswith("T" * 1600) and "6000 characters cut" in capped


def test_a_skill_added_mid_session_loads_with_the_skill_tool(project, server):
    """The `skill` tool reads the session's current skill index, not the one found at start-up."""
    skills = project / ".auger" / "skills"
    (skills / "release").mkdir(parents=True)
    (skills / "release" / "SKILL.md").write_text("---\nname: release\ndescription: How to cut a release.\n---\n"
                                                 "Bump the version.\n")
    server.add(Reply(text="ok"), Reply(tool_calls=[ToolCall("skill", {"name": "deploy"})]), Reply(text="done"))

    def on_event(session, event):
        if isinstance(event, ev.TurnEnded) and event.reason == "complete" and not (skills / "deploy").exists():
            (skills / "deploy").mkdir()
            (skills / "deploy" / "SKILL.md").write_text("---\nname: deploy\ndescription: How to deploy.\n---\n"
                                                        "Run the deploy script.\n")
            session.submit(UserTurn("deploy it"))

    run = run_session(project, server, "hello", on_event=on_event, turns=2)
    assert [e.reason for e in run.of(ev.TurnEnded)] == ["complete", "complete"]
    loaded = [m["content"] for m in server.chat_requests[2].body["messages"] if m["role"] == "tool"][-1]
    assert "Run the deploy script." in loaded, loaded
