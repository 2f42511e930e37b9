"""The Store contract, run against every backend (`db_target`: a SQLite file and a real PostgreSQL
database): what one backend keeps, the other keeps the same way."""

from __future__ import annotations

import asyncio
import time

import pytest

from auger.protocol.envelope import Envelope
from auger.protocol.events import AgentMessage, TurnStarted, Usage
from auger.protocol.items import AssistantMessage, ToolCall, ToolOutput, UserMessage
from auger.store.base import LinkRecord, SessionRecord, StoreError, page_cursor, parse_page_cursor
from auger.store.factory import open_store
from auger.store.migrations import latest, migrations


def run(target: str, body):
    async def main():
        store = open_store(target)
        try:
            return await body(store)
        finally:
            await store.aclose()

    return asyncio.run(main())


def record(session_id: str, cwd: str = "/p", updated: float | None = None, title: str = "") -> SessionRecord:
    now = updated if updated is not None else time.time()
    return SessionRecord(session_id, now, now, cwd, "openai", "m", "safe", title=title)


def envelopes(session_id: str, first: int, count: int) -> list[Envelope]:
    return [Envelope(session_id, seq, AgentMessage("t", f"m{seq}")) for seq in range(first, first + count)]


def test_sessions_are_found_by_id_or_prefix_and_listed_newest_first(db_target):
    async def body(store):
        for n, sid in enumerate(["aaaa-1", "aaaa-2", "bbbb-1"]):
            await store.create_session(record(sid, cwd="/p" if sid != "bbbb-1" else "/q", updated=100.0 + n))
            await store.append(sid, "t", UserMessage("hi"))
            await store.append(sid, "t", AssistantMessage("hello"))
        await store.create_session(record("cccc-1", updated=200.0))  # no reply: no conversation to list
        assert (await store.get_session("bbbb")).id == "bbbb-1"
        assert await store.get_session("aaaa") is None  # ambiguous
        assert [r.id for r in await store.find_sessions("aaaa")] == ["aaaa-2", "aaaa-1"]
        listed = await store.list_sessions()
        assert [r.id for r in listed] == ["bbbb-1", "aaaa-2", "aaaa-1"] and listed[0].items == 2
        assert [r.id for r in await store.list_sessions(cwd="/p")] == ["aaaa-2", "aaaa-1"]
        page = await store.list_sessions(1)
        rest = await store.list_sessions(10, before=parse_page_cursor(page_cursor(page[0])))
        assert [r.id for r in rest] == ["aaaa-2", "aaaa-1"]
        await store.update_session("aaaa-1", title="renamed \udc80 title", mode="auto")
        again = await store.get_session("aaaa-1")
        assert (again.title, again.mode) == ("renamed \udc80 title", "auto") and again.updated > 102.0
        with pytest.raises(ValueError):
            await store.update_session("aaaa-1", id="x")

    run(db_target, body)


def test_items_are_numbered_from_one_and_keep_their_full_outputs(db_target):
    async def body(store):
        await store.create_session(record("s"))
        call = ToolCall("c1", "shell", '{"command": "ls"}')
        assert await store.append("s", "t1", UserMessage("find \udcff the\x00 bug")) == 1
        assert await store.append("s", "t1", call) == 2
        assert await store.append("s", "t1", ToolOutput("c1", "short"), full_output="the whole\x00 output",
                                  tool_name="shell", arguments='{"command": "ls"}') == 3
        items = await store.load_items("s")
        assert [(i.seq, i.turn_id, type(i.item).__name__) for i in items] == [
            (1, "t1", "UserMessage"), (2, "t1", "ToolCall"), (3, "t1", "ToolOutput")]
        assert items[0].item.text == "find \udcff the\x00 bug"
        assert await store.get_output("s", "c1") == ("shell", '{"command": "ls"}', "the whole\x00 output")
        assert await store.list_outputs("s") == [("c1", "shell", '{"command": "ls"}', "the whole\x00 output")]
        assert [seq for seq, _ in await store.search_messages("s", "\udcff the")] == [1]
        assert await store.search_messages("s", "100%_") == []

    run(db_target, body)


