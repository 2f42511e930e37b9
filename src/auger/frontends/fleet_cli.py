"""The fleet's commands: `auger submit`, `auger worker`, `auger tasks list|show|cancel|retry|stats` and
`auger db migrate`. The queue needs PostgreSQL (`--db postgresql://…` or AUGER_DB); psycopg and the
queue library are imported only by these commands."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Awaitable, Callable, TypeVar

from auger.frontends.cli_support import CliError, guard_store, local_user

T = TypeVar("T")


def add_commands(sub: Any, store_opts: Callable[[argparse.ArgumentParser], None]) -> dict[str, argparse.ArgumentParser]:
    p_submit = sub.add_parser("submit", help="queue a task for the fleet's workers; prints its id")
    p_submit.add_argument("prompt", help="what the task is to do")
    add_task_options(p_submit)
    p_submit.add_argument("--submission-id", metavar="ID",
                          help="a client-chosen id: submitting it again queues nothing new and prints the task")
    p_submit.add_argument("--json", action="store_true", help="print the task's record as JSON")
    store_opts(p_submit)
    p_submit.set_defaults(run=_cmd_submit)

    p_worker = sub.add_parser("worker", help="take tasks from the queue and run them, until SIGTERM")
    p_worker.add_argument("--concurrency", type=int, default=1, help="tasks run at once (default 1)")
    p_worker.add_argument("--queue", default="default", help="the queue to take tasks from (default: default)")
    p_worker.add_argument("--data-dir", help="where checkouts are made (default: the user data directory)")
    p_worker.add_argument("--lease-timeout", type=float, metavar="S",
                          help="a task whose worker has not renewed its lease for this long is taken over "
                               "(default 30; env AUGER_LEASE_TIMEOUT)")
    p_worker.add_argument("--poll", type=float, default=5.0, metavar="S",
                          help="look for tasks this often when no notification came (default 5)")
    p_worker.add_argument("--drain", type=float, default=10.0, metavar="S",
                          help="on SIGTERM, how long running tasks may go on before they are interrupted and "
                               "given back (default 10)")
    p_worker.add_argument("--mode", choices=("plan", "safe", "auto"),
                          help="the most permissive mode a task runs in; a task asking for more is refused "
                               "(default: the mode of this worker's configuration)")
    p_worker.add_argument("--cap-mode", action="store_true",
                          help="run a task that asks for more than --mode at --mode instead of refusing it")
    p_worker.add_argument("--allow-repo", action="append", default=[], metavar="PATTERN",
                          help="a repository tasks may name: a URL or path, '*' within a path segment, '**' "
                               "across them (repeatable; default: remote repositories, no local path)")
    p_worker.add_argument("-m", "--model", help="the model of tasks that name none")
    p_worker.add_argument("-p", "--provider", help="the provider of tasks that name none")
    p_worker.add_argument("--base-url", help="base URL of this worker's OpenAI-compatible API")
    p_worker.add_argument("--allow-provider", action="append", default=[], metavar="NAME",
                          help="another configured provider tasks may name (repeatable; always offered: the "
                               "worker's own and those its config file describes)")
    p_worker.add_argument("--health-port", type=int, metavar="PORT",
                          help="answer GET /health on this port (status, version, whether the database answers, "
                               "running tasks) for systemd or Kubernetes probes (default: no health port)")
    p_worker.add_argument("--health-host", default="127.0.0.1", metavar="HOST",
                          help="the address the health port listens on (default 127.0.0.1)")
    store_opts(p_worker)
    p_worker.set_defaults(run=_cmd_worker)

    p_tasks = sub.add_parser("tasks", help="the fleet's tasks: list, show, cancel, retry, stats")
    tasks_sub = p_tasks.add_subparsers(dest="tasks_command", required=True)
    t_list = tasks_sub.add_parser("list", help="recent tasks, newest first")
    t_list.add_argument("--state", choices=("queued", "running", "waiting", "done", "failed", "cancelled"))
    t_list.add_argument("--label", help="only the tasks carrying this label")
    t_list.add_argument("--limit", type=int, default=50)
    for name, text in (("show", "one task, with its stored result"), ("cancel", "cancel a queued or running task"),
                       ("retry", "queue a failed or cancelled task again")):
        t = tasks_sub.add_parser(name, help=text)
        t.add_argument("task_id", help="a task id or a unique prefix of one")
    answer = tasks_sub.add_parser("answer", help="answer the approval a waiting (parked) task waits for")
    answer.add_argument("task_id", help="a task id or a unique prefix of one")
    answer.add_argument("decision", choices=("approve", "approve_session", "deny", "abort"))
    answer.add_argument("--feedback", metavar="TEXT", help="a note to the agent (why, or what to do instead)")
    tasks_sub.add_parser("stats", help="queue depth, running, waiting, done, failed, retried, tokens and cost")
    for t in tasks_sub.choices.values():
        t.add_argument("--json", action="store_true", help="print JSON")
        store_opts(t)
    p_tasks.set_defaults(run=_cmd_tasks)

    p_db = sub.add_parser("db", help="the session database")
    db_sub = p_db.add_subparsers(dest="db_command", required=True)
    migrate = db_sub.add_parser("migrate", help="bring the database's schema to this auger's version")
    store_opts(migrate)
    p_db.set_defaults(run=_cmd_db)
    return {"submit": p_submit, "worker": p_worker}  # `tasks` and `db` have subcommands: the main parser reads them


def add_task_options(p: argparse.ArgumentParser) -> None:
    """What a task is (`auger submit`, `auger schedule add`): data only — fleet/policy.py."""
    p.add_argument("--repo", help="a local repository path or a git URL (default: the current directory)")
    p.add_argument("--ref", default="HEAD", help="the base: a branch, tag or commit (default HEAD)")
    p.add_argument("-m", "--model", help="model name")
    p.add_argument("-p", "--provider", help="a provider the workers offer, by name (default: the worker's)")
    p.add_argument("--base-url", help=argparse.SUPPRESS)  # refused: where keys go is the worker's setting
    p.add_argument("--mode", choices=("plan", "safe", "auto"),
                   help="trust mode of the task's session (default: the worker's)")
    p.add_argument("--priority", type=int, default=0, help="higher runs first (default 0)")
    p.add_argument("--queue", default="default", help="the queue whose workers take it (default: default)")
    p.add_argument("--max-attempts", type=int, default=3, help="attempts before it fails (default 3)")
    p.add_argument("--token-budget", type=int, help="stop the session after this many tokens")
    p.add_argument("--cost-budget", type=float, help="...or this much money (USD)")
    p.add_argument("--approval-timeout", type=float, default=600.0, metavar="S",
                   help="how long a safe-mode task's approval request holds its worker before the task "
                        "parks (waits, holding no worker) until someone answers it (default 600)")
    p.add_argument("--label", action="append", default=[], metavar="NAME",
                   help="a label for the task, to find it by (repeatable)")
    p.add_argument("--deliver", choices=("none", "branch", "pr", "comment"), default="none",
                   help="what becomes of the result where the worker has a forge: a branch auger/<task>-<title> "
                        "pushed, a pull request opened, or the answer posted as a comment on --issue "
                        "(default none: the result stays in the database)")
    p.add_argument("--base", metavar="BRANCH",
                   help="the branch a pull request targets (default: --ref), or a --review compares against")
    p.add_argument("--issue", type=int, metavar="N", help="the issue or pull request a comment answers in")
    p.add_argument("--title", help="a short title: the pull request's, and the branch's name")
    p.add_argument("--review", action="store_true",
                   help="review --ref against --base instead of changing anything (with --deliver comment: a "
                        "pull request review with line comments on --issue)")


def task_fields(args: argparse.Namespace) -> dict[str, Any]:
    """A task's fields from the options `add_task_options` gave. `-c` settings and `--base-url` would be the
    worker's configuration, so they are refused here, as the worker refuses them again."""
    from auger.fleet.policy import is_remote

    refused = [f"-c {o.partition('=')[0]}" for o in args.overrides] + (["--base-url"] if args.base_url else [])
    if refused:
        raise CliError(f"{', '.join(refused)}: a task carries data, never configuration — its worker's operator "
                       "configures the workers (the database is --db or AUGER_DB)")
    repo = args.repo or os.getcwd()
    if not is_remote(repo):
        repo = os.path.realpath(repo)  # a local path, named as the worker will find it
        if not os.path.isdir(repo):
            raise CliError(f"--repo {args.repo} is not a directory")
    fields: dict[str, Any] = {
        "prompt": args.prompt, "repo": repo, "ref": args.ref, "provider": args.provider, "model": args.model,
        "mode": args.mode, "token_budget": args.token_budget, "cost_budget": args.cost_budget,
        "approval_timeout_s": args.approval_timeout, "labels": list(args.label), "deliver": args.deliver,
        "base": args.base, "issue": args.issue, "title": args.title, "kind": "review" if args.review else "change"}
    return fields


