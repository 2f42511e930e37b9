"""Slash commands in the real program in tmux."""

from __future__ import annotations

import re
import time
from pathlib import Path

from tests.support.mock_openai import Reply, ToolCall
from tests.tui.conftest import both_ways
from tests.tui.terminal import status_line


@both_ways
def test_model_mode_compact_and_unavailable_commands(term, server, way):
    server.add(Reply(text="one answer"), Reply(text="The summary of it all."), Reply(text="answered by other"))
    t = term()
    t.ready()
    t.submit("first")
    t.wait_for("one answer")
    for line, expected in [("/mode plan", "mode: auto → plan"), ("/model other-model", "model: mock-model → other-model"),
                           ("/compact", "context compacted (manual)"),
                           ("/diff", "no turn has changed files in this session yet"),
                           ("/review", "/review: "),
                           ("/nonsense", "unknown command /nonsense")]:
        t.submit(line)
        t.wait_for(expected)
    t.wait_until(lambda s: "plan mode" in status_line(s) and "other-model" in status_line(s),
                 "the status line with the new model and mode")
    t.submit("again")
    t.wait_for("answered by other")
    assert server.chat_requests[-1].body["model"] == "other-model"


def test_a_model_switch_typed_during_a_turn_is_applied_as_it_ends(term, server):
    server.add(Reply(tool_calls=[ToolCall("shell", {"command": "sleep 2; echo slept"})]), Reply(text="first done"),
               Reply(text="answered by other"))
    t = term()
    t.ready()
    t.submit("first task")
    t.wait_for("⋯ shell")
    t.submit("/model other-model")
    t.wait_for("after this turn: /model other-model")
    t.wait_for("model: mock-model → other-model")  # applied once the turn ended, not refused
    t.wait_gone("after this turn:")
    assert [r.body["model"] for r in server.chat_requests] == ["mock-model", "mock-model"]  # the running turn kept its model
    t.submit("again")
    t.wait_for("answered by other")
    assert server.chat_requests[-1].body["model"] == "other-model"


@both_ways
def test_resume_picks_a_session_of_this_project(term, server, way):
    server.add(Reply(text="remember the word pelican"), Reply(text="it was pelican"))
    t = term()
    t.ready()
    t.submit("a word please")
    t.wait_for("remember the word pelican")
    t.idle()
    t.submit("/new")
    t.wait_for("new session")
    t.submit("/resume")
    shown = t.wait_for("resume which session?")
    assert "a word please" in shown  # the first session's title
    t.submit("1")
    if way == "remote":  # attached to the server's session as it is: its transcript is shown again
        t.wait_until(lambda s: "› a word please" in s and s.count("remember the word pelican") == 2,
                     "the first session's transcript shown again")
    else:
        t.wait_for("auger · resumed")
    t.submit("which word?")
    t.wait_for("it was pelican")
    sent = [m.get("content") for m in server.chat_requests[-1].messages]
    assert "remember the word pelican" in sent  # the resumed history went to the model


def test_auger_resume_last_and_headless_fallback(term, server, project, auger_home):
    from tests.support.harness import auger_cli

    server.add(Reply(text="headless answer"), Reply(text="continued"))
    result = auger_cli("--base-url", server.base_url, "-m", "mock-model", home=auger_home, cwd=project,
                       input="piped prompt\n")  # no terminal: runs headless like `auger exec`
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "headless answer"
    t = term("resume", "--last")
    t.wait_for("auger · resumed")
    t.submit("go on")
    t.wait_for("continued")
    assert "piped prompt\n" in [m.get("content") for m in server.chat_requests[-1].messages]


def test_auger_resume_without_an_id_offers_this_projects_sessions(term, server, project, auger_home):
    from tests.support.harness import auger_cli

    server.add(Reply(text="stored answer"), Reply(text="picked up"))
    result = auger_cli("exec", "--base-url", server.base_url, "-m", "mock-model", "the stored task",
                       home=auger_home, cwd=project)
    assert result.returncode == 0, result.stderr
    t = term("resume")
    shown = t.wait_for("resume which session?")
    assert "the stored task" in shown
    t.submit("1")
    t.wait_for("auger · resumed")
    t.submit("continue")
    t.wait_for("picked up")
    assert "the stored task" in [m.get("content") for m in server.chat_requests[-1].messages]


