"""The real `auger` command in a subprocess against the mock server."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time

from tests.support.harness import auger_cli, conversation, json_events
from tests.support.mock_openai import Fault, Reply, ToolCall

FAST = ["-c", "model_retry_base_delay=0.01", "-c", "model_retry_max_delay=0.02"]


def test_version(auger_home):
    result = auger_cli("--version", home=auger_home)
    assert result.returncode == 0 and result.stdout.startswith("auger ")


def test_exec_creates_and_edits_files_and_prints_the_answer(project, server, auger_home):
    server.add(Reply(text="Creating it.", tool_calls=[ToolCall("write_file", {"path": "src/app.py",
                                                                            "content": "print('helo')\n"})]),
               Reply(tool_calls=[ToolCall("edit_file", {"path": "src/app.py", "old_string": "helo",
                                                         "new_string": "hello"})]),
               Reply(tool_calls=[ToolCall("shell", {"command": "python3 src/app.py"})]),
               Reply(text="Done: src/app.py prints hello."))
    result = auger_cli("exec", "--base-url", server.base_url, "--model", "m", *FAST, "make the app",
                       home=auger_home, cwd=project)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "Done: src/app.py prints hello."
    assert result.stderr == ""
    assert (project / "src/app.py").read_text() == "print('hello')\n"
    shell_out = [m for m in server.chat_requests[-1].body["messages"] if m["role"] == "tool"][-1]["content"]
    assert shell_out.startswith("Exit code: 0") and "hello" in shell_out


def test_exec_json_streams_events(project, server, auger_home):
    server.add(Reply(tool_calls=[ToolCall("shell", {"command": "echo one; echo two"})]), Reply(text="fin"))
    result = auger_cli("exec", "--json", "-C", str(project), "--base-url", server.base_url, "-m", "m", *FAST,
                       "go", home=auger_home)
    assert result.returncode == 0, result.stderr
    events = json_events(result.stdout)
    types = [e["type"] for e in events]
    assert types[0] == "session_configured" and types[1] == "turn_started"
    assert events[0]["model"] == "m" and events[0]["cwd"] == str(project.resolve())
    assert types[-2:] == ["turn_ended", "shutdown_complete"] and events[-2]["reason"] == "complete"
    deltas = "".join(e["text"] for e in events if e["type"] == "tool_output_delta")
    assert deltas == "one\ntwo\n"
    assert types.count("turn_ended") == 1


def test_prompt_from_stdin(project, server, auger_home):
    server.add(Reply(text="read from stdin"))
    result = auger_cli("exec", "--base-url", server.base_url, "-m", "m", home=auger_home, cwd=project,
                       input="the task\n")
    assert result.returncode == 0, result.stderr
    assert server.chat_requests[0].body["messages"][-1]["content"] == "the task\n"


def test_missing_api_key_is_one_actionable_line(project, auger_home):
    result = auger_cli("exec", "hi", home=auger_home, cwd=project, env={"OPENAI_API_KEY": ""})
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "OPENAI_API_KEY is not set" in lines[0]
    assert "Traceback" not in result.stderr


def test_unreachable_endpoint_is_one_line(project, auger_home):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here once closed
    result = auger_cli("exec", "--base-url", f"http://127.0.0.1:{port}/v1", "-m", "m", *FAST, "hi",
                       home=auger_home, cwd=project)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "cannot connect to" in lines[0] and str(port) in lines[0]


def test_unknown_model_is_one_line(project, server, auger_home):
    server.add(Fault.status(404))
    result = auger_cli("exec", "--base-url", server.base_url, "-m", "no-such-model", "hi", home=auger_home,
                       cwd=project)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "no-such-model" in lines[0] and "not found" in lines[0]


def test_unknown_provider_and_bad_config_values(project, server, auger_home):
    result = auger_cli("exec", "-p", "nope", "hi", home=auger_home, cwd=project)
    assert result.returncode == 2 and "unknown provider 'nope'" in result.stderr
    server.add(Reply(text="still ran"))
    result = auger_cli("exec", "--base-url", server.base_url, "-m", "m", "-c", "max_model_calls_per_turn=lots",
                       "-c", "colour=blue", "hi", home=auger_home, cwd=project)
    assert result.returncode == 0
    assert "expects a whole number" in result.stderr and "unknown config key 'colour'" in result.stderr
    assert result.stdout.strip() == "still ran"


def test_broken_config_file_never_stops_the_program(project, server, auger_home):
    (auger_home / "config.toml").write_text("model = [unclosed\n")
    server.add(Reply(text="ok"))
    result = auger_cli("exec", "--base-url", server.base_url, "-m", "m", "hi", home=auger_home, cwd=project)
    assert result.returncode == 0
    assert "invalid TOML" in result.stderr and "config.toml" in result.stderr


def test_sessions_and_resume_continue_the_conversation(project, server, auger_home):
    server.add(Reply(text="first answer"), Reply(text="second answer"))
    first = auger_cli("exec", "--json", "--base-url", server.base_url, "-m", "m", "remember the word kiwi",
                      home=auger_home, cwd=project)
    session_id = json_events(first.stdout)[0]["session_id"]
    listing = auger_cli("sessions", home=auger_home)
    assert session_id[:8] in listing.stdout and "remember the word kiwi" in listing.stdout
    as_json = [json.loads(line) for line in auger_cli("sessions", "--json", home=auger_home).stdout.splitlines()]
    assert as_json[0]["id"] == session_id and as_json[0]["items"] == 3  # environment, prompt, answer
    resumed = auger_cli("resume", session_id[:8], "--base-url", server.base_url, "what was the word?",
                        home=auger_home, cwd=project)
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout.strip() == "second answer"
    body = server.chat_requests[-1].body
    assert body["model"] == "m"  # the recorded model, not a default
    contents = [m.get("content") for m in conversation(body["messages"])]
    assert contents == ["remember the word kiwi", "first answer", "what was the word?"]


def test_resume_unknown_session(auger_home, project):
    result = auger_cli("resume", "deadbeef", "x", home=auger_home, cwd=project)
    assert result.returncode == 2 and "no stored session matches 'deadbeef'" in result.stderr


def test_kill_9_mid_turn_then_resume_loses_nothing(project, server, auger_home):
    marker = project / "started"
    server.add(Reply(text="Running the long job.", tool_calls=[ToolCall("write_file", {"path": "a.txt", "content": "A"})]),
               Reply(tool_calls=[ToolCall("shell", {"command": f"touch {marker}; sleep 30"})]),
               Reply(text="resumed fine"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AUGER_", "OPENAI_"))}
    env.update({"AUGER_HOME": str(auger_home), "OPENAI_API_KEY": "sk-test"})
    proc = subprocess.Popen([sys.executable, "-m", "auger", "exec", "--json", "--base-url", server.base_url,
                             "-m", "m", "do the long job"], cwd=project, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    first_line = proc.stdout.readline()
    session_id = json.loads(first_line)["session_id"]
    deadline = time.monotonic() + 15
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert marker.exists(), "the shell call never started"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    subprocess.run(["pkill", "-f", f"touch {marker}; sleep 30"], check=False)

    resumed = auger_cli("resume", session_id, "--json", "--base-url", server.base_url, "carry on",
                        home=auger_home, cwd=project)
    assert resumed.returncode == 0, resumed.stderr
    configured = json_events(resumed.stdout)[0]
    assert configured["resumed"] is True and configured["history_items"] >= 5
    messages = conversation(server.chat_requests[-1].body["messages"])
    assert messages[0] == {"role": "user", "content": "do the long job"}
    assert messages[1]["content"] == "Running the long job." and messages[1]["tool_calls"][0]["function"]["name"] == "write_file"
    assert messages[2]["role"] == "tool" and "Created a.txt" in messages[2]["content"]
    assert messages[3]["tool_calls"][0]["function"]["name"] == "shell"
    assert messages[4]["role"] == "tool" and "interrupted" in messages[4]["content"]
    assert messages[5] == {"role": "user", "content": "carry on"}
    assert (project / "a.txt").read_text() == "A"


def test_demo_command_runs_with_no_key_and_no_network(auger_home, tmp_path):
    result = auger_cli("demo", home=auger_home, cwd=tmp_path, env={"OPENAI_API_KEY": "", "HOME": str(tmp_path)})
    assert result.returncode == 0, result.stderr
    assert "scripted session replayed from a cassette" in result.stdout
    assert "Exit code: 1" in result.stdout and "Exit code: 0" in result.stdout
    assert "tests now pass" in result.stdout


def test_an_unexpected_reasoning_effort_is_warned_about_by_the_cli(project, auger_home):
    """Loading config never consults the provider registry; the CLI checks the effort once loaded."""
    result = auger_cli("policy", "check", "-c", "model=gpt-5", "-c", "model_reasoning_effort=ultra", "--", "ls",
                       home=auger_home, cwd=project)
    assert result.returncode == 0, result.stderr
    assert "model_reasoning_effort 'ultra' is not one gpt-5 is known to accept" in result.stderr


def test_the_model_is_told_the_shell_its_commands_run_in_not_the_login_shell(project, server, auger_home):
    server.add(Reply(tool_calls=[ToolCall("shell", {"command": 'echo "shell=${BASH_VERSION:+bash}$ZSH_VERSION"'})]),
               Reply(text="ok"))
    result = auger_cli("exec", "--base-url", server.base_url, "-m", "m", *FAST, "which shell?", home=auger_home,
                       cwd=project, env={"SHELL": "/usr/bin/zsh"})
    assert result.returncode == 0, result.stderr
    contexts = [m["content"] for m in server.chat_requests[0].body["messages"]
                if isinstance(m.get("content"), str) and m["content"].startswith("<environment_context>")]
    assert len(contexts) == 1 and "<shell>bash</shell>" in contexts[0] and "zsh" not in contexts[0]
    shell_out = [m for m in server.chat_requests[-1].body["messages"] if m["role"] == "tool"][-1]["content"]
    assert shell_out.endswith("\nshell=bash")
