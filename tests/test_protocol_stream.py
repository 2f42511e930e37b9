"""The protocol's typed records, their JSON Schema, and the numbered, persisted, fanned-out event stream."""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import json
import os
import sqlite3
import types
import typing
from pathlib import Path

import pytest

from auger.engine.session.stream import EventStream
from auger.protocol import events as ev
from auger.protocol.envelope import ENVELOPE_FIELDS, Envelope
from auger.protocol.events import Event
from auger.protocol.items import Item, UserMessage
from auger.protocol.jsontext import dumps
from auger.protocol.ops import ApprovalDecision, Op, SetMode, Shutdown, UserTurn
from auger.protocol.schema import protocol_schema, schema_text
from auger.protocol.vocab import ApprovalOption, Effect, Mode, PlanStatus, TurnEndReason
from auger.store.base import StoreError
from auger.store.sqlite import SqliteStore
from auger.engine.session.sessions import run_prompt
from tests.support.harness import auger_cli, drive, json_events, open_session
from tests.support.mock_openai import Reply, ToolCall
from tests.support.schema_check import check_database, check_envelope

ROOT = Path(__file__).resolve().parent.parent


# -- records -------------------------------------------------------------------------------
def _value(hint, depth: int = 0):
    """A non-default value for a field of type `hint`, nested records and enums included."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return _value(next(a for a in typing.get_args(hint) if a is not type(None)), depth)
    if origin is list:
        return [_value(typing.get_args(hint)[0], depth + 1)] if typing.get_args(hint) else ["x"]
    if origin is dict or hint is dict:
        return {"k": [1, {"n": None}]}
    if hint is list:
        return [{"step": "a"}]
    if hint is typing.Any:
        return {"path": "a.py", "n": [1, 2.5, True, None]}
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return list(hint)[-1]
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _full(hint, depth + 1)
    return {str: "s\u00e9\ud800", int: 7, float: 2.5, bool: True}[hint]


def _full(cls, depth: int = 0):
    hints = typing.get_type_hints(cls)
    return cls(**{f.name: _value(hints[f.name], depth) for f in dataclasses.fields(cls)})


@pytest.mark.parametrize("family", [Op, Event, Item])
def test_every_field_of_every_record_round_trips_exactly(family):
    """Every field set (defaults too), nested records and enums rebuilt as their types, not dicts."""
    for tag, cls in family.registry().items():
        record = _full(cls)
        back = family.from_json(json.loads(dumps(record.to_json())))
        assert back == record and type(back) is cls, tag
        assert back.to_json() == record.to_json()
    request = Event.from_json(_full(ev.ApprovalRequest).to_json())
    assert isinstance(request.details, ev.ApprovalDetails) and isinstance(request.details.effect, Effect)
    assert all(isinstance(o, ApprovalOption) for o in request.options)
    plan = Event.from_json(_full(ev.PlanUpdated).to_json())
    assert isinstance(plan.plan[0], ev.PlanStep) and plan.plan[0].status is PlanStatus.COMPLETED


def test_vocabulary_enums_are_their_strings_on_the_wire_and_in_comparisons():
    assert Mode.AUTO == "auto" and TurnEndReason("cancelled") is TurnEndReason.CANCELLED
    line = json.dumps(ev.ModeChanged(Mode.SAFE, Mode.AUTO).to_json())
    assert line == '{"type": "mode_changed", "mode": "safe", "previous": "auto"}'
    assert Op.from_json({"type": "set_mode", "mode": "plan"}) == SetMode(Mode.PLAN)
    with pytest.raises(ValueError, match="not a valid Mode"):
        Op.from_json({"type": "set_mode", "mode": "yolo"})
    with pytest.raises(ValueError, match="not a valid ApprovalOption"):
        Op.from_json({"type": "approval_decision", "request_id": "r", "decision": "maybe"})
    assert ApprovalDecision("r", ApprovalOption.DENY).to_json()["decision"] == "deny"


def test_no_event_field_shadows_an_envelope_field():
    for tag, cls in Event.registry().items():
        clash = {f.name for f in dataclasses.fields(cls)} & set(ENVELOPE_FIELDS)
        assert clash <= ({"session_id"} if tag == "session_configured" else set()), (tag, clash)


# -- schema --------------------------------------------------------------------------------
def test_schema_file_is_generated_from_the_code_and_auger_schema_prints_it(auger_home):
    text = schema_text(protocol_schema())
    assert (ROOT / "docs" / "protocol.schema.json").read_text() == text, \
        "docs/protocol.schema.json is stale: regenerate it with `auger schema > docs/protocol.schema.json`"
    printed = auger_cli("schema", home=auger_home)
    assert printed.returncode == 0 and printed.stdout == text
    defs = json.loads(text)["$defs"]
    assert {f"Event.{t}" for t in Event.registry()} <= set(defs) and {f"Op.{t}" for t in Op.registry()} <= set(defs)
    assert defs["Mode"]["enum"] == ["plan", "safe", "auto"]
    assert defs["Event.plan_updated"]["properties"]["plan"] == {"type": "array", "items": {"$ref": "#/$defs/PlanStep"}}


def test_schema_check_rejects_what_the_schema_does_not_allow():
    good = Envelope("s", 1, ev.TurnEnded("t", TurnEndReason.COMPLETE), "sub", None, 1.0).to_json()
    check_envelope(good)
    for bad in ({**good, "reason": "exploded"}, {**good, "seq": "1"}, {**good, "extra": 1},
                {k: v for k, v in good.items() if k != "turn_id"}, {**good, "type": "no_such_event"}):
        with pytest.raises(AssertionError):
            check_envelope(bad)


# -- the stream ----------------------------------------------------------------------------
def _run(coro):
    return asyncio.run(asyncio.wait_for(coro, 60))


async def _collect(iterator) -> list[Envelope]:
    return [envelope async for envelope in iterator]


def test_stream_numbers_persists_and_replays_from_any_seq_through_a_slow_subscriber(tmp_path):
    """A subscriber that reads nothing while 300 events go out (its bound is 8, the ring 16) neither
    blocks emitting nor misses or repeats anything: it catches up from the store, then goes live."""

    async def main():
        store = SqliteStore(tmp_path / "s.db")
        try:
            stream = EventStream("sess", store, recent=16, subscriber_limit=8)
            await stream.open()
            stream.emit(ev.WarningEvent("w"), submission_id="op1")
            slow = stream.subscribe()
            first = await anext(slow)  # registered, then stalls
            fast = asyncio.create_task(_collect(stream.subscribe()))
            await asyncio.sleep(0)
            for i in range(299):
                stream.emit(ev.WarningEvent(f"w{i}"), submission_id="op1")
                if i % 50 == 0:
                    await asyncio.sleep(0)  # let the fast one and the writer run
            stream.emit(ev.ShutdownComplete())
            rest = await _collect(slow)
            fast_seen = await fast
            await stream.saved()
            stored = await store.load_events("sess")
            from_150 = await _collect(stream.subscribe(after_seq=150))
            return first, rest, fast_seen, stored, from_150, await store.load_events("sess", 290, 295)
        finally:
            await store.aclose()

    first, rest, fast_seen, stored, from_150, window = _run(main())
    slow_seen = [first, *rest]
    assert [e.seq for e in slow_seen] == list(range(1, 302))
    assert slow_seen == fast_seen == stored
    assert [e.seq for e in from_150] == list(range(151, 302)) and from_150 == stored[150:]
    assert [e.seq for e in window] == [291, 292, 293, 294, 295]
    assert stored[0].submission_id == "op1" and stored[-1].submission_id is None
    assert check_database(tmp_path / "s.db") == 301


def test_a_new_stream_for_a_stored_session_numbers_on_including_what_it_emitted_before_opening(tmp_path):
    async def main():
        store = SqliteStore(tmp_path / "s.db")
        try:
            earlier = EventStream("sess", store)
            await earlier.open()
            for i in range(3):
                earlier.emit(ev.WarningEvent(f"run one {i}"))
            await earlier.saved()
            later = EventStream("sess", store)
            later.emit(ev.WarningEvent("before open"))  # numbered once the stored last seq is known
            await later.open()
            later.emit(ev.ShutdownComplete())
            return [(e.seq, e.event) async for e in later.subscribe(after_seq=2)]
        finally:
            await store.aclose()

    assert _run(main()) == [(3, ev.WarningEvent("run one 2")), (4, ev.WarningEvent("before open")),
                            (5, ev.ShutdownComplete())]


def test_events_emitted_before_an_item_are_stored_before_it_is(project, server, tmp_path):
    """`record` commits the item only after the events emitted before it: a crash right after an item
    is recorded cannot lose them. A trigger notes, inside the item's own transaction, how many events
    the session had stored at that moment."""
    db = tmp_path / "s.db"

    async def main():
        session, store = await open_session(project, server, db)
        try:
            with sqlite3.connect(db) as conn:
                conn.executescript("""
                    CREATE TABLE probe (seq INTEGER, events INTEGER);
                    CREATE TRIGGER probe_items AFTER INSERT ON items BEGIN
                        INSERT INTO probe SELECT NEW.seq, COUNT(*) FROM events WHERE session_id = NEW.session_id;
                    END;""")
            for i in range(20):
                session.emit(ev.WarningEvent(f"before {i}"))
            await session.record("t", UserMessage("hi"))
            session.submit(Shutdown())
            await session.wait_closed()
        finally:
            await store.aclose()
        with sqlite3.connect(db) as conn:
            return conn.execute("SELECT events FROM probe").fetchall()

    assert _run(main()) == [(21,)]  # session_configured and the 20 warnings were there before the item


def test_two_subscribers_see_the_same_contiguous_stream_with_submission_ids(project, server, tmp_path):
    server.add(Reply(tool_calls=[ToolCall("shell", {"command": "echo hi"})]), Reply(text="done"), Reply(text="again"))

    async def main():
        session, store = await open_session(project, server, tmp_path / "s.db")
        try:
            a = asyncio.create_task(_collect(session.subscribe()))
            b = asyncio.create_task(_collect(session.subscribe(after_seq=0)))
            first = session.submit(UserTurn("one"))
            run = await drive(session, turns=1)
            return first, await a, await b, run, await store.load_events(session.id)
        finally:
            await store.aclose()

    first, a, b, run, stored = _run(main())
    assert a == b == stored
    assert [e.seq for e in a] == list(range(1, len(a) + 1))
    assert [e.event for e in a] == run.events
    assert a[0].event.TYPE == "session_configured" and a[0].submission_id is None
    assert a[0].event.protocol_version == protocol_schema()["x-protocol-version"]
    turn = [e for e in a if e.event.TYPE in ("turn_started", "tool_call_started", "tool_call_ended", "turn_ended")]
    assert turn and {e.submission_id for e in turn} == {first}
    assert all(e.session_id == a[0].event.session_id for e in a)


def test_resumed_session_continues_the_numbering_and_replays_from_seq_n_after_a_restart(project, server, tmp_path,
                                                                                       auger_home):
    """Two real processes, then a third session in-process: the numbering continues across them, and
    both the store and a live subscriber give exactly the envelopes after N."""
    db = tmp_path / "s.db"
    server.add(Reply(text="first"), Reply(tool_calls=[ToolCall("list_dir", {})]), Reply(text="second"),
               Reply(text="third"))
    common = ("--json", "--db", str(db), "--base-url", server.base_url, "-m", "mock-model")
    one = auger_cli("exec", *common, "one", home=auger_home, cwd=project)
    assert one.returncode == 0, one.stderr
    lines_one = json_events(one.stdout)
    session_id = lines_one[0]["session_id"]
    two = auger_cli("resume", session_id, *common, "two", home=auger_home, cwd=project)
    assert two.returncode == 0, two.stderr
    lines_two = json_events(two.stdout)
    seqs = [line["seq"] for line in lines_one + lines_two]
    assert seqs == list(range(1, len(seqs) + 1)) and lines_two[0]["seq"] == lines_one[-1]["seq"] + 1
    assert lines_two[0]["type"] == "session_configured" and lines_two[0]["resumed"] is True
    n = len(lines_one) - 2  # somewhere in the first process's stream

    async def main():
        store = SqliteStore(db)
        try:
            after_n = await store.load_events(session_id, after_seq=n)  # without opening the session
        finally:
            await store.aclose()
        session, store = await open_session(project, server, db, resume=session_id)
        try:
            live = asyncio.create_task(_collect(session.subscribe(after_seq=n)))
            await drive(session, "three")
            return after_n, await live
        finally:
            await store.aclose()

    after_n, live = _run(main())
    printed = (lines_one + lines_two)[n:]
    assert [e.to_json() for e in after_n] == printed
    assert [e.seq for e in live] == list(range(n + 1, len(live) + n + 1))
    assert [e.to_json() for e in live[:len(printed)]] == printed
    third = live[len(printed):]
    assert third[0].event.TYPE == "session_configured" and third[0].seq == seqs[-1] + 1
    assert third[-1].event.TYPE == "shutdown_complete"


def test_a_subscriber_receives_an_envelope_only_once_its_row_is_committed(project, server, tmp_path):
    """Looked at from another connection the moment each envelope arrives, its row is already there."""
    db = tmp_path / "s.db"
    server.add(Reply(text="a chatty reply in many small pieces " * 4, chunk_chars=3,
                     tool_calls=[ToolCall("list_dir", {})]), Reply(text="done"))

    async def main():
        session, store = await open_session(project, server, db)
        reader = sqlite3.connect(db)
        missing, seen = [], 0
        try:
            def check(envelope):
                nonlocal seen
                seen += 1
                row = reader.execute("SELECT data FROM events WHERE session_id = ? AND seq = ?",
                                     (envelope.session_id, envelope.seq)).fetchone()
                if row is None or json.loads(row[0]) != json.loads(dumps(envelope.to_json())):
                    missing.append((envelope.seq, envelope.event.TYPE))

            await run_prompt(session, "go", on_envelope=check)
            return missing, seen
        finally:
            reader.close()
            await store.aclose()

    missing, seen = _run(main())
    assert seen > 40 and missing == []


def test_a_batch_the_store_cannot_take_ends_the_stream_after_what_was_stored(tmp_path):
    """A full store refuses a batch: subscribers read what was committed, then get the StoreError; nothing
    emitted after it is stored (a gap) or shown."""

    async def main():
        store = SqliteStore(tmp_path / "s.db")
        try:
            stream = EventStream("sess", store)
            await stream.open()
            reader = stream.subscribe()
            stream.emit(ev.WarningEvent("small"))
            await stream.saved()
            await store._write(lambda conn: conn.execute(
                f"PRAGMA max_page_count = {conn.execute('PRAGMA page_count').fetchone()[0] + 4}"))
            stream.emit(ev.WarningEvent("x" * 200_000))  # needs more pages than the store may grow by
            await stream.saved()
            stream.emit(ev.WarningEvent("after"))
            stream.emit(ev.ShutdownComplete())
            await stream.saved()
            seen = []
            with pytest.raises(StoreError, match="the disk is full") as failure:
                async for envelope in reader:
                    seen.append(envelope.event)
            late = []
            with pytest.raises(StoreError):
                async for envelope in stream.subscribe(after_seq=0):  # a subscriber that comes later too
                    late.append(envelope.event)
            return seen, late, str(failure.value), await store.load_events("sess")
        finally:
            await store.aclose()

    seen, late, message, stored = _run(main())
    assert seen == late == [ev.WarningEvent("small")] == [e.event for e in stored]
    assert message.startswith(f"cannot write the session store {tmp_path / 's.db'}: ")


def test_input_sent_during_a_turn_carries_its_own_submission_id_from_its_injection_on(project, server, tmp_path):
    """The second prompt is typed while the first's tool runs: `user_input_injected` and what the turn does
    in answer to it carry the second prompt's submission id; what came before, the first's."""
    fifo = project / "signal"
    os.mkfifo(fifo)
    server.add(Reply(text="looking", tool_calls=[ToolCall("shell", {"command": "cat signal"})]),
               Reply(text="the answer to both"))

    async def main():
        session, store = await open_session(project, server, tmp_path / "s.db")
        envelopes, second = [], None
        try:
            first = session.submit(UserTurn("first"))
            async for envelope in session.subscribe():
                envelopes.append(envelope)
                if isinstance(envelope.event, ev.ToolCallStarted):  # the tool waits on the fifo
                    second = session.submit(UserTurn("second"))
                    await asyncio.to_thread(fifo.write_text, "go\n")
                elif isinstance(envelope.event, ev.TurnEnded):
                    session.submit(Shutdown())
            return first, second, envelopes, await store.load_events(session.id)
        finally:
            await store.aclose()

    first, second, envelopes, stored = _run(main())
    assert stored == envelopes
    turn = [e for e in envelopes if e.event.TYPE not in ("session_configured", "shutdown_complete")]
    at = next(i for i, e in enumerate(turn) if isinstance(e.event, ev.UserInputInjected))
    assert turn[at].event.text == "second" and turn[at].submission_id == second != first
    before, after = turn[:at], turn[at:]
    assert {e.event.TYPE for e in before} >= {"turn_started", "message_delta", "tool_call_started", "tool_call_ended"}
    assert {e.submission_id for e in before} == {first}
    assert {e.event.TYPE for e in after} >= {"message_delta", "agent_message", "token_usage", "turn_ended"}
    assert {e.submission_id for e in after} == {second}
    assert [m["content"] for m in server.chat_requests[1].body["messages"] if m["role"] == "user"][-1] == "second"


def test_each_streamed_reply_has_its_own_item_id_from_start_to_end(project, server):
    """Two replies in one turn (text, a call, text again) stream under two ids, each started and ended, and
    each agent_message names the message it completes."""
    from tests.support.harness import run_session
    from tests.support.mock_openai import Fault, Reply, ToolCall

    server.add(Reply(text="first reply", reasoning="thinking", tool_calls=[ToolCall("list_dir", {})]),
               Fault.drop(after_chunks=3, reply=Reply(text="a reply the retry throws away")),
               Reply(text="second reply"))
    run = run_session(project, server, "go")
    deltas = run.of(ev.MessageDelta)
    ids = list(dict.fromkeys(d.item_id for d in deltas))
    assert len(ids) == 3 and all(ids)
    by_id = {i: "".join(d.delta for d in deltas if d.item_id == i) for i in ids}
    assert by_id[ids[0]] == "first reply" and by_id[ids[2]] == "second reply"
    started = [(e.item_id, e.kind) for e in run.of(ev.ItemStarted)]
    ended = {e.item_id: e.discarded for e in run.of(ev.ItemEnded)}
    assert [i for i, kind in started if kind == "message"] == ids
    assert ended[ids[0]] is False and ended[ids[1]] is True and ended[ids[2]] is False
    reasoning = {d.item_id for d in run.of(ev.ReasoningDelta)}
    assert len(reasoning) == 1 and reasoning.isdisjoint(ids) and ended[reasoning.pop()] is False
    assert [(m.text, m.item_id) for m in run.of(ev.AgentMessage)] == [("first reply", ids[0]), ("second reply", ids[2])]
    order = [e for e in run.events if isinstance(e, (ev.ItemStarted, ev.MessageDelta, ev.ItemEnded))
             and getattr(e, "item_id", "") == ids[0]]
    assert isinstance(order[0], ev.ItemStarted) and isinstance(order[-1], ev.ItemEnded)


def test_a_caller_chosen_submission_id_is_on_the_envelopes_its_op_causes(project, server, tmp_path):
    from auger.protocol.ops import UserTurn
    from tests.support.harness import open_session
    from tests.support.mock_openai import Reply

    server.add(Reply(text="hi"))

    async def main():
        session, store = await open_session(project, server, tmp_path / "s.db")
        try:
            assert session.submit(UserTurn("go"), "client-chosen-1") == "client-chosen-1"
            seen = []
            async for envelope in session.subscribe():
                seen.append(envelope)
                if isinstance(envelope.event, ev.TurnEnded):
                    break
            session.submit(Shutdown())
            await session.wait_closed()
        finally:
            await store.aclose()
        return seen

    seen = asyncio.run(main())
    started = next(e for e in seen if isinstance(e.event, ev.TurnStarted))
    assert started.submission_id == "client-chosen-1"
    assert all(e.submission_id == "client-chosen-1" for e in seen if e.seq > started.seq)


def test_a_reply_interrupted_mid_stream_ends_its_item_discarded(project, server):
    from auger.protocol.ops import Interrupt
    from tests.support.harness import follow_session
    from tests.support.mock_openai import Fault

    server.add(Fault.hang(after_chunks=4, seconds=30, reply=Reply(text="a reply that never finishes")))

    async def steps(session, follow):
        session.submit(UserTurn("go"))
        await follow.until(ev.MessageDelta)
        session.submit(Interrupt())
        await follow.until(ev.TurnEnded)

    events = follow_session(project, server, steps)
    delta = next(e for e in events if isinstance(e, ev.MessageDelta))
    ended = [e for e in events if isinstance(e, ev.ItemEnded)]
    assert [(e.item_id, e.discarded) for e in ended] == [(delta.item_id, True)]
    assert not [e for e in events if isinstance(e, ev.AgentMessage)]


def test_an_envelope_is_encoded_once_and_reads_back_as_itself(tmp_path):
    """The store, every SSE client and `exec --json` write one text per envelope, made at its first use: the
    same as encoding it afresh, kept on the envelope (not a field: equality and copies are untouched), and
    read back by the store as the same envelope."""
    envelope = Envelope("s1", 3, ev.WarningEvent("caf\u00e9 \ud800 line\nbreak", "t1"), "sub-1", None, 12.5)
    text = envelope.text()
    assert text == dumps(envelope.to_json()) and "\n" not in text
    assert envelope.text() is text  # kept, not encoded again
    assert Envelope.from_json(json.loads(text)) == envelope
    copy = dataclasses.replace(envelope, seq=4)
    assert copy.text() != text and json.loads(copy.text())["seq"] == 4
    assert copy == dataclasses.replace(envelope, seq=4) and "_text" not in {f.name for f in dataclasses.fields(Envelope)}

    async def round_trip() -> list[Envelope]:
        store = SqliteStore(tmp_path / "s.db")
        try:
            await store.append_events("s1", [Envelope("s1", 1, ev.WarningEvent("first"), None, None, 1.0),
                                             Envelope("s1", 2, ev.WarningEvent("caf\u00e9"), None, None, 2.0)])
            return await store.load_events("s1", 0)
        finally:
            await store.aclose()

    back = asyncio.run(round_trip())
    assert [e.event.message for e in back] == ["first", "caf\u00e9"] and [e.seq for e in back] == [1, 2]