def test_the_other_commands_answer(term, server, project):
    skill = project / ".auger" / "skills" / "tidy"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: tidy\ndescription: tidy the imports\n---\nSort imports.\n")
    server.add(Reply(text="first answer"), Reply(text="tidied"))
    t = term()
    t.ready()
    t.submit("first")
    t.wait_for("first answer")
    t.idle()
    for line, expected in [("/help", "approvals: y once"), ("/cost", " tokens · "),
                           ("/status", "sandbox bwrap"), ("/skills", "/tidy"),
                           ("/sessions", "first"), ("/rollback", "rolled back 1 turn"),
                           ("/agents", "none started in this session yet")]:
        t.submit(line)
        t.wait_for(expected)
    t.submit("/tidy")
    t.wait_for("tidied")
    assert any("<skill name='tidy'>" in (m.get("content") or "") for m in server.chat_requests[-1].messages)
    source = re.search(r"auger · new session ([0-9a-f]{8})", t.history()).group(1)
    t.idle()
    t.submit("/fork")
    t.wait_for(f"forked {source}")
    t.submit("/quit")
    t.wait_for("AUGER-EXITED:0", whole=True)


@both_ways
def test_diff_and_undo_of_a_turn_that_wrote_a_file(term, server, project, way):
    server.add(Reply(tool_calls=[ToolCall("write_file", {"path": "greeting.txt", "content": "hello there\n"})]),
               Reply(text="wrote the greeting"))
    t = term("--mode", "auto")
    t.ready()
    t.submit("write a greeting")
    t.wait_for("wrote the greeting")
    t.wait_for("this turn changed 1 file(s): greeting.txt")
    assert (project / "greeting.txt").read_text() == "hello there\n"
    t.submit("/diff")
    t.wait_for("+hello there")
    t.idle()
    t.submit("/undo")
    t.wait_for("undid turn")
    assert not (project / "greeting.txt").exists(), "undo left the file the turn created"
    t.submit("/undo redo")
    t.wait_for("redid turn")
    assert (project / "greeting.txt").read_text() == "hello there\n"


def test_mcp_lists_adds_and_removes_a_server_for_this_session(term, server, project):
    import sys

    # A server added to a session is never trusted: it runs in the session sandbox, which shows the project
    # and auger's interpreter, not the rest of /tmp where this checkout may live: its code sits in the project.
    script = project / "tools_server.py"
    script.write_text((Path(__file__).resolve().parents[1] / "support" / "mcp_server.py").read_text())
    server.add(Reply(tool_calls=[ToolCall("mcp__testsrv__echo", {"text": "via-mcp"})]), Reply(text="echoed it"))
    t = term(width=220)
    t.ready()
    t.submit("/mcp")
    t.wait_for("no MCP servers in this session")
    t.submit("/mcp add broken --url")
    t.wait_for("/mcp add: argument --url: expected one argument")
    t.submit(f"/mcp add testsrv -- {sys.executable} {script}")
    t.wait_for("MCP server 'testsrv': starting")
    for _ in range(40):  # the server starts in the background: ask until it is listed
        t.submit("/mcp")
        time.sleep(0.5)
        if " up " in (shown := t.screen()):
            break
    assert re.search(r"testsrv +up +\d+ tools +stdio .*\(session\)", shown), shown
    t.submit("use the echo tool")
    t.wait_for("echoed it")
    outputs = [m for m in server.chat_requests[-1].messages if m["role"] == "tool"]
    assert any("via-mcp" in str(m["content"]) for m in outputs)
    t.submit("/mcp remove testsrv")
    t.wait_for("removed from this session")
    t.submit("/mcp")
    t.wait_for("no MCP servers in this session")


