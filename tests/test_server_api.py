"""`auger serve`'s HTTP API against real uvicorn on 127.0.0.1 and the mock model: sessions, ops under
client-chosen submission ids, SSE streams by seq that resume exactly, approvals from several clients."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from tests.support.mock_openai import Reply, ToolCall
from tests.support.schema_check import check_envelope
from tests.support.serve import in_process, served, sse_events

TIMEOUT = 60


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, TIMEOUT))


async def create(client, project: Path, **fields) -> dict:
    response = await client.post("/api/sessions", json={"cwd": str(project), **fields})
    assert response.status_code == 201, response.text
    return response.json()


async def submit(client, session_id: str, submission_id: str, op: dict):
    return await client.post(f"/api/sessions/{session_id}/ops", json={"submission_id": submission_id, "op": op})


async def read_until(stream, kind: str, seen: list[dict], *, where=lambda data: True) -> dict:
    """Read numbered envelopes into `seen` until one of type `kind` (and `where`) arrives."""
    async for event in stream:
        if "id" in event:
            check_envelope(event["data"])
            assert event["id"] == event["data"]["seq"]
            seen.append(event["data"])
            if event["data"]["type"] == kind and where(event["data"]):
                return event["data"]
    raise AssertionError(f"the stream ended before a {kind}")


def test_ids_are_seqs_and_a_stream_dropped_mid_turn_resumes_with_every_envelope_once(project, server, tmp_path):
    server.add(Reply(text="a long reply that streams in many small pieces " * 4, chunk_chars=3))

    async def main():
        async with served(project, server, tmp_path / "s.db") as srv:
            session = await create(srv.client, project)
            sid = session["id"]
            assert session["state"]["open"] and session["state"]["last_seq"] >= 1
            first: list[dict] = []
            async with srv.events(sid) as stream:
                state = await anext(stream)
                assert state["event"] == "state" and "id" not in state and state["data"]["id"] == sid
                response = await submit(srv.client, sid, "turn-1", {"type": "user_turn", "text": "go"})
                assert response.status_code == 202 and response.json()["submission_id"] == "turn-1"
                await read_until(stream, "message_delta", first)
            # dropped mid-turn; resumed from the last id received
            rest: list[dict] = []
            async with srv.events(sid, last_event_id=first[-1]["seq"]) as stream:
                assert (await anext(stream))["event"] == "state"
                await read_until(stream, "turn_ended", rest)
            stored = await srv.store.load_events(sid)
            return first, rest, stored

    first, rest, stored = run(main())
    seqs = [e["seq"] for e in first + rest]
    assert seqs == list(range(1, len(seqs) + 1))  # every envelope once, in order, no gap
    assert [e.to_json() for e in stored[:len(seqs)]] == first + rest
    turn = [e for e in first + rest if e["type"] in ("turn_started", "message_delta", "turn_ended")]
    assert all(e["submission_id"] == "turn-1" for e in turn)


def test_a_cursor_past_the_end_is_409_and_an_unknown_session_404(project, server, tmp_path):
    async def main():
        async with served(project, server, tmp_path / "s.db") as srv:
            sid = (await create(srv.client, project))["id"]
            last = (await srv.client.get(f"/api/sessions/{sid}")).json()["state"]["last_seq"]
            beyond = await srv.client.get(f"/api/sessions/{sid}/events", params={"after_seq": last + 5})
            header = await srv.client.get(f"/api/sessions/{sid}/events", headers={"last-event-id": str(last + 1)})
            garbage = await srv.client.get(f"/api/sessions/{sid}/events", headers={"last-event-id": "abc"})
            unknown = await srv.client.get("/api/sessions/nope/events")
            return beyond, header, garbage, unknown

    beyond, header, garbage, unknown = run(main())
    assert beyond.status_code == 409 and "past the last event" in beyond.json()["error"]
    assert header.status_code == 409
    assert garbage.status_code == 400
    assert unknown.status_code == 404


def test_a_repeated_submission_id_starts_one_turn_also_after_a_restart(project, server, tmp_path):
    server.add(Reply(text="only once"))
    db = tmp_path / "s.db"
    body = {"type": "user_turn", "text": "go"}

    async def first_run():
        async with in_process(project, server, db) as (client, srv):
            sid = (await create(client, project))["id"]
            answers = await asyncio.gather(*(submit(client, sid, "same-id", body) for _ in range(3)))
            other = await submit(client, sid, "same-id", {"type": "user_turn", "text": "something else"})
            session = srv.hub.live(sid)
            async for envelope in session.subscribe():
                if envelope.event.TYPE == "turn_ended":
                    break
            return sid, answers, other

    sid, answers, other = run(first_run())
    assert [a.status_code for a in answers] == [202, 202, 202]
    assert sorted(bool(a.json().get("repeated")) for a in answers) == [False, True, True]
    assert other.status_code == 409

    async def after_restart():
        async with in_process(project, server, db) as (client, srv):
            again = await submit(client, sid, "same-id", body)
            return again, srv.hub.live(sid)

    again, live = run(after_restart())
    assert again.status_code == 202 and again.json()["repeated"] is True
    assert live is None  # a repeat opens nothing, starts nothing
    assert len(server.chat_requests) == 1


def test_two_clients_answer_one_approval_one_wins_the_other_409_both_see_it_resolved(project, server, tmp_path):
    server.add(Reply(tool_calls=[ToolCall("write_file", {"path": "a.txt", "content": "x"})]), Reply(text="done"))

    async def main():
        async with served(project, server, tmp_path / "s.db") as srv:
            phone, laptop = srv.another_client("phone"), srv.another_client("laptop")
            sid = (await create(srv.client, project))["id"]
            seen_phone: list[dict] = []
            seen_laptop: list[dict] = []
            async with srv.events(sid, client=phone) as a, srv.events(sid, client=laptop) as b:
                await anext(a), await anext(b)
                await submit(srv.client, sid, "t1", {"type": "user_turn", "text": "write it"})
                request = await read_until(a, "approval_request", seen_phone)
                await read_until(b, "approval_request", seen_laptop)
                snapshot = (await srv.client.get(f"/api/sessions/{sid}")).json()["state"]
                answers = await asyncio.gather(
                    submit(phone, sid, "p1", {"type": "approval_decision", "request_id": request["request_id"],
                                              "decision": "approve"}),
                    submit(laptop, sid, "l1", {"type": "approval_decision", "request_id": request["request_id"],
                                               "decision": "deny"}))
                resolved_a = await read_until(a, "approval_resolved", seen_phone)
                resolved_b = await read_until(b, "approval_resolved", seen_laptop)
                await read_until(a, "turn_ended", seen_phone)
                after = (await srv.client.get(f"/api/sessions/{sid}")).json()["state"]
            stored = [e for e in await srv.store.load_events(sid) if e.event.TYPE == "approval_resolved"]
            return request, snapshot, answers, resolved_a, resolved_b, after, stored

    request, snapshot, answers, resolved_a, resolved_b, after, stored = run(main())
    assert [e["request_id"] for e in snapshot["pending_approvals"]] == [request["request_id"]]
    assert snapshot["running_turn"] == request["turn_id"]
    codes = sorted(a.status_code for a in answers)
    assert codes == [202, 409]
    loser = next(a for a in answers if a.status_code == 409)
    assert "already answered" in loser.json()["error"]
    winner = "phone" if answers[0].status_code == 202 else "laptop"
    assert resolved_a == resolved_b
    assert resolved_a["by"] == f"owner ({winner})" and resolved_a["submission_id"] == ("p1" if winner == "phone" else "l1")
    assert (project / "a.txt").exists() == (winner == "phone")
    assert after["pending_approvals"] == [] and after["running_turn"] is None
    assert len(stored) == 1 and stored[0].event.by == f"owner ({winner})"


def test_items_diff_and_pending_of_a_session_and_the_openapi_document(project, server, tmp_path):
    server.add(Reply(tool_calls=[ToolCall("write_file", {"path": "a.txt", "content": "one\n"})]), Reply(text="done"),
               Reply(tool_calls=[ToolCall("write_file", {"path": "b.txt", "content": "queued\n"})]),
               Reply(text="queued it"))

    async def main():
        async with in_process(project, server, tmp_path / "s.db", mode="auto") as (client, srv):
            sid = (await create(client, project))["id"]
            await submit(client, sid, "t1", {"type": "user_turn", "text": "write"})
            session = srv.hub.live(sid)
            async for envelope in session.subscribe():
                if envelope.event.TYPE == "turn_ended":
                    break
            items = (await client.get(f"/api/sessions/{sid}/items")).json()
            page = (await client.get(f"/api/sessions/{sid}/items", params={"limit": 2})).json()
            older = (await client.get(f"/api/sessions/{sid}/items", params={"before": page["next_before"]})).json()
            diff = (await client.get(f"/api/sessions/{sid}/diff", params={"turn": "1"})).json()
            missing = await client.get(f"/api/sessions/{sid}/diff", params={"turn": "7"})
            pending = (await client.get(f"/api/sessions/{sid}/pending")).json()
            unknown_query = await client.get(f"/api/sessions/{sid}/items", params={"evil": "1"})
            openapi = (await client.get("/api/openapi.json")).json()
            schema = (await client.get("/api/protocol.schema.json")).json()
            from starlette.routing import Route

            routes = {(r.path, method.lower()) for r in client._transport.app.app.routes if isinstance(r, Route)
                      for method in r.methods or () if method != "HEAD"}
            return items, page, older, diff, missing, pending, unknown_query, openapi, schema, routes

    items, page, older, diff, missing, pending, unknown_query, openapi, schema, routes = run(main())
    documented = {(path, method) for path, ops in openapi["paths"].items() for method in ops}
    assert routes and routes <= documented, routes - documented  # every route the server has is in its document
    kinds = [i["item"]["type"] for i in items["items"]]
    assert "user_message" in kinds and "tool_call" in kinds and "assistant_message" in kinds
    assert [i["seq"] for i in page["items"]] == [i["seq"] for i in items["items"][-2:]]
    assert older["items"][-1]["seq"] == page["next_before"] - 1 and older["next_before"] is None
    assert diff["turns"][0]["number"] == 1 and "+one" in diff["turns"][0]["diff"]
    assert diff["turns"][0]["files"][0]["path"] == "a.txt"
    assert missing.status_code == 404
    assert pending == {"count": 0, "files": []}
    assert unknown_query.status_code == 400
    ops = openapi["paths"]["/api/sessions/{id}/ops"]["post"]["requestBody"]["content"]["application/json"]
    ref = ops["schema"]["properties"]["op"]["$ref"]
    assert ref == "/api/protocol.schema.json#/$defs/Op" and "Op" in schema["$defs"]


def test_the_web_ui_is_served_from_its_static_directory_behind_the_token(project, server, tmp_path):
    static = tmp_path / "static"
    (static / "assets").mkdir(parents=True)
    (static / "index.html").write_text("<title>auger</title>")
    (static / "assets" / "app.js").write_text("console.log(1)")

    async def main():
        async with in_process(project, server, tmp_path / "s.db", static_dir=static) as (client, _):
            bare = httpx.AsyncClient(transport=client._transport, base_url="http://127.0.0.1:8765")
            root, script = await client.get("/"), await client.get("/assets/app.js")
            escape = await client.get("/../s.db")
            anonymous = await bare.get("/")
            await bare.aclose()
            return root, script, escape, anonymous

    root, script, escape, anonymous = run(main())
    assert root.status_code == 200 and root.text == "<title>auger</title>"
    assert script.status_code == 200 and script.text == "console.log(1)"
    assert escape.status_code == 404 and anonymous.status_code == 401


def test_the_session_list_stream_tells_of_new_sessions_turns_and_waiting_approvals(project, server, tmp_path):
    server.add(Reply(tool_calls=[ToolCall("write_file", {"path": "a.txt", "content": "x"})]), Reply(text="ok"))

    async def main():
        async with served(project, server, tmp_path / "s.db") as srv:
            got: list[dict] = []
            async with srv.client.stream("GET", "/api/events") as response:
                stream = sse_events(response)
                sid = (await create(srv.client, project))["id"]
                await submit(srv.client, sid, "t1", {"type": "user_turn", "text": "go"})
                async for event in stream:
                    if "data" not in event:
                        continue
                    got.append(event["data"])
                    if event["data"]["type"] == "approval_waiting":
                        await submit(srv.client, sid, "a1", {"type": "approval_decision", "decision": "approve",
                                                             "request_id": event["data"]["request_id"]})
                    if event["data"]["type"] == "turn_ended":
                        break
            listed = (await srv.client.get("/api/sessions")).json()
            return sid, got, listed

    sid, got, listed = run(main())
    assert [e["type"] for e in got] == ["session_created", "turn_started", "session_updated", "approval_waiting",
                                        "approval_resolved", "turn_ended"]
    assert all(e["session_id"] == sid for e in got) and "id" not in got[0]
    assert got[2]["title"] == "go"  # the provisional title, from the first prompt, has no event of its own
    assert got[4]["by"] == "owner" and got[4]["decision"] == "approve"
    assert listed["sessions"][0]["id"] == sid and listed["sessions"][0]["open"] is True


def test_graceful_shutdown_interrupts_and_records_the_turn_and_closes_the_streams(project, server, tmp_path):
    server.add(Reply(tool_calls=[ToolCall("write_file", {"path": "a.txt", "content": "x"})]))

    async def main():
        seen: list[dict] = []
        async with served(project, server, tmp_path / "s.db") as srv:
            sid = (await create(srv.client, project))["id"]
            async with srv.events(sid) as stream:
                await submit(srv.client, sid, "t1", {"type": "user_turn", "text": "go"})
                await read_until(stream, "approval_request", seen)
                srv.uvicorn.should_exit = True
                final = None
                async for event in stream:
                    if "id" in event:
                        seen.append(event["data"])
                    elif event.get("event") == "closing":
                        final = event["data"]
            items = await srv.store.load_items(sid)
        return seen, final, items

    seen, final, items = run(main())
    assert final == {"reason": "the server is shutting down"}
    assert [e["type"] for e in seen][-3:] == ["approval_resolved", "turn_ended", "shutdown_complete"]
    assert seen[-3]["decision"] is None  # the request its turn left unanswered is withdrawn
    ended = next(e for e in seen if e["type"] == "turn_ended")
    assert ended["reason"] == "cancelled" and "shutting down" in ended["message"]
    assert any(s.item.TYPE == "turn_aborted" and "shutting down" in s.item.reason for s in items)


def test_the_session_list_pages_by_cursor_and_refuses_one_it_did_not_give(project, server, tmp_path):
    server.add(*[Reply(text=f"reply {n}") for n in range(3)])

    async def main():
        async with in_process(project, server, tmp_path / "s.db") as (client, srv):
            made = []
            for n in range(3):
                sid = (await create(client, project))["id"]
                await submit(client, sid, f"t{n}", {"type": "user_turn", "text": "hi"})
                async for envelope in srv.hub.live(sid).subscribe():
                    if envelope.event.TYPE == "turn_ended":
                        break
                made.append(sid)
            first = (await client.get("/api/sessions", params={"limit": 2})).json()
            rest = (await client.get("/api/sessions", params={"limit": 2, "cursor": first["next_cursor"]})).json()
            bogus = await client.get("/api/sessions", params={"cursor": "nan/x"})
            return made, first, rest, bogus

    made, first, rest, bogus = run(main())
    assert [s["id"] for s in first["sessions"] + rest["sessions"]] == made[::-1]
    assert rest["next_cursor"] is None and all(s["open"] for s in first["sessions"])
    assert bogus.status_code == 400


def test_two_requests_racing_to_open_a_stored_session_open_it_once(project, server, tmp_path):
    server.add(Reply(text="first"), Reply(text="second"))
    db = tmp_path / "s.db"

    async def make():
        async with in_process(project, server, db) as (client, srv):
            sid = (await create(client, project))["id"]
            await submit(client, sid, "t1", {"type": "user_turn", "text": "hi"})
            async for envelope in srv.hub.live(sid).subscribe():
                if envelope.event.TYPE == "turn_ended":
                    break
            return sid

    sid = run(make())

    async def race():
        async with in_process(project, server, db) as (client, srv):
            answers = await asyncio.gather(client.post("/api/sessions", json={"resume": sid}),
                                           submit(client, sid, "t2", {"type": "user_turn", "text": "again"}),
                                           client.post("/api/sessions", json={"resume": sid}))
            async for envelope in srv.hub.live(sid).subscribe():
                if envelope.event.TYPE == "turn_ended":
                    break
            return answers, await srv.hub.store.load_events(sid)

    answers, events = run(race())
    assert [a.status_code for a in answers] == [200, 202, 200]
    configured = [e for e in events if e.event.TYPE == "session_configured"]
    assert [e.event.resumed for e in configured] == [False, True]  # opened once more, not twice


PRICED = '[providers.priced]\nextends = "openai-compatible"\n[providers.priced.models.m]\ninput_price = 2.0\n' \
         'output_price = 10.0\n'


def test_what_a_web_client_needs_roots_costs_the_running_turns_start_and_the_uis_policy(project, server, tmp_path,
                                                                                      isolated_home):
    """`/api/server` names the roots and the mode a new session gets; a session's cost is in the list and its
    snapshot; a snapshot taken mid-turn says where the running turn started (a reloading page replays it
    whole); the UI's files come with a strict Content-Security-Policy."""
    (isolated_home / "config.toml").write_text(PRICED)
    static = tmp_path / "static"
    static.mkdir()
    (static / "index.html").write_text("<title>auger</title>")
    server.add(Reply(text="priced", usage={"prompt_tokens": 1000, "completion_tokens": 100}),
               Reply(tool_calls=[ToolCall("write_file", {"path": "a.txt", "content": "x"})]), Reply(text="done"))

    async def main():
        async with served(project, server, tmp_path / "s.db", "provider=priced", "model=m",
                          static_dir=static) as srv:
            info = (await srv.client.get("/api/server")).json()
            sid = (await create(srv.client, project))["id"]
            seen: list[dict] = []
            async with srv.events(sid) as stream:
                await submit(srv.client, sid, "t1", {"type": "user_turn", "text": "hi"})
                await read_until(stream, "turn_ended", seen)
                listed = (await srv.client.get("/api/sessions")).json()["sessions"]
                await submit(srv.client, sid, "t2", {"type": "user_turn", "text": "write"})
                await read_until(stream, "approval_request", seen)
                waiting = (await srv.client.get(f"/api/sessions/{sid}")).json()
            page = await srv.client.get("/")
            return info, listed, waiting, seen, page

    info, listed, waiting, seen, page = run(main())
    assert info == {"roots": [str(project.resolve())], "mode": "safe", "model": "m", "provider": "priced",
                    "user": {"name": "owner", "role": "admin", "via": "token"}, "fleet": False}
    assert listed[0]["cost"] == pytest.approx(0.003)
    started = [e for e in seen if e["type"] == "turn_started"][-1]
    assert waiting["state"]["running_turn"] == started["turn_id"]
    assert waiting["state"]["turn_started_seq"] == started["seq"]
    assert waiting["cost"] > 0.003  # the second call (its usage estimated by the mock) is counted too
    policy = page.headers["content-security-policy"]
    assert "script-src 'self';" in policy and "default-src 'none'" in policy and "frame-ancestors 'none'" in policy
    assert "unsafe-inline" not in policy and page.headers["x-content-type-options"] == "nosniff"