def test_sequence_numbers_come_from_the_database_not_a_per_process_cache(db_target):
    async def main():
        one, two = open_store(db_target), open_store(db_target)
        try:
            await one.create_session(record("s"))
            seqs = []
            for store in (one, two, one, two):  # two writers alternating on one session
                seqs.append(await store.append("s", "t", UserMessage("x")))
            many = await asyncio.gather(*(store.append("s", "t", UserMessage("y")) for store in (one, two) * 5))
            pending = await asyncio.gather(*(store.add_pending("s", f"f{n}", "absent", b"", None, "main", f"c{n}", "t")
                                             for n, store in enumerate((one, two) * 5)))
            return seqs, sorted(many), [i.seq for i in await one.load_items("s")], sorted(pending)
        finally:
            await one.aclose()
            await two.aclose()

    seqs, many, stored, pending = asyncio.run(main())
    assert seqs == [1, 2, 3, 4]
    assert many == list(range(5, 15))
    assert pending == list(range(1, 11))  # racing writers of pending changes: no collision, no gap
    assert stored == list(range(1, 15))


def test_events_stay_contiguous_and_a_batch_that_does_not_follow_is_refused(db_target):
    async def body(store):
        await store.create_session(record("s"))
        await store.append_events("s", envelopes("s", 1, 3))
        await store.append_events("s", [Envelope("s", 4, TurnStarted("t2"))])
        with pytest.raises(StoreError, match="do not follow"):
            await store.append_events("s", envelopes("s", 6, 1))  # a gap
        with pytest.raises(StoreError):
            await store.append_events("s", envelopes("s", 3, 1))  # a number already stored
        assert await store.last_event_seq("s") == 4
        assert [e.seq for e in await store.load_events("s", 1, 3)] == [2, 3]
        assert (await store.last_event("s", "turn_started")).seq == 4
        assert await store.last_event("s", "turn_ended") is None

    run(db_target, body)


def test_concurrent_event_writers_on_other_connections_never_leave_a_gap(db_target):
    """Two stores (two processes' worth of connections) race to write the next batches: whichever loses
    is refused, and the stored numbers stay 1..N without a hole or a duplicate."""
    async def main():
        stores = [open_store(db_target) for _ in range(3)]
        try:
            await stores[0].create_session(record("s"))
            for first in range(1, 31, 3):
                results = await asyncio.gather(*(s.append_events("s", envelopes("s", first, 3)) for s in stores),
                                               return_exceptions=True)
                assert sum(r is None for r in results) == 1, results
            return [e.seq for e in await stores[0].load_events("s")]
        finally:
            for s in stores:
                await s.aclose()

    assert asyncio.run(main()) == list(range(1, 31))


def test_writes_queued_together_run_in_order_and_each_fails_alone(db_target):
    """Many sessions writing at once (the SQLite store runs the writes queued meanwhile in one pass): every
    write is stored in the order it was queued, a refused one fails only its own caller, and a closed
    store refuses a write at once."""
    async def body(store):
        for n in range(20):
            await store.create_session(record(f"s{n}"))
        writes = []
        for first in (1, 4, 7):
            for n in range(20):
                writes.append(store.append_events(f"s{n}", envelopes(f"s{n}", first, 3)))
            writes.append(store.append_events("s0", envelopes("s0", 99, 1)))  # does not follow: refused
        items = [store.append(f"s{n % 20}", "t", UserMessage(f"u{n}")) for n in range(40)]
        outcomes = await asyncio.gather(*writes, return_exceptions=True)
        seqs = await asyncio.gather(*items)
        refused = [o for o in outcomes if o is not None]
        assert len(refused) == 3 and all(isinstance(o, StoreError) for o in refused), refused
        assert all(outcomes[i] is None for i in range(len(outcomes)) if i % 21 != 20)
        assert sorted(seqs) == sorted([1, 2] * 20)
        return [[e.seq for e in await store.load_events(f"s{n}")] for n in range(20)]

    assert run(db_target, body) == [list(range(1, 10))] * 20


def test_a_closed_sqlite_store_refuses_a_write_at_once(tmp_path):
    async def main():
        store = open_store(str(tmp_path / "s.db"))
        await store.create_session(record("s"))
        await store.aclose()
        with pytest.raises(RuntimeError):
            store.append_events("s", envelopes("s", 1, 1))

    asyncio.run(main())


