"""Instructions the user controls through config: developer_instructions (the user's, and a trusted
project's), base_instructions (the user's only) and compact_prompt, seen in what the model receives
through the real `auger` command and real sessions."""

from __future__ import annotations

import json

from auger.config import load_config
from auger.engine.turn.compact import SUMMARY_PROMPT
from auger.protocol import events as ev
from auger.protocol.ops import Compact
from tests.support.harness import auger_cli, run_session
from tests.support.mock_openai import Reply

DEV = "Always answer in the voice of DEV-RULE-7."
PROJECT_DEV = "Run the linter as PROJECT-DEV-9 before finishing."


def exec_hi(project, server, home):
    done = auger_cli("exec", "--base-url", server.base_url, "-m", "mock-model", "-c", "generate_titles=false",
                     "hi", home=home, cwd=project)
    assert done.returncode == 0, done.stderr
    return done


def request_text(server) -> str:
    return json.dumps(server.chat_requests[-1].body["messages"])


def test_the_users_developer_instructions_reach_the_model(project, server, isolated_home):
    (isolated_home / "config.toml").write_text(f"developer_instructions = {json.dumps(DEV)}\n")
    server.add(Reply(text="ok"))
    exec_hi(project, server, isolated_home)
    messages = server.chat_requests[0].body["messages"]
    told = [m["content"] for m in messages if DEV in str(m["content"])]
    assert len(told) == 1 and told[0].startswith("<developer_instructions>")
    assert messages[0]["role"] == "system" and DEV not in messages[0]["content"]  # recorded, not in the prefix


def test_a_project_adds_developer_text_only_where_the_user_trusts_its_config(project, server, isolated_home):
    (project / ".auger").mkdir()
    (project / ".auger" / "config.toml").write_text(f"developer_instructions = {json.dumps(PROJECT_DEV)}\n")
    (isolated_home / "config.toml").write_text(f"developer_instructions = {json.dumps(DEV)}\n")
    server.add(Reply(text="untrusted"), Reply(text="trusted"))
    done = exec_hi(project, server, isolated_home)
    assert PROJECT_DEV not in request_text(server) and DEV in request_text(server)
    assert "developer_instructions' ignored" in done.stderr and "trust_project_config" in done.stderr

    (isolated_home / "config.toml").write_text(f"developer_instructions = {json.dumps(DEV)}\n"
                                               "trust_project_config = true\n")
    exec_hi(project, server, isolated_home)
    text = request_text(server)
    assert DEV in text and PROJECT_DEV in text and text.index(DEV) < text.index(PROJECT_DEV)  # added, not replacing


def test_base_instructions_replace_the_system_prompt_only_from_the_users_config(project, server, isolated_home):
    (project / ".auger").mkdir()
    (project / ".auger" / "config.toml").write_text('base_instructions = "You obey PROJECT-BASE only."\n')
    server.add(Reply(text="packaged"), Reply(text="own"))
    done = exec_hi(project, server, isolated_home)
    system = server.chat_requests[0].body["messages"][0]["content"]
    assert "PROJECT-BASE" not in request_text(server) and len(system) > 500  # the packaged prompt
    assert "'base_instructions' cannot be set by a project's config file" in done.stderr

    (isolated_home / "config.toml").write_text('base_instructions = "You are USER-BASE, a terse agent."\n')
    exec_hi(project, server, isolated_home)
    system = server.chat_requests[1].body["messages"][0]
    assert system["role"] == "system" and system["content"].startswith("You are USER-BASE, a terse agent.")
    assert "PROJECT-BASE" not in request_text(server)


def test_compact_prompt_replaces_the_summary_request(project, server):
    server.add(Reply(text="first"), Reply(text="SUMMARY as asked"))

    def compact_once(session, event):
        if isinstance(event, ev.TurnEnded) and not getattr(session, "_compacted", False):
            session._compacted = True
            session.submit(Compact())

    run = run_session(project, server, "hello", on_event=compact_once, turns=2,
                      overrides=('compact_prompt="Summarise as COMPACT-ASK-3: goal, files, next step."',))
    assert run.of(ev.ContextCompacted)[0].summary == "SUMMARY as asked"
    last = server.chat_requests[1].body["messages"][-1]
    assert last == {"role": "user", "content": "Summarise as COMPACT-ASK-3: goal, files, next step."}
    assert SUMMARY_PROMPT.splitlines()[0] not in json.dumps(server.chat_requests[1].body)


def test_project_developer_text_is_kept_apart_from_the_users(project, tmp_path):
    (project / ".auger").mkdir()
    (project / ".auger" / "config.toml").write_text('developer_instructions = "P"\n')
    user = tmp_path / "user.toml"
    user.write_text('developer_instructions = "U"\ntrust_project_config = true\n')
    config = load_config(env={}, config_file=user, project_dir=project)
    assert (config.developer_instructions, config.project_developer_instructions) == ("U", "P")
    assert not config.warnings
    config = load_config(["project_developer_instructions=X"], env={}, config_file=tmp_path / "none.toml")
    assert config.project_developer_instructions is None and "unknown config key" in config.warnings[0]
