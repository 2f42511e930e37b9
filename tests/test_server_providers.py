"""`GET /api/providers`: every model provider and backend agent with a status a person can act on — the
cheap presence check always, a real reachability check (the model server answers; the agent answers
`initialize`) on request and cached — and `PATCH` writing the user's config.toml, never a project's."""

from __future__ import annotations

import asyncio
import sys
import tomllib
from pathlib import Path

from tests.support.serve import in_process

AGENT = Path(__file__).parent / "support" / "acp_agent.py"


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 90))


def test_providers_and_agents_have_statuses_probes_and_patches_in_the_user_config(project, server, tmp_path,
                                                                                   isolated_home, monkeypatch):
    import socket

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    (project / ".auger").mkdir()
    (project / ".auger" / "config.toml").write_text("model = 'mock-model'\n")
    with socket.socket() as sock:  # vLLM's default port may be another test's server: point it where nothing is
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]
    with (isolated_home / "config.toml").open("a") as user_config:
        user_config.write(f'[providers.vllm]\nbase_url = "http://127.0.0.1:{closed}/v1"\n')

    async def main():
        async with in_process(project, server, tmp_path / "s.db") as (client, _):
            rows = {r["name"]: r for r in (await client.get("/api/providers")).json()["providers"]}
            probed = (await client.post("/api/providers/openai-compatible/probe")).json()
            dead = (await client.post("/api/providers/vllm/probe")).json()
            disabled = (await client.patch("/api/providers/ollama", json={"enabled": False})).json()
            added = (await client.patch("/api/providers/mine", json={
                "command": sys.executable, "args": [str(AGENT)], "label": "my agent"})).json()
            listed = {r["name"]: r for r in (await client.get("/api/providers")).json()["providers"]}
            bad = await client.patch("/api/providers/mine", json={"command": ""})
            injected = await client.patch("/api/providers/ollama", json={"enabled": True, "base_url": "http://x"})
            unknown = await client.post("/api/providers/nope/probe")
            return rows, probed, dead, disabled, added, listed, bad, injected, unknown

    rows, probed, dead, disabled, added, listed, bad, injected, unknown = run(main())
    assert rows["openai"]["status"] == "key missing" and "OPENAI_API_KEY" in rows["openai"]["detail"]
    assert rows["openai-compatible"]["status"] == "available" and rows["openai-compatible"]["checked"] is None
    assert rows["openai-compatible"]["models"][0] == "mock-model" and rows["openai"]["models"] == ["gpt-5"]
    assert rows["opencode"]["kind"] == "agent" and rows["opencode"]["status"] in ("not installed", "available")
    assert probed["status"] == "available" and probed["checked"] is not None
    assert any(r.method == "GET" and r.path == "/v1/models" for r in server.requests)
    assert dead["status"] == "unreachable"  # nothing listens where vLLM is configured
    assert disabled["status"] == "disabled"
    assert added["status"] == "available" and added["kind"] == "agent" and "checked" in added
    assert listed["mine"]["label"] == "my agent" and listed["ollama"]["status"] == "disabled"
    user = tomllib.loads((isolated_home / "config.toml").read_text())
    assert user["providers"]["ollama"] == {"disabled": True} and user["providers"]["vllm"]["base_url"].endswith("/v1")
    assert user["backends"]["mine"]["command"] == sys.executable
    assert (project / ".auger" / "config.toml").read_text() == "model = 'mock-model'\n"
    assert bad.status_code == 400 and injected.status_code == 400 and unknown.status_code == 404


def test_auger_providers_probe_checks_for_real_and_shares_what_it_found_with_the_server(project, server, tmp_path,
                                                                                        isolated_home, monkeypatch):
    import json
    import socket

    from tests.support.harness import auger_cli

    keys = {"OPENAI_API_KEY": "", "ANTHROPIC_API_KEY": "", "OPENROUTER_API_KEY": ""}  # no hosted API is asked
    for name in keys:
        monkeypatch.delenv(name, raising=False)

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        closed = sock.getsockname()[1]
    (isolated_home / "config.toml").write_text(
        f'provider = "openai-compatible"\nbase_url = "{server.base_url}"\nmodel = "mock-model"\n'
        f'[providers.down]\nextends = "vllm"\nbase_url = "http://127.0.0.1:{closed}/v1"\n')

    def listed(*args: str) -> dict[str, dict]:
        result = auger_cli("providers", "--json", *args, home=isolated_home, cwd=project, env=keys)
        assert result.returncode == 0, result.stderr
        return {row["name"]: row for row in map(json.loads, result.stdout.splitlines())}

    def asked() -> int:
        return sum(r.method == "GET" and r.path == "/v1/models" for r in server.requests)

    plain = listed()
    assert plain["openai-compatible"]["status"] == "available" and plain["down"]["status"] == "available"
    assert asked() == 0 and plain["down"]["checked"] is None  # the presence check asks nobody

    probed = listed("--probe")
    assert probed["openai-compatible"]["status"] == "available" and "answers" in probed["openai-compatible"]["detail"]
    assert probed["down"]["status"] == "unreachable" and f":{closed}/v1/models" in probed["down"]["detail"]
    assert asked() == 1

    again = listed("--probe")  # checked a moment ago: the finding is kept, nobody is asked again
    assert again["down"]["status"] == "unreachable" and again["down"]["checked"] is not None and asked() == 1
    table = auger_cli("providers", home=isolated_home, cwd=project, env=keys).stdout
    assert any(line.split()[:2] == ["down", "unreachable"] and "checked" in line for line in table.splitlines())

    async def main():  # the server on the same user's cache shows what the command found, without asking
        async with in_process(project, server, tmp_path / "s.db") as (client, _):
            rows = {r["name"]: r for r in (await client.get("/api/providers?probe=stale")).json()["providers"]}
            listing_asked = asked()
            fresh = (await client.post("/api/providers/openai-compatible/probe")).json()
            return rows, listing_asked, fresh

    rows, listing_asked, fresh = run(main())
    assert rows["down"]["status"] == "unreachable" and rows["down"]["detail"] == probed["down"]["detail"]
    assert rows["down"]["checked"] is not None and rows["openai-compatible"]["status"] == "available"
    assert listing_asked == 1
    assert fresh["status"] == "available" and asked() == 2  # a probe asked for is made now
    now = listed("--probe", "now")
    assert now["down"]["status"] == "unreachable" and asked() == 3
