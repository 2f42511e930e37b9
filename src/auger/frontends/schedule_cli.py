"""`auger schedule add|list|show|pause|resume|remove`: tasks run on a cadence, kept in the store (`--db`).

On a PostgreSQL store every run is a fleet task, fired once per due time by whichever of the workers and
servers on that database looks first; on SQLite `auger serve` fires them, as sessions in a directory of its
roots (fleet/schedules.py, frontends/server/local_runs.py)."""

from __future__ import annotations

import argparse
import json
import time
from typing import Any, Callable

from auger.frontends.cli_support import CliError, local_user, with_store


def add_commands(sub: Any, store_opts: Callable[[argparse.ArgumentParser], None]) -> None:
    from auger.frontends.fleet_cli import add_task_options

    p = sub.add_parser("schedule", help="tasks run on a cadence: add, list, show, pause, resume, remove")
    commands = p.add_subparsers(dest="schedule_command", required=True)
    add = commands.add_parser("add", help="add a schedule; prints its id")
    add.add_argument("prompt", help="what each run is to do")
    when = add.add_mutually_exclusive_group(required=True)
    when.add_argument("--cron", metavar="EXPR",
                      help="five cron fields ('0 3 * * 1-5': 03:00 on weekdays) or @hourly, @daily, @weekly…")
    when.add_argument("--every", metavar="DURATION", help="a fixed interval instead: 30s, 10m, 2h, 1d, 1h30m")
    add.add_argument("--tz", default="UTC", help="the time zone cron's times are in (an IANA name; default UTC)")
    add.add_argument("--missed", choices=("once", "skip"), default="once",
                     help="due times missed while nothing ran (downtime): one late run now (once, the default), "
                          "or none (skip)")
    add_task_options(add)
    commands.add_parser("list", help="every schedule: its cadence, next run, last run and what it started")
    for name, text in (("show", "one schedule and its latest runs"), ("pause", "stop firing a schedule"),
                       ("resume", "fire a paused schedule again, from its next due time"),
                       ("remove", "delete a schedule (the tasks it started stay)")):
        command = commands.add_parser(name, help=text)
        command.add_argument("schedule_id", help="a schedule id or a unique prefix of one")
    for command in commands.choices.values():
        command.add_argument("--json", action="store_true", help="print JSON")
        store_opts(command)
    p.set_defaults(run=_cmd_schedule)


def _cmd_schedule(args: argparse.Namespace) -> int:
    from auger.fleet.schedules import ScheduleRefused, read

    command = args.schedule_command
    if command == "add":
        record = _add(args)
        print(json.dumps(read(record).to_json(), indent=2) if args.json else record.id)
        return 0
    if command == "list":
        records = with_store(args, lambda store: store.list_schedules())
        schedules = [read(r) for r in records]
        if args.json:
            print(json.dumps([s.to_json() for s in schedules], indent=2))
        elif not schedules:
            print("No schedules. Add one with `auger schedule add --cron EXPR --repo … PROMPT`.")
        for s in [] if args.json else schedules:
            r = s.record
            state = "paused" if r.paused else f"next {_when(r.next_run)}"
            prompt = " ".join((s.spec.prompt if s.spec else r.spec).split())[:40]
            print(f"{r.id[:12]}  {r.cadence:<16} {state:<24} runs {r.runs:<4} skipped {r.skipped:<3} {prompt}")
        return 0

    async def act(store: Any) -> Any:
        from auger.fleet.schedules import pause, resume

        record = await store.get_schedule(args.schedule_id)
        if record is None:
            raise CliError(f"no schedule matches '{args.schedule_id}' (list them with `auger schedule list`)")
        if command == "show":
            return record, await store.list_runs(record.id, 20)
        if command == "pause":
            return await pause(store, record.id), None
        if command == "resume":
            try:
                return await resume(store, record.id), None
            except ScheduleRefused as exc:
                raise CliError(str(exc)) from None
        await store.remove_schedule(record.id)
        return record, None

    record, runs = with_store(args, act)
    if command == "remove":
        print(json.dumps({"id": record.id, "removed": True}) if args.json else f"{record.id} removed")
        return 0
    shown = read(record).to_json()
    if runs is not None:
        shown["runs_recent"] = [run.__dict__ for run in runs]
    if args.json:
        print(json.dumps(shown, indent=2))
    elif command == "show":
        _print_show(shown)
    else:
        print(f"{record.id} " + ("paused" if record.paused else f"resumed: next run {_when(record.next_run)}"))
    return 0


def _add(args: argparse.Namespace) -> Any:
    """Check and store a new schedule. A SQLite store's schedule runs as a session of `auger serve`, in
    the directory the repository names (checked again when it fires)."""
    from auger.fleet.policy import is_remote
    from auger.fleet.schedules import ScheduleRefused, add, schedule_from_fields
    from auger.frontends.fleet_cli import task_fields
    from auger.store.factory import is_postgres_url

    fields = {**task_fields(args), "missed": args.missed, "tz": args.tz, "queue": args.queue,
              "priority": args.priority, "max_attempts": args.max_attempts}
    fields.update({"cron": args.cron} if args.cron else {"every": args.every})
    try:
        record = schedule_from_fields(fields, created_by=local_user())
    except ScheduleRefused as exc:
        raise CliError(str(exc)) from None
    from auger.config import load_config

    if not is_postgres_url(load_config(args.overrides, {"db_path": args.db}).db_path):
        if is_remote(fields["repo"]):
            raise CliError("a SQLite store has no fleet: its schedules run in `auger serve`, in a directory of its "
                           "roots — give --repo a local directory (or use --db postgresql://… and workers)")
        if fields["deliver"] != "none" or fields["kind"] != "change":
            raise CliError("a SQLite store has no fleet: its schedules' runs answer in their sessions; --deliver "
                           "and --review need workers with a [forge] (--db postgresql://…)")

    async def store_it(store: Any) -> Any:
        try:
            return await add(store, record)
        except ScheduleRefused as exc:
            raise CliError(str(exc)) from None

    return with_store(args, store_it)


def _print_show(shown: dict[str, Any]) -> None:
    spec = shown["spec"] or {}
    print(f"schedule  {shown['id']}\ncadence   {shown['cadence']} ({shown['tz']}); missed runs: {shown['missed']}")
    print("state     " + ("paused" if shown["paused"] else f"next run {_when(shown['next_run'])}"))
    print(f"repo      {spec.get('repo')} @ {spec.get('ref')}\nprompt    {spec.get('prompt')}")
    if shown.get("refusal"):
        print(f"refused   {shown['refusal']}")
    print(f"runs      {shown['runs']} (skipped {shown['skipped']})")
    for run in shown.get("runs_recent", []):
        what = run["task_id"] or run["session_id"] or run["error"] or ""
        late = " late" if run["late"] else ""
        print(f"  {_when(run['due'])}  {run['state']:<8}{late}  {what}")


def _when(stamp: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(stamp)) if stamp else "-"