def test_a_submission_id_is_used_once(db_target):
    async def body(store):
        await store.create_session(record("s"))
        assert await store.submission("s", "sub-\udc80") is None
        await store.record_submission("s", "sub-\udc80", '{"type": "interrupt"}')
        assert await store.submission("s", "sub-\udc80") == '{"type": "interrupt"}'
        with pytest.raises(StoreError):
            await store.record_submission("s", "sub-\udc80", '{"type": "interrupt"}')

    run(db_target, body)


def test_ops_left_for_a_session_are_taken_once_in_order(db_target):
    async def main():
        server, runner = open_store(db_target), open_store(db_target)
        try:
            await server.post_op("s", '{"n": 1}')
            await server.post_op("s", '{"n": 2}')
            await server.post_op("other", '{"n": 3}')
            first = await runner.take_ops("s")
            return first, await runner.take_ops("s"), await runner.take_ops("other")
        finally:
            await server.aclose()
            await runner.aclose()

    assert asyncio.run(main()) == (['{"n": 1}', '{"n": 2}'], [], ['{"n": 3}'])


def test_a_session_is_leased_to_one_store_at_a_time(db_target):
    async def main():
        one, two = open_store(db_target), open_store(db_target)
        try:
            assert await one.claim("s") is None
            assert await one.claim("s") is None  # already ours
            holder = await two.claim("s") if db_target.startswith("postgresql") else None
            if holder is not None:  # SQLite's leases are per process: both stores here are one holder
                assert "pid" in holder
            await two.release("s")  # not its lease (PostgreSQL) or the same process's (SQLite)
            await one.release("s")
            return await two.claim("s")
        finally:
            await one.aclose()
            await two.aclose()

    assert asyncio.run(main()) is None


def test_pending_changes_links_and_backend_sessions(db_target):
    async def body(store):
        await store.create_session(record("s"))
        one = await store.add_pending("s", "a\udc80.txt", "absent", b"\x00data", 0o644, "main", "c1", "write_file")
        two = await store.add_pending("s", "b.txt", "abc", None, None, "main", "c2", "apply_patch")
        assert (one, two) == (1, 2)
        pending = await store.load_pending("s")
        assert [(p.seq, p.path, p.content, p.mode) for p in pending] == [(1, "a\udc80.txt", b"\x00data", 0o644),
                                                                        (2, "b.txt", None, None)]
        await store.settle_pending("s", [1], "applied")
        assert [p.seq for p in await store.load_pending("s")] == [2]
        assert await store.add_pending("s", "c", "absent", b"", None, "main", "c3", "t") == 3  # never reused
        await store.link_child(LinkRecord("child", "s", "call-1", "explorer", "running"))
        await store.set_link_status("child", "completed")
        assert await store.list_links("s") == [LinkRecord("child", "s", "call-1", "explorer", "completed")]
        assert await store.get_backend_session("s", "codex") is None
        await store.set_backend_session("s", "codex", "a1")
        await store.set_backend_session("s", "codex", "a2")
        assert await store.get_backend_session("s", "codex") == "a2"

    run(db_target, body)


def test_usage_and_a_forks_copied_history(db_target):
    async def body(store):
        await store.create_session(record("src"))
        await store.append("src", "t1", UserMessage("one"))
        await store.record_usage("src", "t1", "m1", Usage(10, 2, 5, 1))
        await store.record_usage("src", "t1", "small", Usage(1, 0, 1, 0), "title")
        await store.append("src", "t1", ToolOutput("c1", "out"), full_output="full", tool_name="shell")
        await asyncio.sleep(0.01)
        cut = await store.append("src", "t2", UserMessage("two"))
        await store.record_usage("src", "t2", "m2", Usage(100, 0, 50, 0))
        await store.record_usage("src", "t2", "m2", Usage(7, 0, 3, 0), "goal_check")
        await store.record_usage("src", "t2", "m2", Usage(1, 0, 1, 0), "goal_check")
        assert await store.usage_total("src") == Usage(119, 2, 60, 1)
        assert await store.usage_breakdown("src") == [("m1", "turn", Usage(10, 2, 5, 1)),
                                                      ("m2", "goal_check", Usage(8, 0, 4, 0)),
                                                      ("m2", "turn", Usage(100, 0, 50, 0)),
                                                      ("small", "title", Usage(1, 0, 1, 0))]
        await store.create_session(record("fork"))
        assert await store.copy_history("src", "fork", cut) == 2
        assert await store.get_output("fork", "c1") == ("shell", "", "full")
        assert await store.usage_total("fork") == Usage(0, 0, 0, 0)
        assert await store.usage_total("fork", inherited=True) == Usage(11, 2, 6, 1)
        assert await store.usage_breakdown("fork", inherited=True) == [("m1", "turn", Usage(10, 2, 5, 1)),
                                                                       ("small", "title", Usage(1, 0, 1, 0))]

    run(db_target, body)


