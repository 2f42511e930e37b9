"""Whatever the model sends is data: odd code points, deep nesting and huge or broken arguments get
stored, printed and answered with an error the model reads, never a crash."""

from __future__ import annotations

import sqlite3

import pytest

from auger.protocol import events as ev
from tests.support.harness import auger_cli, conversation, json_events, run_session
from tests.support.mock_openai import Reply, ToolCall

SURROGATE = "\ud800"


def test_a_lone_surrogate_in_the_models_text_is_stored_printed_and_sent_back(project, server, auger_home):
    server.add(Reply(text=f"odd {SURROGATE} text"), Reply(text="fine"), Reply(text="again"))
    plain = auger_cli("exec", "--base-url", server.base_url, "-m", "m", "hi", home=auger_home, cwd=project)
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout.strip() == "odd \ufffd text" and "Traceback" not in plain.stderr

    session_id = sqlite3.connect(auger_home / "sessions.db").execute("SELECT id FROM sessions").fetchone()[0]
    resumed = auger_cli("resume", session_id, "--json", "--base-url", server.base_url, "go on",
                        home=auger_home, cwd=project)
    assert resumed.returncode == 0, resumed.stderr
    contents = [m.get("content") for m in conversation(server.chat_requests[-1].body["messages"])]
    assert contents == ["hi", f"odd {SURROGATE} text", "go on"]  # round-tripped exactly
    assert [e["text"] for e in json_events(resumed.stdout) if e["type"] == "agent_message"] == ["fine"]



def test_json_mode_escapes_a_lone_surrogate_in_text_and_in_tool_arguments(project, server, auger_home):
    (project / "a.txt").write_text("x")
    server.add(Reply(text=f"look {SURROGATE}", tool_calls=[ToolCall("grep", '{"pattern": "\\ud800x"}')]),
               Reply(text="done"))
    result = auger_cli("exec", "--json", "--base-url", server.base_url, "-m", "m", "hi", home=auger_home, cwd=project)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    events = json_events(result.stdout)
    assert [e["text"] for e in events if e["type"] == "agent_message"] == [f"look {SURROGATE}", "done"]
    started = [e for e in events if e["type"] == "tool_call_started"]
    assert started[0]["arguments"] == {"pattern": f"{SURROGATE}x"}


MODEL_MISTAKES = [
    ("shell", {"command": "echo a\x00b"}, "NUL"),
    ("shell", {"command": "echo " + "x" * 5_000_000}, "too long"),
    ("shell", {"command": f"echo {SURROGATE}"}, "surrogate"),
    ("shell", {"command": "ls", "workdir": f"d{SURROGATE}"}, "surrogate"),
    ("read_file", {"path": f"a{SURROGATE}.txt"}, "surrogate"),
    ("write_file", {"path": f"b{SURROGATE}.txt", "content": "x"}, "surrogate"),
    ("list_dir", {"path": "a\x00"}, "NUL"),
    ("grep", {"pattern": f"{SURROGATE}x"}, "surrogate"),
]


@pytest.mark.parametrize("tool,arguments,says", MODEL_MISTAKES, ids=[f"{t}-{s}" for t, _, s in MODEL_MISTAKES])
def test_model_mistakes_are_plain_tool_errors_not_internal_errors(project, server, tool, arguments, says, caplog):
    (project / "a.txt").write_text("x")
    server.add(Reply(tool_calls=[ToolCall(tool, arguments)], chunk_chars=1 << 20), Reply(text="ok"))
    # a window wide enough that the 5 MB call does not trigger a compaction before the model reads the error
    run = run_session(project, server, "go", overrides=("approve_all=true", "model_context_window=100000000"))
    assert run.ended.reason == "complete", run.ended.message
    [ended] = run.of(ev.ToolCallEnded)
    assert not ended.ok and ended.output.startswith("Error: ")
    assert "internal error" not in ended.output and says in ended.output, ended.output
    assert len(ended.output) < 500
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"


@pytest.mark.parametrize("depth", [65, 200_000])
def test_deeply_nested_arguments_get_an_error_the_model_reads(project, server, auger_home, depth):
    nested = '{"path": ' + "[" * depth + "]" * depth + "}"
    server.add(Reply(tool_calls=[ToolCall("read_file", nested)], chunk_chars=1 << 20), Reply(text="understood"))
    result = auger_cli("exec", "--json", "--base-url", server.base_url, "-m", "m", "go", home=auger_home, cwd=project)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    [ended] = [e for e in json_events(result.stdout) if e["type"] == "tool_call_ended"]
    assert ended["output"].startswith("Error: the arguments for read_file are nested deeper than 64 levels")
    last = server.chat_requests[-1].body["messages"][-1]
    assert last["role"] == "tool" and "nested deeper than 64 levels" in last["content"]


def test_arguments_at_the_depth_limit_still_reach_validation(project, server):
    server.add(Reply(tool_calls=[ToolCall("read_file", {"path": "a", "offset": [[[]]]})]), Reply(text="ok"))
    run = run_session(project, server, "go")
    [ended] = run.of(ev.ToolCallEnded)
    assert "argument 'offset' must be an integer" in ended.output


def test_a_prompt_with_undecodable_bytes_is_listed_without_crashing(project, server, auger_home):
    server.add(Reply(text="ok"))
    prompt = b"fix caf\xe9".decode("utf-8", "surrogateescape")  # how Python hands over a Latin-1 argv byte
    result = auger_cli("exec", "--base-url", server.base_url, "-m", "m", prompt, home=auger_home, cwd=project)
    assert result.returncode == 0, result.stderr
    listing = auger_cli("sessions", home=auger_home)
    assert listing.returncode == 0 and "Traceback" not in listing.stderr, listing.stderr
    assert "fix caf\ufffd" in listing.stdout
