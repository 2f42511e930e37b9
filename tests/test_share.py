"""Share links: a read-only view of one session, from the user's own server. The link's token reads that
session's snapshot, transcript, diff and live events — and nothing else: every op, every other session,
the session list, the fleet, the providers, pending changes, pairing, users and ACP are refused (403). A
revoked share's open stream is closed at once (revoked through the API) or within a second or two (revoked
in the store by another process), an expired one's when it expires, and its token opens nothing after."""

from __future__ import annotations

import asyncio
import re
import time

import httpx

from tests.support.harness import auger_cli
from tests.support.mock_openai import Reply, ToolCall
from tests.support.serve import TOKEN, served, sse_events, start_process, stop_process

OPS = [{"type": "user_turn", "text": "let me in"}, {"type": "interrupt"}, {"type": "shutdown"},
       {"type": "set_mode", "mode": "plan"}, {"type": "compact"}, {"type": "undo"}, {"type": "rollback", "turns": 1},
       {"type": "run_shell", "command": "touch pwned"},
       {"type": "approval_decision", "request_id": "r1", "decision": "approve"}]


async def _turn(srv, session_id: str, text: str) -> None:
    await srv.client.post(f"/api/sessions/{session_id}/ops",
                          json={"submission_id": f"t-{time.monotonic_ns()}", "op": {"type": "user_turn", "text": text}})
    for _ in range(300):
        snap = (await srv.client.get(f"/api/sessions/{session_id}")).json()
        if snap["state"]["running_turn"] is None and snap["state"]["last_seq"] > 3:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the turn did not end")


async def _until_closed(stream, timeout: float) -> dict:
    """Read a share's stream until its final `closing` event (within `timeout` seconds)."""
    async def read() -> dict:
        async for event in stream:
            if event.get("event") == "closing":
                return event
        raise AssertionError("the stream ended without a closing event")

    return await asyncio.wait_for(read(), timeout)


