"""A server a team shares: people with their own tokens and roles, every action recorded with who did it,
and a revoked token refused at once — its open event streams closed too. Through the real routes of a
real `auger serve` app under uvicorn, and the real `auger users` command on the same database."""

from __future__ import annotations

import asyncio
import time

import httpx

from tests.support.harness import auger_cli
from tests.support.mock_openai import Reply, ToolCall
from tests.support.serve import served, sse_events
from tests.test_server_api import create, read_until, run, submit


def user_client(srv, token: str, name: str = "") -> httpx.AsyncClient:
    client = httpx.AsyncClient(base_url=srv.url, timeout=30, headers={
        "authorization": f"Bearer {token}", **({"x-auger-client": name} if name else {})})
    srv.clients.append(client)
    return client


async def add_user(srv, name: str, role: str) -> str:
    made = await srv.client.post("/api/users", json={"name": name, "role": role})
    assert made.status_code == 201, made.text
    return made.json()["token"]


def test_roles_hold_every_action_is_audited_and_a_revoked_token_is_refused_at_once(project, server, tmp_path,
                                                                                   isolated_home):
    server.add(Reply(tool_calls=[ToolCall("write_file", {"path": "a.txt", "content": "x\n"})]), Reply(text="done"))
    db = tmp_path / "s.db"
    made = auger_cli("users", "add", "carol", "--role", "viewer", "--db", str(db), home=isolated_home)
    assert made.returncode == 0, made.stderr
    carol_token = made.stdout.strip()

    async def main():
        async with served(project, server, db) as srv:
            alice = user_client(srv, await add_user(srv, "alice", "member"), "laptop")
            bob = user_client(srv, await add_user(srv, "bob", "approver"))
            carol = user_client(srv, carol_token)
            out = {}
            session = await create(alice, project)
            sid = session["id"]
            out["created_by"] = session["created_by"]
            out["carol_creates"] = (await carol.post("/api/sessions", json={"cwd": str(project)})).status_code
            out["carol_reads"] = (await carol.get(f"/api/sessions/{sid}")).status_code
            out["carol_prompts"] = (await submit(carol, sid, "c1", {"type": "user_turn", "text": "x"})).status_code
            seen: list[dict] = []
            async with srv.events(sid, client=alice) as stream:
                await anext(stream)
                assert (await submit(alice, sid, "a1", {"type": "user_turn", "text": "write it"})).status_code == 202
                request = await read_until(stream, "approval_request", seen)
                decision = {"type": "approval_decision", "request_id": request["request_id"], "decision": "approve"}
                out["alice_answers"] = (await submit(alice, sid, "a2", decision)).status_code
                out["bob_answers"] = (await submit(bob, sid, "b1", decision)).status_code
                out["resolved"] = await read_until(stream, "approval_resolved", seen)
                await read_until(stream, "turn_ended", seen)
            out["alice_users"] = (await alice.get("/api/users")).status_code
            out["bob_adds"] = (await bob.post("/api/users", json={"name": "eve", "role": "admin"})).status_code
            out["bob_audit"] = (await bob.get("/api/audit")).status_code
            out["carol_mcp"] = (await submit(alice, sid, "a3", {"type": "add_mcp_server", "name": "x",
                                                                 "config": {"command": "true"}})).status_code
            # revocations: through the API (alice), and with the command on the same database (carol), each
            # while the user holds an open stream
            out["alice_stream"], out["alice_after"] = await _revoked_while_streaming(
                srv, alice, sid, lambda: srv.client.post("/api/users/alice/revoke"))
            out["carol_stream"], out["carol_after"] = await _revoked_while_streaming(
                srv, carol, sid, lambda: asyncio.to_thread(
                    auger_cli, "users", "revoke", "carol", "--db", str(db), home=isolated_home))
            out["bob_still"] = (await bob.get(f"/api/sessions/{sid}")).status_code
            audit = (await srv.client.get("/api/audit", params={"limit": "200"})).json()["entries"]
            out["alice_audit"] = (await srv.client.get("/api/audit", params={"actor": "alice"})).json()["entries"]
            out["users"] = (await srv.client.get("/api/users")).json()["users"]
            return out, audit

    out, audit = run(main())
    assert out["created_by"] == "alice"
    assert (out["carol_creates"], out["carol_reads"], out["carol_prompts"]) == (403, 200, 403)
    assert (out["alice_answers"], out["bob_answers"]) == (403, 202)
    assert out["resolved"]["by"] == "bob" and out["resolved"]["decision"] == "approve"
    assert (out["alice_users"], out["bob_adds"], out["bob_audit"], out["carol_mcp"]) == (403, 403, 403, 403)
    for who in ("alice", "carol"):
        closing, elapsed = out[f"{who}_stream"]
        assert closing["event"] == "closing" and "revoked" in closing["data"]["reason"], closing
        assert elapsed < 5.0, (who, elapsed)  # at once (the command's revocation within the watch's second)
        assert out[f"{who}_after"] == 401
    assert out["bob_still"] == 200
    done = {(e["actor"], e["action"], e["status"]) for e in audit}
    assert {("owner", "user.add", 201), ("alice", "session.create", 201), ("alice", "op.user_turn", 202),
            ("alice", "op.approval_decision", 403), ("bob", "op.approval_decision", 202),
            ("carol", "session.create", 403), ("bob", "user.add", 403), ("alice", "op.add_mcp_server", 403),
            ("owner", "user.revoke", 200)} <= done, done
    assert all(e["actor"] == "alice" for e in out["alice_audit"]) and len(out["alice_audit"]) >= 4
    assert {u["name"]: (u["role"], u["revoked"] is not None) for u in out["users"]} == {
        "carol": ("viewer", True), "alice": ("member", True), "bob": ("approver", False)}


