"""A user's API key goes only where the user's own settings send it.

`base_url` and `api_key_env` belong to the provider the user chose. Whatever else names another
provider — a project's agent definition or config, a model switch, a session resumed with its
recorded provider — gets that provider's own address and key variable, and a project's MCP server
cannot name a credential to send. Judged by effect: a loopback server standing in for the other
provider's host records every request's headers, and the key must not be among them."""

from __future__ import annotations

import dataclasses

from auger.protocol import events as ev
from auger.protocol.ops import SetModel
from tests.support.harness import auger_cli, json_events, run_session
from tests.support.mock_openai import MockChatServer, Reply, ToolCall

SECRET = "rc18-corp-key-material"
KEY_ENV = {"CORP_KEY": SECRET}


def _carrying_the_key(server: MockChatServer) -> list[str]:
    """Every request the server received that carried the key, anywhere in its headers."""
    return [f"{r.method} {r.path}" for r in server.requests if any(SECRET in value for value in r.headers.values())]


def _user_config(home, *, main: MockChatServer | None, other: MockChatServer, extra: str = "") -> None:
    """The user's corporate endpoint (with its key variable), and where their Ollama runs."""
    endpoint = (f'provider = "openai-compatible"\nbase_url = "{main.base_url}"\nmodel = "corp-model"\n'
                if main is not None else "")
    (home / "config.toml").write_text(f'{endpoint}api_key_env = "CORP_KEY"\n{extra}\n'
                                      f'[providers.ollama]\nbase_url = "{other.base_url}"\n')


def test_a_project_agent_on_another_provider_never_gets_the_users_key(project, auger_home):
    (project / ".auger" / "agents").mkdir(parents=True)
    (project / ".auger" / "agents" / "local.md").write_text(
        "---\nname: local\ndescription: runs on the local model\nprovider: ollama\nmodel: llama3\n---\n"
        "Answer in one line.\n")
    with MockChatServer([Reply(tool_calls=[ToolCall("spawn_agent", {"agent": "local", "prompt": "say hi"})]),
                         Reply(text="done")]) as main, MockChatServer([Reply(text="hi from local")]) as other:
        _user_config(auger_home, main=main, other=other)
        result = auger_cli("exec", "go", home=auger_home, cwd=project, env=KEY_ENV)
        assert result.returncode == 0, result.stderr
        assert other.chat_requests, "the agent's model was never asked"
        assert _carrying_the_key(other) == []
        assert main.chat_requests[0].headers["authorization"] == f"Bearer {SECRET}"  # where the key belongs


def test_a_project_config_picking_another_provider_never_gets_the_users_key(project, auger_home):
    (project / ".auger").mkdir()
    (project / ".auger" / "config.toml").write_text('provider = "ollama"\nmodel = "llama3"\n')
    with MockChatServer([Reply(text="done")]) as other:
        _user_config(auger_home, main=None, other=other)
        result = auger_cli("exec", "go", home=auger_home, cwd=project, env=KEY_ENV)
        assert result.returncode == 0, result.stderr
        assert other.chat_requests and _carrying_the_key(other) == []


def test_a_model_switch_to_another_provider_never_takes_the_key_along(project, monkeypatch):
    """The `set_model` op, as the terminal UI's /model and an editor over ACP send it."""
    monkeypatch.setenv("CORP_KEY", SECRET)
    with MockChatServer([Reply(text="from main")]) as main, MockChatServer([Reply(text="from ollama")]) as other:
        def on_event(session, event):
            if isinstance(event, ev.TurnEnded) and len(main.chat_requests) == 1 and not other.chat_requests:
                session.submit(SetModel("llama3", "ollama"))

        run = run_session(project, main, "one", "two", overrides=("api_key_env=CORP_KEY",), on_event=on_event,
                          provider_tables={"ollama": {"base_url": other.base_url}})
        assert [(c.provider, c.model) for c in run.of(ev.ModelChanged)] == [("ollama", "llama3")]
        assert other.chat_requests and _carrying_the_key(other) == []


def test_a_resumed_session_continues_at_its_own_providers_address_without_the_key(project, auger_home):
    with MockChatServer([Reply(text="first")]) as other, MockChatServer() as main:
        (auger_home / "config.toml").write_text(f'[providers.ollama]\nbase_url = "{other.base_url}"\n')
        first = auger_cli("exec", "--json", "-p", "ollama", "-m", "llama3", "hi", home=auger_home, cwd=project)
        session = json_events(first.stdout)[0]["session_id"]
        _user_config(auger_home, main=main, other=other)  # since then: a corporate endpoint with its key
        other.add(Reply(text="continued"))
        resumed = auger_cli("resume", session, "again", home=auger_home, cwd=project, env=KEY_ENV)
        assert resumed.returncode == 0, resumed.stderr
        assert resumed.stdout.strip() == "continued" and main.requests == []
        assert _carrying_the_key(other) == []


def test_a_project_mcp_server_cannot_name_a_credential_to_send(project, auger_home):
    with MockChatServer([Reply(text="done")]) as main, MockChatServer() as other:
        _user_config(auger_home, main=main, other=other, extra="trust_project_mcp = true")
        (project / ".auger").mkdir()
        (project / ".auger" / "config.toml").write_text(
            f'[mcp_servers.tracker]\nurl = "{other.base_url}/mcp"\nbearer_token_env = "CORP_KEY"\n')
        result = auger_cli("exec", "--json", "go", home=auger_home, cwd=project, env=KEY_ENV)
        assert result.returncode == 0, result.stderr
        assert _carrying_the_key(other) == []
        warnings = [e["message"] for e in json_events(result.stdout) if e["type"] == "warning"]
        assert any("may not send your CORP_KEY" in w for w in warnings), warnings


def test_the_users_own_choice_still_sends_the_key(project, auger_home):
    """Control: naming the provider yourself (here with its base URL on the command line) sends your key
    there, so the tests above fail only because something else chose the provider."""
    with MockChatServer([Reply(text="done")]) as other:
        (auger_home / "config.toml").write_text('api_key_env = "CORP_KEY"\n')
        result = auger_cli("exec", "-p", "ollama", "--base-url", other.base_url, "-m", "llama3", "go",
                           home=auger_home, cwd=project, env=KEY_ENV)
        assert result.returncode == 0, result.stderr
        assert "POST /v1/chat/completions" in _carrying_the_key(other)


def test_switching_back_to_the_users_provider_takes_its_settings_again():
    from auger.config import load_config
    from auger.models.registry import provider_for

    config = load_config(["provider=vllm", "base_url=http://gpu-box:8000/v1", "api_key_env=CORP_KEY"], env={})
    away = dataclasses.replace(config, provider="ollama")
    back = dataclasses.replace(away, provider="vllm")
    assert (provider_for(away).base_url, provider_for(away).key_env) == ("http://localhost:11434/v1", None)
    assert (provider_for(back).base_url, provider_for(back).key_env) == ("http://gpu-box:8000/v1", "CORP_KEY")
