"""The real `auger serve` command: what it prints, graceful shutdown (the turn interrupted and recorded,
each stream told), a stream resumed by cursor across a restart of the process, a database shared with
`auger exec`, and the store's lease keeping a session open in one process only."""

from __future__ import annotations

import asyncio
import re
import signal
import ssl

import httpx

from auger.store.sqlite import SqliteStore
from tests.support.harness import auger_cli
from tests.support.mock_openai import Reply, ToolCall
from tests.support.schema_check import check_envelope
from tests.support.serve import TOKEN, sse_events
from tests.support.serve import start_process as start
from tests.support.serve import stop_process as stop

TIMEOUT = 90
HEADERS = {"authorization": f"Bearer {TOKEN}"}


async def read_numbered(stream, seen: list[dict], until: str) -> list[dict]:
    """Numbered envelopes into `seen` until one of type `until`; the unnumbered events met on the way."""
    others = []
    async for event in stream:
        if "id" in event:
            check_envelope(event["data"])
            seen.append(event["data"])
            if event["data"]["type"] == until:
                return others
        elif "data" in event:
            others.append(event)
    raise AssertionError(f"the stream ended before {until}; unnumbered: {others}")


def test_serve_prints_its_url_and_pairing_link_shuts_down_gracefully_and_a_stream_resumes_after_a_restart(
        project, server, isolated_home, tmp_path):
    server.add(Reply(tool_calls=[ToolCall("write_file", {"path": "a.txt", "content": "x"})]), Reply(text="resumed"))
    db = tmp_path / "shared.db"
    proc, url, printed = start(project, isolated_home, server, db)
    seen: list[dict] = []
    try:
        assert "/pair?code=" in printed[1] and "AUGER_SERVER_TOKEN" in printed[2]

        async def before_restart():
            async with httpx.AsyncClient(base_url=url, headers=HEADERS, timeout=30) as client:
                sid = (await client.post("/api/sessions", json={"cwd": str(project)})).json()["id"]
                async with client.stream("GET", f"/api/sessions/{sid}/events") as response:
                    stream = sse_events(response)
                    await client.post(f"/api/sessions/{sid}/ops", json={
                        "submission_id": "t1", "op": {"type": "user_turn", "text": "write"}})
                    await read_numbered(stream, seen, "approval_request")
                    proc.send_signal(signal.SIGTERM)  # the turn waits for an answer: shut down under it
                    closing = await read_numbered_until_closing(stream, seen)
                return sid, closing

        sid, closing = asyncio.run(asyncio.wait_for(before_restart(), TIMEOUT))
        code, stderr = proc.wait(30), proc.stderr.read()
        assert code == 0, stderr
        assert closing == {"reason": "the server is shutting down"}
        ended = [e for e in seen if e["type"] == "turn_ended"]
        assert ended and ended[-1]["reason"] == "cancelled" and "shutting down" in ended[-1]["message"]
        assert seen[-1]["type"] == "shutdown_complete"
        cut = seen[len(seen) // 2]["seq"]  # a client that only got this far before the restart
        del seen[len(seen) // 2 + 1:]

        proc, url, _ = start(project, isolated_home, server, db)

        async def after_restart():
            async with httpx.AsyncClient(base_url=url, headers=HEADERS, timeout=30) as client:
                async with client.stream("GET", f"/api/sessions/{sid}/events",
                                         headers={"last-event-id": str(cut)}) as response:
                    stream = sse_events(response)
                    state = await anext(stream)
                    assert state["event"] == "state" and state["data"]["state"]["open"] is False
                    await read_numbered(stream, seen, "shutdown_complete")
                    resumed = await client.post(f"/api/sessions/{sid}/ops", json={
                        "submission_id": "t2", "op": {"type": "user_turn", "text": "again"}})
                    assert resumed.status_code == 202, resumed.text
                    await read_numbered(stream, seen, "turn_ended")

        asyncio.run(asyncio.wait_for(after_restart(), TIMEOUT))
    finally:
        code, stderr = stop(proc)
    assert code == 0, stderr
    seqs = [e["seq"] for e in seen]
    assert seqs == list(range(1, len(seqs) + 1))  # every envelope exactly once across the restart
    assert [e["type"] for e in seen if e["type"] == "session_configured"] == ["session_configured"] * 2
    assert seen[-1]["type"] == "turn_ended" and seen[-1]["reason"] == "complete" and seen[-1]["submission_id"] == "t2"


async def read_numbered_until_closing(stream, seen: list[dict]) -> dict:
    async for event in stream:
        if "id" in event:
            seen.append(event["data"])
        elif event.get("event") == "closing":
            return event["data"]
    raise AssertionError("the stream ended without a closing event")


def test_a_session_run_by_auger_exec_on_the_shared_db_is_listed_and_streamed_and_a_leased_one_is_not_opened_twice(
        project, server, isolated_home, tmp_path):
    server.add(Reply(text="from the terminal"))
    db = tmp_path / "shared.db"
    proc, url, _ = start(project, isolated_home, server, db)
    try:
        async def main():
            store = SqliteStore(db)
            async with httpx.AsyncClient(base_url=url, headers=HEADERS, timeout=30) as client:
                async with client.stream("GET", "/api/events") as response:
                    stream = sse_events(response)
                    result = await asyncio.to_thread(
                        auger_cli, "exec", "--base-url", server.base_url, "--model", "mock-model", "--db", str(db),
                        "hi", home=isolated_home, cwd=project)
                    assert result.returncode == 0, result.stderr
                    async for event in stream:  # the terminal's session appears in the list
                        if event.get("data", {}).get("type") == "session_updated":
                            break
                listed = (await client.get("/api/sessions")).json()["sessions"]
                assert event["data"]["session_id"] == listed[0]["id"]
                sid = listed[0]["id"]
                seen: list[dict] = []
                async with client.stream("GET", f"/api/sessions/{sid}/events") as response:
                    stream = sse_events(response)
                    await read_numbered(stream, seen, "shutdown_complete")
                assert await store.claim(sid) is None  # this test process now runs it, as `auger exec` would
                refused = await client.post(f"/api/sessions/{sid}/ops", json={
                    "submission_id": "x", "op": {"type": "user_turn", "text": "mine?"}})
                await store.release(sid)
            await store.aclose()
            return listed, seen, refused

        listed, seen, refused = asyncio.run(asyncio.wait_for(main(), TIMEOUT))
    finally:
        stop(proc)
    assert len(listed) == 1 and listed[0]["open"] is False
    assert any(e["type"] == "agent_message" and e["text"] == "from the terminal" for e in seen)
    assert refused.status_code == 409 and "another auger process" in refused.json()["error"]


def test_over_tls_the_api_and_the_pairing_cookie_are_https_only(project, server, isolated_home, tmp_path, certificate):
    cert, key = certificate
    proc, url, printed = start(project, isolated_home, server, tmp_path / "s.db", "--tls-cert", str(cert),
                               "--tls-key", str(key))
    try:
        assert url.startswith("https://127.0.0.1:")
        code = re.search(r"/pair\?code=(\S+)", printed[1]).group(1)

        async def main():
            trusted = ssl.create_default_context(cafile=str(cert))
            async with httpx.AsyncClient(base_url=url, verify=trusted, timeout=30) as client:
                listed = await client.get("/api/sessions", headers=HEADERS)
                paired = await client.get("/pair", params={"code": code})
            plain = url.replace("https://", "http://")
            async with httpx.AsyncClient(base_url=plain, timeout=5) as client:  # a TLS port may just wait
                try:
                    await client.get("/api/sessions", headers=HEADERS)
                    cleartext = True
                except httpx.HTTPError:
                    cleartext = False
            return listed, paired, cleartext

        listed, paired, cleartext = asyncio.run(asyncio.wait_for(main(), TIMEOUT))
    finally:
        stop(proc)
    assert listed.status_code == 200
    assert paired.status_code == 303 and "; Secure" in paired.headers["set-cookie"]
    assert not cleartext  # the token is never accepted over plain HTTP on a TLS server