def _db_target(args: argparse.Namespace) -> str | None:
    from auger.config import load_config

    return load_config(args.overrides, {"db_path": args.db}).db_path


def _postgres_url(args: argparse.Namespace) -> str:
    from auger.extras import install_command, require
    from auger.store.factory import is_postgres_url

    target = _db_target(args)
    if not is_postgres_url(target):
        raise CliError("the task queue needs PostgreSQL: pass --db postgresql://… or set AUGER_DB "
                       f"({install_command('postgres')})")
    require("postgres", "the task queue")
    return str(target)


def _with_tasks(url: str, body: Callable[[Any], Awaitable[T]]) -> T:
    """Run `body(Tasks)` over a store opened for it, a StoreError as the command's one-line error."""
    import asyncio

    from auger.fleet.tasks import Tasks
    from auger.store.postgres import PostgresStore

    async def main() -> T:
        store = PostgresStore(url)
        try:
            return await body(Tasks(store))
        finally:
            await store.aclose()

    return guard_store(lambda: asyncio.run(main()))


# -- submit ----------------------------------------------------------------------------
def _cmd_submit(args: argparse.Namespace) -> int:
    """Queue a task: data only (fleet/policy.py), checked here and again by the worker."""
    from auger.fleet.policy import TaskRefused, check_row, check_spec

    try:
        spec = check_spec(task_fields(args))
        check_row(args.queue, args.priority, args.max_attempts)
    except TaskRefused as exc:
        raise CliError(str(exc)) from None
    url = _postgres_url(args)

    async def submit(tasks: Any) -> Any:
        from auger.fleet.submit import submit
        from auger.fleet.tasks import SubmissionConflict

        try:
            record, _ = await submit(tasks.store, spec, queue_name=args.queue, priority=args.priority,
                                     max_attempts=args.max_attempts, submission_id=args.submission_id,
                                     submitted_by=local_user())
            return record
        except SubmissionConflict as exc:
            raise CliError(str(exc)) from None

    record = _with_tasks(url, submit)
    print(json.dumps(record.to_json(), indent=2) if args.json else record.id)
    return 0