def test_usage_rows_stored_before_purposes_were_kept_read_as_turns_after_the_migration(db_target):
    """A schema-12 database (no `purpose` column) with a usage row, opened by this auger: the row is a turn's,
    and a new row keeps its own purpose."""
    steps = [m for m in migrations("postgres" if db_target.startswith("postgresql") else "sqlite") if m.version <= 12]
    row = "INSERT INTO usage (session_id, turn_id, model, input, cached, output, reasoning, created) " \
          "VALUES ('s', 't1', 'm', 10, 0, 5, 0, 1)"
    if db_target.startswith("postgresql"):
        import psycopg

        with psycopg.connect(db_target, autocommit=True) as conn:
            conn.execute("CREATE TABLE auger_schema (version INTEGER NOT NULL)")
            for step in steps:
                conn.execute(step.sql.encode())
                conn.execute("INSERT INTO auger_schema (version) VALUES (%s)", (step.version,))
            conn.execute(row)
    else:
        import sqlite3

        with sqlite3.connect(db_target) as conn:
            for step in steps:
                for statement in step.statements():
                    conn.execute(statement)
            conn.execute(row)
            conn.execute("PRAGMA user_version = 12")

    async def body(store):
        await store.record_usage("s", "t2", "small", Usage(3, 0, 1, 0), "title")
        return await store.usage_breakdown("s")

    assert run(db_target, body) == [("m", "turn", Usage(10, 0, 5, 0)), ("small", "title", Usage(3, 0, 1, 0))]


def test_a_database_of_a_newer_schema_is_refused_with_a_clear_message(db_target):
    async def body(store):
        await store.create_session(record("s"))

    run(db_target, body)
    if db_target.startswith("postgresql"):
        import psycopg

        with psycopg.connect(db_target, autocommit=True) as conn:
            conn.execute("INSERT INTO auger_schema VALUES (999)")
    else:
        import sqlite3

        with sqlite3.connect(db_target) as conn:
            conn.execute("PRAGMA user_version = 999")
    with pytest.raises(StoreError, match="schema version 999, newer than this auger knows"):
        run(db_target, lambda store: store.get_session("s"))


def test_a_postgres_lease_is_a_heartbeat_taken_over_when_stale_with_a_new_generation(postgres_url):
    """Across machines no pid can be checked: the holder renews its lease, a live one is never taken, a
    stale one (its holder paused or dead past the timeout) is taken over, and the old holder learns it
    lost the lease when it renews."""
    from auger.store.postgres import PostgresStore

    async def main():
        first = PostgresStore(postgres_url, lease_timeout_s=1.0, heartbeat_s=0.2)
        second = PostgresStore(postgres_url, lease_timeout_s=1.0, heartbeat_s=0.2)
        try:
            assert await first.claim("s") is None
            generation = first.generation("s")
            await asyncio.sleep(1.5)  # renewed meanwhile: still held
            assert "pid" in (await second.claim("s") or "")
            first._renewer.cancel()  # paused: no more heartbeats
            await asyncio.sleep(1.3)
            assert await second.claim("s") is None
            assert second.generation("s") == generation + 1
            first._renewer = asyncio.ensure_future(first._renew())
            await asyncio.sleep(0.5)
            return first.generation("s")
        finally:
            await first.aclose()
            await second.aclose()

    assert asyncio.run(main()) is None  # the paused holder found its lease gone