async def _revoked_while_streaming(srv, client, sid, revoke):
    """Open the user's stream of the session, revoke the user, read to the stream's last word: (the last
    event, seconds from the revocation to it), and the status of the user's next request."""
    async with client.stream("GET", f"/api/sessions/{sid}/events") as response:
        assert response.status_code == 200
        events = sse_events(response)
        await anext(events)  # the state
        await asyncio.sleep(0.3)
        started = time.monotonic()
        await revoke()
        last = None
        async for event in events:
            if event.get("event") == "closing":
                last = event
                break
        elapsed = time.monotonic() - started
    after = (await client.get(f"/api/sessions/{sid}")).status_code
    return (last, elapsed), after


def test_a_paired_browser_is_the_user_who_asked_for_the_link(project, server, tmp_path):
    async def main():
        async with served(project, server, tmp_path / "s.db") as srv:
            alice = user_client(srv, await add_user(srv, "alice", "member"))
            link = (await alice.post("/api/pair", json={})).json()["url"]
            browser = httpx.AsyncClient(timeout=30, headers={"origin": srv.url})
            srv.clients.append(browser)
            paired = await browser.get(link)
            me = (await browser.get(f"{srv.url}/api/server")).json()["user"]
            approve = await browser.post(f"{srv.url}/api/sessions", json={"cwd": str(project)})
            await srv.client.post("/api/users/alice/revoke")
            after = await browser.get(f"{srv.url}/api/server")
            audit = (await srv.client.get("/api/audit", params={"action": "pair"})).json()["entries"]
            return paired.status_code, me, approve.status_code, approve.json(), after.status_code, audit

    paired, me, created, session, after, audit = run(main())
    assert paired == 303 and me["name"] == "alice" and me["role"] == "member" and me["via"].startswith("browser-")
    assert created == 201 and session["created_by"] == "alice"
    assert after == 401  # the browser goes with its user
    assert [(e["actor"], e["status"]) for e in audit] == [("alice", 201)]


def test_users_are_named_and_given_roles_only_as_allowed(project, server, tmp_path, isolated_home):
    db = tmp_path / "s.db"
    bad = [auger_cli("users", "add", name, "--role", "member", "--db", str(db), home=isolated_home)
           for name in ("owner", "Alice", "a b", "../x", "x" * 40)]
    first = auger_cli("users", "add", "dave", "--role", "admin", "--db", str(db), home=isolated_home)
    again = auger_cli("users", "add", "dave", "--role", "viewer", "--db", str(db), home=isolated_home)
    listed = auger_cli("users", "list", "--json", "--db", str(db), home=isolated_home)
    assert all(r.returncode == 2 and "Traceback" not in r.stderr for r in bad)
    assert first.returncode == 0 and first.stdout.strip().startswith("aug_")
    assert again.returncode == 2 and "exists" in again.stderr
    assert [u["name"] for u in __import__("json").loads(listed.stdout)] == ["dave"]
    assert first.stdout.strip() not in db.read_bytes().decode("latin-1")  # only its hash is kept

    async def main():
        async with served(project, server, db) as srv:
            dave = user_client(srv, first.stdout.strip())
            codes = [(await dave.post("/api/users", json=body)).status_code for body in (
                {"name": "owner", "role": "admin"}, {"name": "eve", "role": "root"}, {"name": "eve"},
                {"name": "eve", "role": "viewer", "token": "mine"})]
            forged = user_client(srv, "aug_" + "A" * 43)
            return codes, (await dave.get("/api/users")).status_code, (await forged.get("/api/server")).status_code

    codes, listed_by_admin, forged = run(main())
    assert codes == [400, 400, 400, 400] and listed_by_admin == 200 and forged == 401