def test_a_share_reads_its_session_only_refuses_every_op_and_ends_when_revoked(project, server, tmp_path):
    server.add(Reply(text="the shared answer", tool_calls=[ToolCall("write_file", {"path": "s.txt", "content": "x\n"})]),
               Reply(text="shared turn done"), Reply(text="the other session"))

    async def main():
        async with served(project, server, tmp_path / "s.db", "mode=auto", mode="auto") as srv:
            shared = (await srv.client.post("/api/sessions", json={"cwd": str(project)})).json()["id"]
            other = (await srv.client.post("/api/sessions", json={"cwd": str(project)})).json()["id"]
            await _turn(srv, shared, "write it")
            await _turn(srv, other, "something else")

            made = await srv.client.post(f"/api/sessions/{shared}/shares", json={"expires_in": 3600})
            assert made.status_code == 201, made.text
            share = made.json()
            assert share["url"].startswith(f"{srv.url}/share?code=augs_") and share["created_by"] == "owner"
            token = share["url"].partition("code=")[2]
            assert share["token"] == token
            for odd in (59, 31 * 86400, "forever", "1y", True, 1.5):
                bad = await srv.client.post(f"/api/sessions/{shared}/shares", json={"expires_in": odd})
                assert bad.status_code == 400, odd
            in_words = (await srv.client.post(f"/api/sessions/{shared}/shares", json={"expires_in": "2h"})).json()
            assert 7190 < in_words["expires"] - in_words["created"] <= 7200
            await srv.client.post(f"/api/shares/{in_words['id']}/revoke", json={})
            viewer = httpx.AsyncClient(base_url=srv.url, timeout=30, headers={"authorization": f"Bearer {token}"})
            srv.clients.append(viewer)

            # what it may read: this session's snapshot, transcript, diff and events
            assert (await viewer.get(f"/api/sessions/{shared}")).json()["id"] == shared
            items = (await viewer.get(f"/api/sessions/{shared}/items")).json()["items"]
            assert any(i["item"].get("text") == "write it" for i in items)
            assert "s.txt" in (await viewer.get(f"/api/sessions/{shared}/diff")).json()["turns"][0]["diff"]
            me = (await viewer.get("/api/server")).json()
            assert me == {"user": {"name": f"share-{share['id']}", "role": "share", "via": "share"},
                          "share": {"session": shared, "expires": share["expires"]}}  # no roots, no model

            # ...and nothing else
            for op in OPS:
                refused = await viewer.post(f"/api/sessions/{shared}/ops", json={"submission_id": "s-1", "op": op})
                assert refused.status_code == 403, (op, refused.text)
                assert "read-only" in refused.json()["error"]
            for method, path in [("GET", f"/api/sessions/{other}"), ("GET", f"/api/sessions/{other}/items"),
                                 ("GET", f"/api/sessions/{other}/events"), ("GET", f"/api/sessions/{other}/diff"),
                                 ("GET", "/api/sessions"), ("GET", "/api/events"), ("GET", "/api/fleet"),
                                 ("GET", "/api/providers"), ("GET", f"/api/sessions/{shared}/pending"),
                                 ("POST", "/api/sessions"), ("POST", f"/api/sessions/{shared}/handoff"),
                                 ("POST", f"/api/sessions/{shared}/shares"), ("GET", "/api/shares"),
                                 ("POST", "/api/pair"), ("GET", "/api/users"), ("GET", "/api/audit"),
                                 ("PATCH", "/api/providers/openai")]:
                answer = await viewer.request(method, path, json={} if method != "GET" else None)
                assert answer.status_code == 403, (method, path, answer.status_code, answer.text)
            assert not (project / "pwned").exists()
            from websockets.asyncio.client import connect as ws_connect
            from websockets.exceptions import InvalidStatus

            try:
                async with ws_connect(srv.url.replace("http", "ws") + "/acp",
                                      additional_headers={"authorization": f"Bearer {token}"}):
                    raise AssertionError("a share opened /acp")
            except InvalidStatus as exc:
                assert exc.response.status_code == 403

            # live events; revoked through the API: the stream ends now, and the token opens nothing after
            async with viewer.stream("GET", f"/api/sessions/{shared}/events") as response:
                assert response.status_code == 200
                stream = sse_events(response)
                first = await anext(stream)
                assert first["event"] == "state"
                revoked = await srv.client.post(f"/api/shares/{share['id']}/revoke", json={})
                assert revoked.status_code == 200 and revoked.json()["live"] is False
                started = time.monotonic()
                closing = await _until_closed(stream, 5)
                assert "share link was revoked" in closing["data"]["reason"] and time.monotonic() - started < 2
            assert (await viewer.get(f"/api/sessions/{shared}")).status_code == 401
            again = await srv.client.post(f"/api/shares/{share['id']}/revoke", json={})
            assert again.status_code == 404
            listed = (await srv.client.get("/api/shares", params={"session": shared})).json()["shares"]
            assert [(s["id"], s["live"]) for s in listed] == [(in_words["id"], False), (share["id"], False)]
            audit = (await srv.client.get("/api/audit", params={"action": "share"})).json()["entries"]
            assert [(e["action"], e["status"]) for e in audit][:4] == [
                ("share.revoke", 404), ("share.revoke", 200), ("share.create", 403), ("share.revoke", 200)]

    asyncio.run(main())