# -- worker ----------------------------------------------------------------------------
def _cmd_worker(args: argparse.Namespace) -> int:
    import asyncio
    import logging
    import signal

    from auger.config import home_dirs, valid_base_url
    from auger.fleet.worker import Worker, WorkerOptions
    from auger.health import HealthPortError
    from auger.store.postgres import LEASE_TIMEOUT_S

    url = _postgres_url(args)
    if args.concurrency < 1:
        raise CliError("--concurrency must be at least 1")
    if args.base_url and not valid_base_url(args.base_url):
        raise CliError(f"--base-url {args.base_url!r} is not an http:// or https:// URL")
    if args.health_port is not None and not 0 < args.health_port < 65536:
        raise CliError(f"--health-port must be a port number (1-65535), not {args.health_port}")
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING,
                        format="auger worker: %(levelname)s %(name)s: %(message)s")
    data_dir = Path(args.data_dir) if args.data_dir else home_dirs()["data"] / "worker"
    flags = {"model": args.model, "provider": args.provider or ("openai-compatible" if args.base_url else None),
             "base_url": args.base_url}
    options = WorkerOptions(url=url, data_dir=data_dir, queue=args.queue, concurrency=args.concurrency,
                            lease_timeout_s=args.lease_timeout or LEASE_TIMEOUT_S, poll_s=args.poll,
                            drain_s=args.drain, overrides=list(args.overrides),
                            flags={k: v for k, v in flags.items() if v is not None}, mode=args.mode,
                            cap_mode=args.cap_mode, allow_repos=tuple(args.allow_repo),
                            allow_providers=tuple(args.allow_provider), health_port=args.health_port,
                            health_host=args.health_host)

    async def main() -> int:
        from auger.fleet.forge import ForgeConfigError

        try:
            worker = Worker(options)
        except ForgeConfigError as exc:
            raise CliError(str(exc)) from None
        for line in worker.own.warnings:
            print(f"auger worker: warning: {line}", file=sys.stderr)
        loop = asyncio.get_running_loop()
        signals = 0

        def on_signal() -> None:
            nonlocal signals
            signals += 1
            if signals > 1:
                os._exit(143)
            worker.terminate()

        loop.add_signal_handler(signal.SIGTERM, on_signal)
        loop.add_signal_handler(signal.SIGINT, on_signal)
        policy = worker.policy
        repos = ", ".join(policy.allow_repos) if policy.allow_repos else "remote ones only"
        health = "" if options.health_port is None else \
            f"; health checks: http://{options.health_host}:{options.health_port}/health"
        forge = "" if worker.forge is None else f"; delivers to {worker.forge.api_url}"
        print(f"auger worker: taking tasks of queue '{options.queue}' ({options.concurrency} at once; mode at most "
              f"{policy.mode}; repositories: {repos}; providers: {', '.join(sorted(policy.providers))}{forge}{health})",
              file=sys.stderr, flush=True)
        try:
            await worker.run()
        except HealthPortError as exc:
            raise CliError(str(exc)) from None
        return 0

    return guard_store(lambda: asyncio.run(main()))


