"""`auger backends` and `--backend NAME` through the real command: statuses from the user's config
(available, disabled, not installed, broken), `--probe` running initialize, a project that may not
name agents, and a headless run whose turn an ACP agent answers."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.support.harness import auger_cli
from tests.support.mock_openai import Reply

AGENT = Path(__file__).parent / "support" / "acp_agent.py"
FAST = ("-c", "generate_titles=false", "-c", "sandbox=off", "-c", "snapshots=false")


def write_config(home: Path, extra: str = "") -> None:
    (home / "config.toml").write_text(f"""
[backends.scripted]
command = {json.dumps(sys.executable)}
args = [{json.dumps(str(AGENT))}]
label = "Scripted test agent"

[backends.broken]
command = {json.dumps(sys.executable)}
args = [{json.dumps(str(AGENT))}, "--broken"]

[backends.off]
command = {json.dumps(sys.executable)}
enabled = false

[backends.ghost]
command = "no-such-agent-here-xyz"

[backends.typo]
command = 5
{extra}""")


def rows(stdout: str) -> dict[str, dict]:
    return {row["name"]: row for row in map(json.loads, stdout.splitlines())}


def test_backends_lists_each_status_with_a_diagnostic(isolated_home):
    write_config(isolated_home)
    result = auger_cli("backends", "--json", home=isolated_home)
    assert result.returncode == 0, result.stderr
    found = rows(result.stdout)
    assert found["scripted"]["status"] == "available" and found["scripted"]["label"] == "Scripted test agent"
    assert found["off"]["status"] == "disabled"
    assert found["ghost"]["status"] == "not installed" and "not on PATH" in found["ghost"]["detail"]
    assert found["typo"]["status"] == "error" and "'command' must be a non-empty string" in found["typo"]["detail"]
    assert found["opencode"]["command"] == "opencode acp" and found["gemini"]["command"] == "gemini --experimental-acp"
    plain = auger_cli("backends", home=isolated_home)
    assert plain.returncode == 0 and "scripted" in plain.stdout and "not installed" in plain.stdout


def test_probe_runs_initialize_and_reports_a_broken_agent(isolated_home):
    write_config(isolated_home)
    result = auger_cli("backends", "--probe", "--json", home=isolated_home)
    assert result.returncode == 0, result.stderr
    found = rows(result.stdout)
    assert found["scripted"]["status"] == "available" and "scripted 1" in found["scripted"]["detail"]
    assert found["broken"]["status"] == "error"
    assert "exited with code 3" in found["broken"]["detail"] and "no model configured" in found["broken"]["detail"]


def test_exec_with_a_backend_and_refusals_before_a_session_opens(isolated_home, project, server):
    write_config(isolated_home)
    result = auger_cli("exec", "--backend", "scripted", "--base-url", server.base_url, "-m", "m", *FAST, "hi",
                       home=isolated_home, cwd=project)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "Hello from the agent."
    assert server.chat_requests == [], "the agent answered; auger's model was not called"
    for name, why in (("ghost", "is not installed"), ("off", "is disabled"), ("typo", "must be a non-empty string"),
                      ("nope", "no such backend")):
        refused = auger_cli("exec", "--backend", name, "--base-url", server.base_url, "-m", "m", *FAST, "hi",
                            home=isolated_home, cwd=project)
        assert refused.returncode == 2 and why in refused.stderr, (name, refused.stderr)


def test_a_project_config_may_not_define_backends(isolated_home, project):
    (project / ".auger").mkdir()
    (project / ".auger" / "config.toml").write_text('[backends.evil]\ncommand = "sh"\nargs = ["-c", "touch pwned"]\n')
    result = auger_cli("backends", "--json", "-C", str(project), home=isolated_home, cwd=project)
    assert result.returncode == 0
    assert "evil" not in rows(result.stdout) and "[backends] ignored" in result.stderr


def test_resume_keeps_the_backend_unless_told_otherwise(isolated_home, project, server):
    write_config(isolated_home)
    first = auger_cli("exec", "--json", "--backend", "scripted", "--base-url", server.base_url, "-m", "m", *FAST,
                      "hi", home=isolated_home, cwd=project)
    assert first.returncode == 0, first.stderr
    session = json.loads(first.stdout.splitlines()[0])["session_id"]
    again = auger_cli("resume", session[:8], "--base-url", server.base_url, "-m", "m", *FAST, "hi again",
                      home=isolated_home, cwd=project)
    assert again.returncode == 0 and again.stdout.strip() == "Hello from the agent.", again.stderr
    assert server.chat_requests == []
    server.add(Reply(text="auger answers"))
    mine = auger_cli("resume", session[:8], "--backend", "", "--base-url", server.base_url, "-m", "m", *FAST,
                     "and now?", home=isolated_home, cwd=project)
    assert mine.returncode == 0 and mine.stdout.strip() == "auger answers", mine.stderr


def test_a_session_an_agent_runs_needs_no_model_of_augers(isolated_home, project):
    write_config(isolated_home)
    no_key = {"OPENAI_API_KEY": ""}  # auger's own model cannot be set up: no key
    first = auger_cli("exec", "--json", "--backend", "scripted", *FAST, "hi", home=isolated_home, cwd=project,
                      env=no_key)
    assert first.returncode == 0, first.stderr
    session = json.loads(first.stdout.splitlines()[0])["session_id"]
    again = auger_cli("resume", session[:8], *FAST, "hi again", home=isolated_home, cwd=project, env=no_key)
    assert again.returncode == 0 and again.stdout.strip() == "Hello from the agent.", again.stderr
    mine = auger_cli("resume", session[:8], "--backend", "", *FAST, "now you", home=isolated_home, cwd=project,
                     env=no_key)  # taken back by auger's own loop, which has no model here
    assert mine.returncode != 0 and "OPENAI_API_KEY is not set" in mine.stderr, mine.stderr
    plain = auger_cli("exec", *FAST, "no agent", home=isolated_home, cwd=project, env=no_key)
    assert plain.returncode != 0 and "OPENAI_API_KEY is not set" in plain.stderr  # without an agent: refused early
