"""One session on every device: a session started in the terminal UI is handed to a real `auger serve` on the
same store while its turn waits for an approval; a phone (headless Chromium at a phone's size) answers the
approval through the link the terminal printed; the terminal shows the answer and the rest of the turn with
nothing missing or repeated; a second terminal attached to the server sees the same transcript; and the
session's events in the store are numbered without a gap or a repeat across the two processes."""

from __future__ import annotations

import asyncio
import re
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.support import browser as chromium_support
from tests.support.browser import PHONE, open_page
from tests.support.mock_openai import Reply, ToolCall
from tests.support.serve import TOKEN, start_process, stop_process
from tests.tui.terminal import Terminal, need_tmux

HEADERS = {"authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def browser():
    with chromium_support.for_tests() as launched:
        yield launched


def _until(predicate, what: str, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while not (found := predicate()):
        assert time.monotonic() < deadline, f"{what} not seen within {timeout}s"
        time.sleep(0.1)
    return found


def _stored_events(db, session_id: str) -> list:
    from auger.store.factory import open_store

    async def load():
        store = open_store(db)
        try:
            return await store.load_events(session_id)
        finally:
            await store.aclose()

    with ThreadPoolExecutor(1) as pool:  # Playwright's sync API keeps an event loop of its own in this thread
        return pool.submit(asyncio.run, load()).result()


def test_a_terminal_session_is_handed_to_the_server_and_its_approval_answered_on_a_phone(
        browser, project, server, auger_home, tmp_path):
    from auger.protocol import events as ev

    need_tmux()
    db = tmp_path / "shared.db"
    server.add(Reply(text="I will write the file.", tool_calls=[ToolCall("shell", {"command": "echo made > made.txt"})]),
               Reply(text="All done after the phone answered."))
    proc, url, _ = start_process(project, auger_home, server, db, "--mode", "safe")
    env = {"AUGER_SERVER_TOKEN": TOKEN}
    terms: list[Terminal] = []
    try:
        t = Terminal(project, auger_home, ["--base-url", server.base_url, "-m", "mock-model", "--mode", "safe",
                                           "--db", str(db), "-c", "generate_titles=false"], width=140, env=env)
        terms.append(t)
        t.wait_for("auger · new session")
        t.submit("make the file")
        t.wait_until(lambda s: "$ echo made > made.txt" in s and "[y] yes, once" in s, "the approval card")
        session_id = re.search(r"auger · new session ([0-9a-f]{8})", t.history()).group(1)

        t.submit("/handoff")
        shown = t.wait_for("open it on a phone:", whole=True)
        link = re.search(r"open it on a phone: (\S+)", shown).group(1)
        assert link.startswith(f"{url}/pair?code=") and "&session=" in link
        full_id = link.rpartition("&session=")[2]
        assert full_id.startswith(session_id)
        t.wait_until(lambda s: "approve? [y]" in s, "the approval still waiting, answerable here or anywhere")

        errors: list[str] = []
        page, _ = open_page(browser, link, errors, **PHONE)
        page.wait_for_url(lambda u: f"#/s/{full_id}" in u)
        page.locator('[data-option="approve"]').wait_for()
        assert page.locator("text=echo made > made.txt").count() >= 1
        page.click('[data-option="approve"]')

        after = t.wait_for("All done after the phone answered.", whole=True)
        assert re.search(r"→ yes, once \(by owner \(browser-[0-9a-f]+, web\)\)", after), after
        t.wait_for(f"session {session_id} runs in {url} now", whole=True)
        page.locator('[data-role="agent-message"]', has_text="All done after the phone answered.").wait_for()
        assert (project / "made.txt").read_text() == "made\n"
        once = ("I will write the file.", "All done after the phone answered.", "approval needed",
                "✓ shell echo made > made.txt", "› make the file")
        # printed lines reach the scrollback through prompt_toolkit's stdout proxy, up to 0.2 s after the live area
        deadline = time.monotonic() + 5
        while not all((history := t.history()).count(line) == 1 for line in once) and time.monotonic() < deadline:
            time.sleep(0.1)
        for line in once:
            assert history.count(line) == 1, f"{line!r} shown {history.count(line)} times:\n{history}"

        api = httpx.Client(base_url=url, headers=HEADERS, timeout=30)
        snap = _until(lambda: (s := api.get(f"/api/sessions/{full_id}").json())["state"]["open"] and s,
                      "the server running the session")
        assert snap["state"]["running_turn"] is None and not snap["state"]["pending_approvals"]
        api.close()

        t2 = Terminal(project, auger_home, ["attach", session_id, "--connect", url], width=140, env=env)
        terms.append(t2)
        seen = t2.wait_for("All done after the phone answered.", whole=True)
        for same in ("› make the file", "I will write the file.", "✓ shell echo made > made.txt"):
            assert seen.count(same) == 1, seen
        assert re.search(r"→ yes, once \(by owner \(browser-[0-9a-f]+, web\)\)", seen)

        events = _stored_events(db, full_id)
        assert [e.seq for e in events] == list(range(1, len(events) + 1))  # contiguous: nothing lost or doubled
        kinds = [type(e.event) for e in events]
        resolved = [e.event for e in events if isinstance(e.event, ev.ApprovalResolved)]
        assert len(resolved) == 1 and "browser" in resolved[0].by
        handed = kinds.index(ev.ShutdownComplete)  # the terminal let go at the turn's end...
        assert kinds.index(ev.TurnEnded) < handed
        reopened = [e.event for e in events[handed:] if isinstance(e.event, ev.SessionConfigured)]
        assert reopened and reopened[0].resumed  # ...and the server went on with it
        assert errors == []
        t2.submit("/detach")
        t.send("C-d")
        t.wait_for("AUGER-EXITED:0", whole=True)
    finally:
        for term in terms:
            term.close()
        code, stderr = stop_process(proc)
        assert code == 0, stderr


def test_auger_handoff_moves_a_stored_session_or_one_a_terminal_runs(project, server, auger_home, tmp_path):
    from tests.support.harness import auger_cli

    need_tmux()
    db = tmp_path / "shared.db"
    env = {"AUGER_SERVER_TOKEN": TOKEN}
    server.add(Reply(tool_calls=[ToolCall("shell", {"command": "touch asked.txt"})]), Reply(text="finished in the end"),
               Reply(text="the stored one answered"))
    t = Terminal(project, auger_home, ["--base-url", server.base_url, "-m", "mock-model", "--mode", "safe", "--db",
                                       str(db), "-c", "generate_titles=false"], width=140, env=env)
    proc = None
    try:
        t.wait_for("auger · new session")
        session_id = re.search(r"auger · new session ([0-9a-f]{8})", t.history()).group(1)
        t.submit("/handoff")  # no server on this store yet: said in one line, nothing changes
        t.wait_for("no `auger serve` runs on this session's store")
        t.submit("touch it")
        t.wait_until(lambda s: "$ touch asked.txt" in s and "[y] yes, once" in s, "the approval card")

        proc, url, _ = start_process(project, auger_home, server, db, "--mode", "safe")
        moved = auger_cli("handoff", session_id, "--no-attach", "--db", str(db), home=auger_home, cwd=project, env=env)
        assert moved.returncode == 0, moved.stderr
        assert f"handed to {url}: it goes on there once the process running it lets it go" in moved.stdout
        assert "open it on a phone: " in moved.stdout
        t.wait_for(f"handed to {url} (asked there)", whole=True)  # the terminal heard it through the store
        t.send("y")  # answered here, through the server, by the process still running the turn
        t.wait_for("finished in the end")
        t.wait_for(f"session {session_id} runs in {url} now", whole=True)
        assert (project / "asked.txt").exists()
        api = httpx.Client(base_url=url, headers=HEADERS, timeout=30)
        full_id = _until(lambda: next((r["id"] for r in api.get("/api/sessions").json()["sessions"]
                                       if r["id"].startswith(session_id) and r["open"]), None), "the server running it")
        t.send("C-d")
        t.wait_for("AUGER-EXITED:0", whole=True)
        events = _stored_events(db, full_id)
        assert [e.seq for e in events] == list(range(1, len(events) + 1))
        resolved = [e.event for e in events if e.event.TYPE == "approval_resolved"]
        assert [r.by for r in resolved] == ["owner (terminal)"]

        # a stored session nobody runs is opened there at once
        api.post(f"/api/sessions/{full_id}/ops", json={"submission_id": "end", "op": {"type": "shutdown"}})
        _until(lambda: not api.get(f"/api/sessions/{full_id}").json()["state"]["open"], "the session shut down")
        again = auger_cli("handoff", session_id, "--no-attach", "--db", str(db), home=auger_home, cwd=project, env=env)
        assert again.returncode == 0, again.stderr
        assert "it runs there now" in again.stdout
        assert api.get(f"/api/sessions/{full_id}").json()["state"]["open"] is True
        api.close()
    finally:
        t.close()
        if proc is not None:
            code, stderr = stop_process(proc)
            assert code == 0, stderr


def test_the_handoff_route_is_a_members_and_its_link_lands_on_the_session(project, server, tmp_path):
    from tests.support.serve import in_process

    server.add(Reply(text="stored"))

    async def main():
        async with in_process(project, server, tmp_path / "s.db") as (client, srv):
            created = (await client.post("/api/sessions", json={"cwd": str(project)})).json()["id"]
            await client.post(f"/api/sessions/{created}/ops", json={"submission_id": "x", "op": {"type": "shutdown"}})
            for _ in range(100):
                if srv.hub.live(created) is None:
                    break
                await asyncio.sleep(0.05)
            viewer = (await client.post("/api/users", json={"name": "vic", "role": "viewer"})).json()["token"]
            refused = await client.post(f"/api/sessions/{created}/handoff", json={},
                                        headers={"authorization": f"Bearer {viewer}"})
            assert refused.status_code == 403 and "member" in refused.json()["error"]
            assert (await client.post("/api/sessions/nope/handoff", json={})).status_code == 404
            answer = await client.post(f"/api/sessions/{created}/handoff", json={})
            assert answer.status_code == 200 and answer.json()["open"] is True  # nobody ran it: open here now
            assert srv.hub.live(created) is not None
            link = answer.json()["pair"].replace("http://127.0.0.1:8765", "")
            landed = await client.get(link, headers={"authorization": ""})
            assert landed.status_code == 303 and landed.headers["location"] == f"/#/s/{created}"
            code = (await client.post("/api/pair")).json()["url"].partition("code=")[2]
            odd = await client.get(f"/pair?code={code}&session=../../evil", headers={"authorization": ""})
            assert odd.status_code == 303 and odd.headers["location"] == "/"  # only a session id's page
            audit = (await client.get("/api/audit", params={"action": "session.handoff"})).json()["entries"]
            assert [e["status"] for e in audit] == [200, 404, 403]

    with ThreadPoolExecutor(1) as pool:  # beside the browser's event loop, when this module's other tests made one
        pool.submit(asyncio.run, main()).result()