# -- tasks -----------------------------------------------------------------------------
def _cmd_tasks(args: argparse.Namespace) -> int:
    url = _postgres_url(args)
    command = args.tasks_command

    async def run(tasks: Any) -> Any:
        if command == "list":
            return await tasks.recent(args.limit, args.state, args.label)
        if command == "stats":
            return await tasks.stats()
        record = await tasks.get(args.task_id)
        if record is None:
            raise CliError(f"no task matches '{args.task_id}' (list them with `auger tasks list`)")
        if command == "show":
            return record, await tasks.result(record.id)
        if command == "cancel":
            done = await tasks.cancel(record.id)
            if done is None:
                raise CliError(f"task {record.id[:12]} is {record.state}: nothing to cancel")
            return done
        if command == "answer":
            return await _answer(tasks, record, args)
        from auger.fleet.submit import retry

        again = await retry(tasks.store, record.id)
        if again is None:
            raise CliError(f"task {record.id[:12]} is {record.state}: only a failed or cancelled task is retried")
        return again

    out = _with_tasks(url, run)
    if command == "list":
        _print_list(out, args.json)
    elif command == "stats":
        _print_stats(out, args.json)
    elif command == "show":
        record, result = out
        if args.json:
            print(json.dumps({**record.to_json(), "result": result.to_json() if result else None}, indent=2))
        else:
            _print_show(record, result)
    else:
        print(json.dumps(out.to_json(), indent=2) if args.json else f"{out.id} {out.state}"
              + (" (cancel asked: its worker interrupts it)" if command == "cancel" and out.state == "running" else "")
              + (" (answered: a worker resumes it)" if command == "answer" else ""))
    return 0


async def _answer(tasks: Any, record: Any, args: argparse.Namespace) -> Any:
    """Answer a parked task's approval from the command line, as `auger serve` does, and deliver it."""
    from auger.fleet.submit import answer
    from auger.fleet.tasks import AnswerRefused

    waiting = (record.parked or {}).get("request") if record.state == "waiting" else None
    if waiting is None:
        raise CliError(f"task {record.id[:12]} is {record.state}: no approval waits for an answer")
    try:
        return await answer(tasks.store, record.id, waiting["request_id"], args.decision, args.feedback,
                            local_user())
    except AnswerRefused as exc:
        raise CliError(str(exc)) from None


def _print_list(records: list[Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps([r.to_json() for r in records], indent=2))
        return
    if not records:
        print("No tasks.")
        return
    for r in records:
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(r.created))
        prompt = " ".join(r.spec.prompt.split())[:50]
        print(f"{r.id[:12]}  {r.state:<9}  {r.attempts}/{r.max_attempts}  {when}  {prompt}")


def _print_show(record: Any, result: Any) -> None:
    print(f"task      {record.id}\nstate     {record.state} (attempt {record.attempts} of {record.max_attempts})")
    print(f"repo      {record.spec.repo} @ {record.spec.ref}\nprompt    {record.spec.prompt}")
    if record.origin:
        print(f"origin    {record.origin}")
    if record.session_id:
        print(f"session   {record.session_id}")
    if record.error:
        print(f"error     {record.error}")
    if record.state == "waiting" and record.parked:
        print(f"waiting   for an answer: {record.parked['request'].get('message', '')}\n"
              f"          (auger tasks answer {record.id[:12]} approve|deny, or from `auger serve`)")
    if result is not None:
        cost = "" if result.cost is None else f", ${result.cost:.4f}"
        print(f"exit      {result.exit_reason}\ntokens    {result.usage.input_tokens} in, "
              f"{result.usage.output_tokens} out{cost}")
        print(f"\n{result.final_message}")
        if result.diff:
            print(f"\n{result.diff}", end="" if result.diff.endswith("\n") else "\n")


def _print_stats(stats: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(stats, indent=2))
        return
    tokens = stats["tokens"]
    cost = "unknown" if stats["cost"] is None else f"${stats['cost']:.4f}"
    print(f"queued {stats['queued']}  running {stats['running']}  waiting {stats['waiting']}  done {stats['done']}  "
          f"failed {stats['failed']}  "
          f"cancelled {stats['cancelled']}  retried {stats['retried']}")
    print(f"tokens {tokens['input']} in, {tokens['output']} out  cost {cost}")


# -- db --------------------------------------------------------------------------------
def _cmd_db(args: argparse.Namespace) -> int:
    import asyncio

    from auger.store.factory import describe, is_postgres_url

    target = _db_target(args)
    where = describe(target)

    async def migrate() -> tuple[int, int]:
        if is_postgres_url(target):
            from auger.store.postgres import migrate as migrate_postgres

            return await migrate_postgres(str(target))
        from auger.store.factory import default_db_path
        from auger.store.sqlite import migrate_file

        return await asyncio.to_thread(migrate_file, Path(target) if target else default_db_path())

    before, after = guard_store(lambda: asyncio.run(migrate()))
    print(f"{where}: schema {after}" + (" (up to date)" if before == after else f" (was {before})"))
    return 0