def test_review_reports_findings_in_the_transcript_and_the_session_goes_on(term, server, project):
    import json

    from tests.support.trees import git
    from tests.test_review import make_repo

    make_repo(project)
    (project / "src/app.py").write_text("def total(items):\n    return sum(items[1:])\n")
    verdict = {"findings": [{"title": "Skips the first item", "body": "items[1:] drops one.", "priority": 1,
                             "confidence": 0.9, "file": "src/app.py", "line_start": 2, "line_end": 2}],
               "verdict": "needs changes", "summary": "The total is wrong."}
    server.add(Reply(tool_calls=[ToolCall("read_file", {"path": "src/app.py"})]), Reply(text=json.dumps(verdict)),
               Reply(text="back in the main session"))
    status_before = git(project, "status", "--porcelain")
    t = term(width=120)
    t.ready()
    t.submit("/review --base")
    t.wait_for("usage: /review --base REF")
    t.submit("/review focus on totals")
    t.wait_for("reviewing uncommitted changes")
    shown = t.wait_for("[P1] Skips the first item")
    assert "src/app.py:2" in shown and "return sum(items[1:])" in shown and "needs changes" in shown
    history = t.history()
    assert "review ▸ read_file src/app.py" in history
    assert "review mode: reviewing uncommitted changes" in history and "with mock-model" in history
    assert "review mode over: uncommitted changes" in history and "needs changes, 1 finding(s)" in history
    body = server.chat_requests[0].body
    prompt = "\n".join(str(m.get("content")) for m in body["messages"] if m["role"] == "user")
    assert "focus on totals" in prompt and "-    return sum(items)" in prompt
    assert git(project, "status", "--porcelain") == status_before
    t.submit("and now?")
    t.wait_for("back in the main session")


def test_sub_agent_activity_is_nested_under_its_spawn_call(term, server, project):
    (project / "notes.md").write_text("the notes\n")
    server.add(Reply(tool_calls=[ToolCall("spawn_agent", {"prompt": "look at the notes", "agent": "explore"})]),
               Reply(tool_calls=[ToolCall("read_file", {"path": "notes.md"})]),
               Reply(text="The notes say hello."),
               Reply(text="the parent is done"))
    t = term(width=120)
    t.ready()
    t.submit("explore please")
    # printed lines reach the scrollback a moment after the live area shows the streamed answer
    shown = t.wait_until(lambda s: "✓ spawn_agent" in s and "the parent is done" in s and "tokens" in status_line(s),
                         "the turn's transcript and the status line after it")
    lines = [line.strip() for line in shown.splitlines()]
    start = lines.index("▸ spawn_agent explore: look at the notes")
    assert lines[start + 1:start + 4] == ["↳ [explore] ✓ read_file notes.md", "↳ [explore] answer: The notes say hello.",
                                          lines[start + 3]] and "✓ spawn_agent explore" in lines[start + 3], shown
    t.submit("/agents")
    listed = t.wait_for("started in this session")
    assert re.search(r"explore +plan +.*\(built-in\)", listed), listed
    assert re.search(r"explore +completed +foreground", listed), listed


def test_escape_leaves_background_agents_running_and_agents_cancel_stops_them(term, server):
    from tests.support.agents import WAIT_FOR_FILE, Routes, pids_of, spawn
    from tests.support.harness import dies_soon, process_alive

    Routes({
        "start it": [Reply(tool_calls=[spawn("run it", background=True)]),
                     Reply(tool_calls=[ToolCall("shell", {"command": WAIT_FOR_FILE.format("bg.pid")})]),
                     Reply(text="it runs")],
        "run it": [Reply(tool_calls=[ToolCall("shell", {"command": "echo $$ > bg.pid; exec sleep 66.5"})])],
    }).install(server)
    t = term(width=150)
    t.ready()
    t.submit("start it")
    t.wait_until(lambda s: "it runs" in s and "esc to interrupt" not in s, "the turn's end")
    pids = pids_of("sleep 66.5")
    assert len(pids) == 1, pids
    t.send("Escape")  # no turn runs: nothing is stopped, the hint says how to stop them
    t.wait_for("1 agent(s) keep running: /agents cancel stops them")
    assert process_alive(pids[0]), "Esc with no turn running killed a background agent's command"
    t.submit("/agents cancel")
    t.wait_for("■ cancelled: cancelled by the user")
    assert dies_soon(pids[0]), "the cancelled agent's command outlived it"