def test_a_fork_before_a_user_message_keeps_only_what_came_before_it(project, server, tmp_path):
    """Editing an earlier message sends it again in a fork cut just before it (`before_seq`: its item seq)."""
    server.add(Reply(text="one"), Reply(text="two"))

    async def main():
        async with in_process(project, server, tmp_path / "s.db") as (client, srv):
            sid = (await create(client, project))["id"]
            for n, text in enumerate(("first", "second")):
                await submit(client, sid, f"t{n}", {"type": "user_turn", "text": text})
                async for envelope in srv.hub.live(sid).subscribe():
                    if envelope.event.TYPE == "turn_ended" and envelope.submission_id == f"t{n}":
                        break
            items = (await client.get(f"/api/sessions/{sid}/items")).json()["items"]
            second = next(i["seq"] for i in items if i["item"].get("text") == "second")
            reply = next(i["seq"] for i in items if i["item"]["type"] == "assistant_message")
            fork = await client.post("/api/sessions", json={"fork": sid, "before_seq": second})
            forked = (await client.get(f"/api/sessions/{fork.json()['id']}/items")).json()["items"]
            not_user = await client.post("/api/sessions", json={"fork": sid, "before_seq": reply})
            on_resume = await client.post("/api/sessions", json={"resume": sid, "before_seq": second})
            alone = await client.post("/api/sessions", json={"cwd": str(project), "before_seq": second})
            return fork, forked, not_user, on_resume, alone

    fork, forked, not_user, on_resume, alone = run(main())
    assert fork.status_code == 201, fork.text
    texts = [i["item"].get("text") for i in forked if i["item"]["type"] in ("user_message", "assistant_message")]
    assert texts == ["first", "one"]
    assert not_user.status_code == 400 and "not a user message" in not_user.json()["error"]
    assert on_resume.status_code == 400 and alone.status_code == 400