def test_auger_db_migrate_brings_either_database_to_the_latest_schema(db_target, tmp_path, auger_home):
    from auger.store.migrations import latest
    from tests.support.harness import auger_cli

    first = auger_cli("db", "migrate", "--db", db_target, home=auger_home, cwd=tmp_path)
    again = auger_cli("db", "migrate", "--db", db_target, home=auger_home, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert f"schema {latest('sqlite')} (was 0)" in first.stdout
    assert f"schema {latest('sqlite')} (up to date)" in again.stdout


def test_an_older_sqlite_file_is_migrated_in_place_keeping_its_sessions(tmp_path):
    import sqlite3

    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:  # a schema-8 file, as auger wrote it before numbered migrations
        for statement in migrations("sqlite")[0].statements():
            conn.execute(statement)
        conn.execute("INSERT INTO sessions VALUES ('old', 1, 1, '/p', 'openai', 'm', 'safe', 'kept')")
        conn.execute("PRAGMA user_version = 8")
    found = run(str(path), lambda store: store.get_session("old"))
    assert found.title == "kept"
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == latest("sqlite")
        assert {"holder", "generation"} <= {row[1] for row in conn.execute("PRAGMA table_info(leases)")}


def test_users_are_kept_by_token_hash_revoked_at_once_and_never_renamed(db_target):
    from auger.store.base import UserExists

    async def body(store):
        assert await store.users_changed() == 0.0
        alice = await store.add_user("alice", "member", "h-alice", "owner")
        await store.add_user("bob", "approver", "h-bob", "owner")
        with pytest.raises(UserExists):
            await store.add_user("alice", "admin", "h-other", "owner")
        with pytest.raises((UserExists, StoreError)):
            await store.add_user("carol", "viewer", "h-bob", "owner")  # a token hash is one user's
        found = await store.user_by_token("h-alice")
        assert (found.name, found.role, found.created_by, found.revoked) == ("alice", "member", "owner", None)
        before = await store.users_changed()
        assert before >= alice.created
        revoked = await store.revoke_user("alice")
        assert revoked.name == "alice" and revoked.revoked is not None
        assert await store.user_by_token("h-alice") is None
        assert await store.revoke_user("alice") is None  # already
        assert await store.users_changed() >= revoked.revoked
        with pytest.raises(UserExists):
            await store.add_user("alice", "member", "h-new", "owner")  # a revoked name is not given again
        assert (await store.get_user("bob")).role == "approver" and await store.get_user("nobody") is None
        return [(u.name, u.revoked is not None) for u in await store.list_users()]

    assert run(db_target, body) == [("alice", True), ("bob", False)]


def test_shares_are_kept_by_token_hash_with_an_expiry_and_revoked_at_once(db_target):
    import time

    async def body(store):
        assert await store.shares_changed() == 0.0
        now = time.time()
        one = await store.add_share("aa11", "session-1", "h-one", "alice", now + 3600)
        await store.add_share("bb22", "session-2", "h-two", "bob", now - 1)  # already expired
        with pytest.raises(StoreError):
            await store.add_share("cc33", "session-1", "h-one", "alice", now + 60)  # a token hash is one share's
        found = await store.share_by_token("h-one")
        assert (found.id, found.session_id, found.created_by, found.revoked) == ("aa11", "session-1", "alice", None)
        assert found.live(time.time()) and not (await store.share_by_token("h-two")).live(time.time())
        assert await store.share_by_token("nothing") is None
        assert await store.shares_changed() >= one.created
        revoked = await store.revoke_share("aa11")
        assert revoked.revoked is not None and not revoked.live(time.time())
        assert await store.revoke_share("aa11") is None  # already
        assert (await store.get_share("aa11")).revoked == revoked.revoked
        assert await store.shares_changed() >= revoked.revoked
        return [s.id for s in await store.list_shares()], [s.id for s in await store.list_shares("session-1")]

    assert run(db_target, body) == (["bb22", "aa11"], ["aa11"])


def test_the_audit_is_paged_newest_first_and_filtered(db_target):
    async def body(store):
        for n in range(5):
            await store.record_audit("alice" if n % 2 else "bob", "op.user_turn" if n < 3 else "task.submit",
                                     f"s{n}", {"n": n, "text": "\udc80"}, 202)
        newest = await store.load_audit(limit=2)
        older = await store.load_audit(before=newest[-1].id, limit=10)
        ops = await store.load_audit(action="op")
        return newest, older, ops, await store.load_audit(actor="alice"), await store.load_audit(target="s3")

    newest, older, ops, alice, target = run(db_target, body)
    assert [e.target for e in newest] == ["s4", "s3"] and [e.target for e in older] == ["s2", "s1", "s0"]
    assert newest[0].detail == {"n": 4, "text": "\udc80"} and newest[0].status == 202
    assert [e.target for e in ops] == ["s2", "s1", "s0"]
    assert [e.target for e in alice] == ["s3", "s1"] and [e.actor for e in target] == ["alice"]