def test_backend_switches_the_turns_to_another_agent_and_back(term, server, auger_home):
    import json
    import sys

    agent = Path(__file__).resolve().parents[1] / "support" / "acp_agent.py"
    (auger_home / "config.toml").write_text(f"[backends.scripted]\ncommand = {json.dumps(sys.executable)}\n"
                                            f"args = [{json.dumps(str(agent))}]\nlabel = \"Scripted test agent\"\n")
    server.add(Reply(text="auger's own answer"))
    t = term(width=140)
    t.ready()
    t.submit("/backend")
    listed = t.wait_for("turns are run by: auger")
    assert re.search(r"scripted +available +Scripted test agent", listed), listed
    t.submit("/backend nope")
    t.wait_for("backend switch refused: 'nope'")
    t.submit("/backend scripted")
    t.wait_for("backend: auger → Scripted test agent")
    t.submit("hello agent")
    t.wait_for("Hello from the agent.")
    assert server.chat_requests == [], "the agent answered, not auger's model"
    t.submit("/backend auger")
    t.wait_for("backend: scripted → auger")
    t.submit("and you?")
    t.wait_for("auger's own answer")


def test_pending_changes_are_listed_and_applied_from_the_terminal(term, server, project):
    server.add(Reply(tool_calls=[ToolCall("write_file", {"path": "new.txt", "content": "held back\n"})]),
               Reply(text="wrote it, pending"))
    t = term("--pending", width=120)
    t.ready()
    t.submit("/pending")
    t.wait_for("nothing is pending")
    t.submit("write new.txt")
    t.wait_until(lambda s: "wrote it, pending" in s and "1 file(s) pending" in s, "the queued write")
    assert not (project / "new.txt").exists()
    t.submit("/pending")
    t.wait_for("A new.txt  +1 -0")
    t.idle()
    t.submit("/pending apply")
    t.wait_for("◌ applied new.txt; 0 file(s) pending")
    assert (project / "new.txt").read_text() == "held back\n"


@both_ways
def test_goal_works_until_its_command_passes_showing_each_check_and_the_end(term, server, project, way):
    (project / "check_calc.py").write_text(
        "from calc import add\nassert add(2, 3) == 5, f'add(2, 3) is {add(2, 3)}, not 5'\nprint('ok')\n")

    def write(body: str) -> Reply:
        return Reply(tool_calls=[ToolCall("write_file", {"path": "calc.py",
                                                         "content": f"def add(a, b):\n    {body}\n"})])

    server.add(write("return 0"), Reply(text="Written."), write("return a + b"), Reply(text="Now it adds."))
    t = term()
    t.ready()
    t.submit("/goal python3 -B check_calc.py -- make add work")
    t.wait_for("(goal: until `python3 -B check_calc.py` passes)")
    t.wait_for("◎ goal check 1/10 not met (exit 1)")
    t.wait_for("◎ goal met after 2 turns")
    screen = t.history()
    assert "◎ goal check 2/10 passed" in screen and "Now it adds." in screen
    assert screen.index("not met (exit 1)") < screen.index("check 2/10 passed") < screen.index("goal met after")
    assert len(server.chat_requests) == 4 and "add(2, 3) is 0, not 5" in str(server.chat_requests[2].body)
    t.submit("/goal")  # without a command: how to use it, and no turn
    t.wait_for("/goal CMD [-- TASK]: after each turn CMD runs")
    assert len(server.chat_requests) == 4
