"""Schedules: cron and intervals read as cron reads them, each due time fired once however many processes
look (a fake clock, several stores racing on one database — SQLite and PostgreSQL), missed runs handled by
the stated policy, and `auger schedule` and `/api/fleet/schedules` over a SQLite store, whose runs
`auger serve` starts as its own sessions."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime

import pytest

from auger.fleet.cron import CadenceError, parse
from auger.fleet.policy import TaskSpec
from auger.fleet.schedules import Schedule, Scheduler, Started, new_schedule, plan_run, resume
from auger.store.base import ScheduleRun
from auger.store.factory import open_store
from tests.support.harness import auger_cli
from tests.support.mock_openai import Reply
from tests.support.serve import in_process, served


def at(*parts: int) -> float:
    return datetime(*parts, tzinfo=UTC).timestamp()


def utc(stamp: float) -> str:
    return datetime.fromtimestamp(stamp, UTC).strftime("%Y-%m-%d %H:%M")


# -- the cadence ---------------------------------------------------------------------------------
def test_cron_fields_ranges_steps_names_and_the_day_rule():
    monday_noon = at(2025, 3, 10, 12, 0)
    assert utc(parse("0 3 * * 1-5").next_after(at(2025, 3, 7, 4, 0))) == "2025-03-10 03:00"  # Friday -> Monday
    assert utc(parse("*/15 * * * *").next_after(monday_noon)) == "2025-03-10 12:15"
    assert utc(parse("5/20 9 * * *").next_after(monday_noon)) == "2025-03-11 09:05"
    assert utc(parse("0 0 1 jan *").next_after(monday_noon)) == "2026-01-01 00:00"
    # both day fields restricted: either matches (the 1st, or any Sunday); one written from '*': both must
    assert utc(parse("0 9 1 * sun").next_after(monday_noon)) == "2025-03-16 09:00"
    assert utc(parse("0 9 */2 * sun").next_after(monday_noon)) == "2025-03-23 09:00"
    assert utc(parse("0 9 * * 7").next_after(monday_noon)) == "2025-03-16 09:00"  # 7 is Sunday too
    assert utc(parse("@daily").next_after(monday_noon)) == "2025-03-11 00:00"
    assert utc(parse("0 0 29 2 *").next_after(monday_noon)) == "2028-02-29 00:00"
    for bad in ("* * * *", "61 * * * *", "0 0 30 2 *", "0 5-3 * * *", "@every 0s", "@every 10x", "0 0 * * mon-"):
        with pytest.raises(CadenceError):
            parse(bad)
    with pytest.raises(CadenceError):
        parse("@daily", tz="Mars/Olympus")


def test_cron_in_a_time_zone_skips_the_time_a_clock_change_skips():
    paris = parse("30 2 * * *", tz="Europe/Paris")  # 2025-03-30: 02:00 -> 03:00 in Paris
    first = paris.next_after(at(2025, 3, 29, 0, 0))
    second = paris.next_after(first)
    assert utc(first) == "2025-03-29 01:30" and utc(second) == "2025-03-31 00:30"


def test_an_interval_counts_from_its_anchor():
    every = parse("@every 1h30m", anchor=at(2025, 3, 10, 0, 0))
    assert every.text == "@every 5400s"
    assert utc(every.next_after(at(2025, 3, 10, 2, 0))) == "2025-03-10 03:00"
    assert utc(every.next_after(at(2025, 3, 10, 3, 0))) == "2025-03-10 04:30"


# -- the missed-run policy ------------------------------------------------------------------------
def schedule_at(cron: str, created: float, missed: str = "once"):
    return new_schedule(cron, TaskSpec(prompt="p", repo="https://example.com/r.git"), missed=missed, now=created)


def test_a_run_within_its_grace_is_on_time_and_one_past_it_follows_the_policy():
    created = at(2025, 3, 10, 11, 59, 30)
    record = schedule_at("* * * * *", created)
    assert utc(record.next_run) == "2025-03-10 12:00"
    on_time = plan_run(record, record.next_run + 20)
    assert on_time.due == record.next_run and not on_time.late and utc(on_time.next_run) == "2025-03-10 12:01"
    after_downtime = plan_run(record, at(2025, 3, 10, 12, 9, 10))  # nine minutes missed, and this one
    assert after_downtime.due == record.next_run and after_downtime.late and after_downtime.missed == 9
    assert utc(after_downtime.next_run) == "2025-03-10 12:10"
    skipping = plan_run(schedule_at("* * * * *", created, "skip"), at(2025, 3, 10, 12, 9, 10))
    assert skipping.due is None and skipping.missed == 9 and utc(skipping.next_run) == "2025-03-10 12:10"
    hourly = schedule_at("0 * * * *", created)  # the grace is a minute at most, whatever the period
    assert plan_run(hourly, hourly.next_run + 59).due is not None and not plan_run(hourly, hourly.next_run + 59).late
    assert plan_run(hourly, hourly.next_run + 61).late


# -- exactly once, with a fake clock ----------------------------------------------------------------
class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    async def __call__(self) -> float:
        return self.now


def racing(target: str, count: int, clock: Clock, started: list[tuple[str, float, str]]):
    """`count` schedulers, each on a store of its own (as processes are), starting runs into `started`."""
    stores = [open_store(target) for _ in range(count)]

    def starter(name: str):
        async def start(schedule: Schedule, run: ScheduleRun) -> Started:
            started.append((name, run.due, schedule.id))
            await asyncio.sleep(0.01)
            return Started(task_id=f"t-{name}-{int(run.due)}")
        return start

    return stores, [Scheduler(store, starter(f"p{n}"), clock=clock) for n, store in enumerate(stores)]


def test_each_due_time_fires_once_among_many_processes_and_survives_their_restart(db_target):
    created = at(2025, 3, 10, 11, 59, 30)
    clock = Clock(created)
    started: list[tuple[str, float, str]] = []

    async def main():
        setup = open_store(db_target)
        every_minute = schedule_at("* * * * *", created)
        skipping = schedule_at("*/2 * * * *", created, "skip")
        for record in (every_minute, skipping):
            await setup.add_schedule(record)
        await setup.aclose()
        stores, schedulers = racing(db_target, 5, clock, started)
        for minute in range(5):  # 12:00 … 12:04, each looked at by every process, some of them twice
            clock.now = at(2025, 3, 10, 12, minute, 2)
            await asyncio.gather(*(s.fire_due() for s in schedulers), *(s.fire_due() for s in schedulers[:2]))
        for store in stores:  # every process goes down …
            await store.aclose()
        clock.now = at(2025, 3, 10, 12, 20, 5)  # … for a quarter of an hour, then all come back
        stores, schedulers = racing(db_target, 5, clock, started)
        for minute in (20, 21):
            clock.now = at(2025, 3, 10, 12, minute, 5)
            await asyncio.gather(*(s.fire_due() for s in schedulers))
        runs = {r.id: await stores[0].list_runs(r.id, 100) for r in (every_minute, skipping)}
        kept = {r.id: await stores[0].get_schedule(r.id) for r in (every_minute, skipping)}
        for store in stores:
            await store.aclose()
        return every_minute.id, skipping.id, runs, kept

    every_id, skip_id, runs, kept = asyncio.run(main())
    minutes = sorted(utc(due)[-5:] for _, due, sid in started if sid == every_id)
    assert minutes == ["12:00", "12:01", "12:02", "12:03", "12:04", "12:05", "12:21"]  # each once; 12:05: late
    late = [r for r in runs[every_id] if r.late]
    assert len(late) == 1 and utc(late[0].due) == "2025-03-10 12:05" and late[0].missed == 15  # 12:06 … 12:20
    assert all(r.state == "started" and r.task_id for r in runs[every_id])
    # policy skip: the even minutes before the downtime fired; the downtime's did not, nor a late run
    assert sorted(utc(due)[-5:] for _, due, sid in started if sid == skip_id) == ["12:00", "12:02", "12:04"]
    assert [r.state for r in runs[skip_id] if r.state == "skipped"] == ["skipped"]
    assert kept[skip_id].skipped == 8 and kept[every_id].runs == 7  # 12:06 … 12:20's even minutes
    assert utc(kept[every_id].next_run) == "2025-03-10 12:22"


def test_a_run_claimed_by_a_process_that_died_is_started_once_by_another(db_target):
    created = at(2025, 3, 10, 11, 59, 30)
    clock = Clock(at(2025, 3, 10, 12, 0, 1))
    started: list[tuple[str, float, str]] = []

    async def main():
        store = open_store(db_target)
        record = schedule_at("* * * * *", created)
        await store.add_schedule(record)
        from auger.fleet.schedules import plan_run

        claimed = await store.claim_runs(clock.now, plan_run)  # claimed … and the process dies here
        await store.aclose()
        stores, schedulers = racing(db_target, 3, clock, started)
        clock.now += 10  # too soon: whoever claimed it may still be starting it
        await asyncio.gather(*(s.fire_due() for s in schedulers))
        early = list(started)
        clock.now += 40
        await asyncio.gather(*(s.fire_due() for s in schedulers))
        runs = await stores[0].list_runs(record.id)
        for s in stores:
            await s.aclose()
        return claimed, early, runs

    claimed, early, runs = asyncio.run(main())
    assert len(claimed) == 1 and early == []
    assert [(utc(due)) for _, due, _ in started] == ["2025-03-10 12:00"]  # once, by one of the three
    assert runs[0].state == "started" and runs[0].task_id


def test_resuming_a_paused_schedule_starts_from_its_next_due_time(db_target):
    async def main():
        store = open_store(db_target)
        record = schedule_at("0 * * * *", at(2025, 3, 10, 9, 30))
        await store.add_schedule(record)
        await store.update_schedule(record.id, paused=True, next_run=record.next_run)
        assert await store.next_due() is None
        resumed = await resume(store, record.id[:8], now=at(2025, 3, 10, 14, 10))
        await store.aclose()
        return resumed

    resumed = asyncio.run(main())
    assert not resumed.paused and utc(resumed.next_run) == "2025-03-10 15:00"


# -- the command and the routes on SQLite -----------------------------------------------------------
def test_auger_schedule_adds_lists_pauses_resumes_and_removes(project, auger_home, tmp_path):
    db = str(tmp_path / "s.db")
    added = auger_cli("schedule", "add", "--cron", "0 3 * * 1-5", "--repo", str(project), "--db", db, "--json",
                      "nightly check", home=auger_home)
    assert added.returncode == 0, added.stderr
    shown = json.loads(added.stdout)
    sid = shown["id"]
    assert (shown["cadence"], shown["missed"], shown["spec"]["prompt"]) == ("0 3 * * 1-5", "once", "nightly check")
    listed = auger_cli("schedule", "list", "--db", db, home=auger_home)
    assert sid[:12] in listed.stdout and "0 3 * * 1-5" in listed.stdout
    assert "paused" in auger_cli("schedule", "pause", sid[:8], "--db", db, home=auger_home).stdout
    assert "resumed" in auger_cli("schedule", "resume", sid[:8], "--db", db, home=auger_home).stdout
    refused = [auger_cli("schedule", "add", "--cron", "0 3 * *", "--repo", str(project), "--db", db, "x",
                         home=auger_home),
               auger_cli("schedule", "add", "--every", "1h", "--repo", str(project), "--db", db, "-c", "notify=x",
                         "x", home=auger_home),
               auger_cli("schedule", "add", "--every", "1h", "--repo", "https://example.com/r.git", "--db", db, "x",
                         home=auger_home),
               auger_cli("schedule", "add", "--every", "1h", "--repo", str(project), "--deliver", "pr", "--db", db,
                         "x", home=auger_home)]
    assert [r.returncode for r in refused] == [2, 2, 2, 2] and "five fields" in refused[0].stderr
    assert "never configuration" in refused[1].stderr and "no fleet" in refused[2].stderr
    assert "--deliver" in refused[3].stderr and "[forge]" in refused[3].stderr  # a session has no push to make
    assert [s["id"] for s in json.loads(auger_cli("schedule", "list", "--json", "--db", db,
                                                  home=auger_home).stdout)] == [sid]
    assert auger_cli("schedule", "remove", sid, "--db", db, home=auger_home).returncode == 0
    assert json.loads(auger_cli("schedule", "list", "--json", "--db", db, home=auger_home).stdout) == []


def test_a_sqlite_servers_schedule_runs_as_its_own_session_in_its_roots(project, server, tmp_path):
    """`auger serve` on SQLite fires its store's schedules itself: the run is a session in the schedule's
    directory, in the server's mode; the routes add, pause, resume and remove; a directory outside the
    roots is refused."""
    server.add(Reply(text="the nightly answer"))
    outside = tmp_path / "outside"
    outside.mkdir()

    async def main():
        async with served(project, server, tmp_path / "s.db") as srv:
            c = srv.client
            refused = await c.post("/api/fleet/schedules", json={"every": "2s", "prompt": "p", "repo": str(outside)})
            bad = await c.post("/api/fleet/schedules", json={"cron": "nope", "prompt": "p", "repo": str(project)})
            config = await c.post("/api/fleet/schedules", json={"every": "2s", "prompt": "p", "repo": str(project),
                                                                  "base_url": "http://evil.example"})
            pushing = await c.post("/api/fleet/schedules", json={"every": "2s", "prompt": "p", "repo": str(project),
                                                                   "deliver": "pr"})
            added = await c.post("/api/fleet/schedules",
                                 json={"every": "1s", "prompt": "nightly", "repo": str(project)})
            sid = added.json()["id"]
            for _ in range(100):
                shown = (await c.get(f"/api/fleet/schedules/{sid}")).json()
                if any(r["session_id"] for r in shown["recent_runs"]):
                    break
                await asyncio.sleep(0.1)
            paused = await c.post(f"/api/fleet/schedules/{sid}/pause")
            listed = (await c.get("/api/fleet/schedules")).json()
            session_id = next(r["session_id"] for r in shown["recent_runs"] if r["session_id"])
            session = (await c.get(f"/api/sessions/{session_id}")).json()
            resumed = await c.post(f"/api/fleet/schedules/{sid}/resume")
            removed = await c.delete(f"/api/fleet/schedules/{sid}")
            gone = await c.get(f"/api/fleet/schedules/{sid}")
            return refused, bad, config, pushing, added, paused, listed, session, resumed, removed, gone

    refused, bad, config, pushing, added, paused, listed, session, resumed, removed, gone = asyncio.run(main())
    assert refused.status_code == 403 and bad.status_code == 400 and config.status_code == 400
    assert pushing.status_code == 400 and "[forge]" in pushing.json()["error"]
    assert len(listed["schedules"]) == 1  # only the one that may run here
    assert "never configuration" in config.json()["error"]
    assert added.status_code == 201 and listed["fired_by"] == "server"
    assert paused.json()["paused"] is True and resumed.json()["paused"] is False
    assert session["cwd"] == str(project) and session["state"]["mode"] == "safe"
    assert removed.json()["removed"] is True and gone.status_code == 404
    assert server.chat_requests and "nightly" in json.dumps(server.chat_requests[0].body["messages"])


def test_a_viewer_reads_schedules_and_may_not_add_one(project, server, tmp_path):
    async def main():
        async with in_process(project, server, tmp_path / "s.db") as (client, srv):
            from auger.frontends.users import new_token, token_hash

            token = new_token()
            await srv.hub.store.add_user("vera", "viewer", token_hash(token), "test")
            headers = {"authorization": f"Bearer {token}"}
            listed = await client.get("/api/fleet/schedules", headers=headers)
            added = await client.post("/api/fleet/schedules", headers=headers,
                                      json={"every": "1h", "prompt": "p", "repo": str(project)})
            return listed, added

    listed, added = asyncio.run(main())
    assert listed.status_code == 200 and added.status_code == 403
