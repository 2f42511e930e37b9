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
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    (project / ".auger").mkdir()
    (project / ".auger" / "config.toml").write_text("model = 'mock-model'\n")

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
    assert dead["status"] == "unreachable"  # nothing listens on vLLM's default port here
    assert disabled["status"] == "disabled"
    assert added["status"] == "available" and added["kind"] == "agent" and "checked" in added
    assert listed["mine"]["label"] == "my agent" and listed["ollama"]["status"] == "disabled"
    user = tomllib.loads((isolated_home / "config.toml").read_text())
    assert user["providers"]["ollama"] == {"disabled": True}
    assert user["backends"]["mine"]["command"] == sys.executable
    assert (project / ".auger" / "config.toml").read_text() == "model = 'mock-model'\n"
    assert bad.status_code == 400 and injected.status_code == 400 and unknown.status_code == 404