def test_a_share_ends_when_it_expires_or_is_revoked_elsewhere_and_its_link_signs_a_browser_in(
        project, server, tmp_path):
    from auger.frontends.users import new_share_token, token_hash

    async def main():
        async with served(project, server, tmp_path / "s.db") as srv:
            sid = (await srv.client.post("/api/sessions", json={"cwd": str(project)})).json()["id"]
            soon, later = new_share_token(), new_share_token()
            await srv.store.add_share("e1", sid, token_hash(soon), "owner", time.time() + 1.5)
            await srv.store.add_share("e2", sid, token_hash(later), "owner", time.time() + 3600)

            # the link: a page that signs this browser in for the session, read-only, and takes it there
            browser = httpx.AsyncClient(base_url=srv.url, timeout=30)
            srv.clients.append(browser)
            opened = await browser.get(f"/share?code={later}", headers={"sec-fetch-site": "cross-site"})
            assert opened.status_code == 200 and f"/#/s/{sid}" in opened.text
            assert re.search(r"auger_share=augs_\S+; Path=/; HttpOnly; SameSite=Strict", opened.headers["set-cookie"])
            assert opened.headers["referrer-policy"] == "no-referrer"
            assert (await browser.get(f"/api/sessions/{sid}")).status_code == 200  # the cookie it got
            assert (await browser.get("/api/sessions")).status_code == 403
            assert (await browser.get("/share?code=augs_nothing")).status_code == 403

            for token, ends in ((soon, "expires"), (later, "revoked in the store")):
                reader = httpx.AsyncClient(base_url=srv.url, timeout=30, headers={"authorization": f"Bearer {token}"})
                srv.clients.append(reader)
                async with reader.stream("GET", f"/api/sessions/{sid}/events") as response:
                    assert response.status_code == 200, ends
                    stream = sse_events(response)
                    assert (await anext(stream))["event"] == "state"
                    if ends == "revoked in the store":
                        await srv.store.revoke_share("e2")  # as another server, or `auger share revoke`, would
                    closing = await _until_closed(stream, 6)
                    assert "share link was revoked or has expired" in closing["data"]["reason"], ends
                assert (await reader.get(f"/api/sessions/{sid}")).status_code == 401, ends
            assert (await browser.get(f"/api/sessions/{sid}")).status_code == 401

    asyncio.run(main())


def test_auger_share_makes_lists_and_revokes_links(project, server, auger_home, tmp_path):
    proc, url, _ = start_process(project, auger_home, server, tmp_path / "s.db")
    env = {"AUGER_SERVER_TOKEN": TOKEN}
    try:
        api = httpx.Client(base_url=url, headers={"authorization": f"Bearer {TOKEN}"}, timeout=30)
        server.add(Reply(text="worth sharing"))
        sid = api.post("/api/sessions", json={"cwd": str(project)}).json()["id"]
        api.post(f"/api/sessions/{sid}/ops", json={"submission_id": "a", "op": {"type": "user_turn", "text": "hi"}})
        for _ in range(200):
            if any(r["id"] == sid for r in api.get("/api/sessions").json()["sessions"]):
                break
            time.sleep(0.05)
        made = auger_cli("share", sid[:8], "--expires", "2h", "--connect", url, home=auger_home, env=env)
        assert made.returncode == 0, made.stderr
        link = made.stdout.splitlines()[0]
        assert link.startswith(f"{url}/share?code=augs_")
        share_id = re.search(r"auger share revoke (\w+)", made.stdout).group(1)
        token = link.partition("code=")[2]
        assert httpx.get(f"{url}/api/sessions/{sid}", headers={"authorization": f"Bearer {token}"}).status_code == 200
        listed = auger_cli("share", "list", "--connect", url, home=auger_home, env=env)
        assert re.search(rf"{share_id}\s+session {sid[:8]}\s+live", listed.stdout), listed.stdout
        bad = auger_cli("share", sid, "--expires", "forever", "--connect", url, home=auger_home, env=env)
        assert bad.returncode == 2 and "--expires" in bad.stderr
        too_long = auger_cli("share", sid, "--expires", "90d", "--connect", url, home=auger_home, env=env)
        assert too_long.returncode == 2 and "30 days" in too_long.stderr
        gone = auger_cli("share", "revoke", share_id, "--connect", url, home=auger_home, env=env)
        assert gone.returncode == 0 and "revoked" in gone.stdout
        assert httpx.get(f"{url}/api/sessions/{sid}", headers={"authorization": f"Bearer {token}"}).status_code == 401
        listed = auger_cli("share", "list", sid[:8], "--connect", url, home=auger_home, env=env)
        assert re.search(rf"{share_id}\s+session {sid[:8]}\s+revoked", listed.stdout), listed.stdout
        api.close()
    finally:
        stop_process(proc)
