"""`auger serve`'s HTTP API against real uvicorn on 127.0.0.1 and the mock model: sessions, ops under
client-chosen submission ids, SSE streams by seq that resume exactly, approvals from several clients."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.support.mock_openai import Reply, ToolCall
from tests.support.schema_check import check_envelope
from tests.support.serve import in_process, served

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
    assert resolved_a["by"] == f"api ({winner})" and resolved_a["submission_id"] == ("p1" if winner == "phone" else "l1")
    assert (project / "a.txt").exists() == (winner == "phone")
    assert after["pending_approvals"] == [] and after["running_turn"] is None
    assert len(stored) == 1 and stored[0].event.by == f"api ({winner})"
