"""The terminal's way to a server: `auger login URL` keeps a token per server, readable by the user alone (a
file others may read, or a symlink, is refused, neither read nor written); AUGER_SERVER_TOKEN wins; a server
on this machine is found on its store; the public client lists sessions, attaches to one and follows it."""

from __future__ import annotations

import asyncio
import json
import os
import stat

import pytest

from tests.support.harness import auger_cli
from tests.support.mock_openai import Reply, ToolCall
from tests.support.serve import TOKEN, served, start_process, stop_process


def test_login_keeps_the_token_per_server_for_its_user_alone(project, server, tmp_path):
    serve_home, client_home = tmp_path / "serve-home", tmp_path / "client-home"
    serve_home.mkdir()
    client_home.mkdir()
    proc, url, _ = start_process(project, serve_home, server, tmp_path / "s.db")
    try:
        refused = auger_cli("login", url, "--token-stdin", home=client_home, input="not-the-token-at-all\n")
        assert refused.returncode == 2 and "401" in refused.stderr and "nothing was kept" in refused.stderr
        assert not (client_home / "server-tokens.json").exists()

        kept = auger_cli("login", url + "/", "--token-stdin", home=client_home, input=TOKEN + "\n")
        assert kept.returncode == 0, kept.stderr
        assert "as owner (admin)" in kept.stdout
        path = client_home / "server-tokens.json"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert json.loads(path.read_text()) == {url.replace("localhost", "127.0.0.1"): TOKEN}

        # the kept token opens the server: the UI is refused only for want of a terminal
        attached = auger_cli("attach", "--connect", url, home=client_home)
        assert attached.returncode == 2 and "needs a terminal" in attached.stderr
        other = auger_cli("attach", "--connect", "http://127.0.0.1:9", home=client_home)  # another server
        assert other.returncode == 2 and "no token for http://127.0.0.1:9" in other.stderr

        path.chmod(0o644)  # readable by others: refused, neither read nor written
        unsafe = auger_cli("attach", "--connect", url, home=client_home)
        assert unsafe.returncode == 2 and "readable by you alone" in unsafe.stderr
        again = auger_cli("login", url, "--token-stdin", home=client_home, input=TOKEN + "\n")
        assert again.returncode == 2 and "readable by you alone" in again.stderr
        assert stat.S_IMODE(path.stat().st_mode) == 0o644
        # AUGER_SERVER_TOKEN wins over any kept token (the file is not even read)
        env_wins = auger_cli("attach", "--connect", url, home=client_home, env={"AUGER_SERVER_TOKEN": TOKEN})
        assert env_wins.returncode == 2 and "needs a terminal" in env_wins.stderr

        path.unlink()
        os.symlink(tmp_path / "elsewhere.json", path)
        (tmp_path / "elsewhere.json").write_text(json.dumps({url: TOKEN}))
        (tmp_path / "elsewhere.json").chmod(0o600)
        linked = auger_cli("attach", "--connect", url, home=client_home)
        assert linked.returncode == 2 and "readable by you alone" in linked.stderr
    finally:
        stop_process(proc)


def test_tokens_are_kept_per_server_and_chosen_in_order(tmp_path):
    from auger.frontends.servers import ServerError, save_token, server_key, stored_token, token_for

    config, data = tmp_path / "config", tmp_path / "data"
    save_token(config, "http://LOCALHOST:8765/", "aug_one")
    save_token(config, "https://example.org", "aug_two")
    assert stored_token(config, "http://localhost:8765") == "aug_one"
    assert stored_token(config, "https://example.org:443") == "aug_two"
    assert stored_token(config, "http://localhost:8766") is None
    assert token_for("http://localhost:8765", {"AUGER_SERVER_TOKEN": "from-env"}, config, data) == "from-env"
    assert token_for("http://localhost:8765", {}, config, data) == "aug_one"
    data.mkdir()
    (data / "server-token").write_text("the-owners-own-token-1234\n")
    (data / "server-token").chmod(0o600)
    assert token_for("http://127.0.0.1:9000", {}, config, data) == "the-owners-own-token-1234"  # this machine's
    assert token_for("https://example.com", {}, config, data) is None  # never sent to another host
    for bad in ("ftp://host", "http://user:pw@host:1", "http://host/path", "http://host:99999", "host:8765"):
        with pytest.raises(ServerError):
            server_key(bad)
    with pytest.raises(ServerError):
        save_token(config, "http://localhost:8765", "two words")


def test_a_server_on_this_machine_is_found_on_its_store(project, server, tmp_path, isolated_home):
    from auger.frontends.servers import running_server, store_name

    db = tmp_path / "s.db"
    proc, url, _ = start_process(project, isolated_home, server, db)
    try:
        found = running_server(isolated_home, store_name(str(db)))
        assert found is not None and found.url == url and found.pid == proc.pid
        assert running_server(isolated_home, store_name(str(tmp_path / "other.db"))) is None
    finally:
        stop_process(proc)
    assert running_server(isolated_home, store_name(str(db))) is None  # its file goes with it


def test_the_public_client_lists_attaches_and_follows_a_running_session(project, server, tmp_path):
    import auger
    from auger.protocol import events as ev
    from auger.protocol.ops import ApprovalDecision, SetMode
    from auger.protocol.vocab import ApprovalOption, Mode

    server.add(Reply(tool_calls=[ToolCall("shell", {"command": "touch followed"})]), Reply(text="followed it"))

    async def main():
        async with served(project, server, tmp_path / "s.db") as srv:
            created = (await srv.client.post("/api/sessions", json={"cwd": str(project)})).json()
            await srv.client.post(f"/api/sessions/{created['id']}/ops",
                                  json={"submission_id": "s1", "op": {"type": "user_turn", "text": "go"}})
            async with auger.connect(srv.url, token=TOKEN, name="tester") as client:
                session = await client.attach(created["id"])
                seen = []
                async for envelope in session.follow(0):
                    seen.append(envelope)
                    if isinstance(envelope.event, ev.ApprovalRequest):
                        listed = await client.sessions()
                        row = next(r for r in listed if r["id"] == created["id"])
                        assert row["running"] is True and row["open"] is True
                        await session.submit(ApprovalDecision(envelope.event.request_id, ApprovalOption("approve")))
                    if isinstance(envelope.event, ev.TurnEnded):
                        break
                assert [e.seq for e in seen] == list(range(1, len(seen) + 1))  # from the first, each once
                resolved = next(e.event for e in seen if isinstance(e.event, ev.ApprovalResolved))
                assert resolved.by == "owner (tester)"
                await session.submit(SetMode(Mode("plan")), "mode-1")
                await session.submit(SetMode(Mode("plan")), "mode-1")  # the same id: nothing twice
                info = await client.info()
                assert info["user"] == {"name": "owner", "role": "admin", "via": "token"}
                for _ in range(100):
                    if (await client.describe(created["id"]))["state"]["mode"] == "plan":
                        break
                    await asyncio.sleep(0.05)
                assert (await client.describe(created["id"]))["state"]["mode"] == "plan"
                events = await srv.store.load_events(created["id"])
                assert sum(isinstance(e.event, ev.ModeChanged) for e in events) == 1
            assert (project / "followed").exists()

    asyncio.run(main())
