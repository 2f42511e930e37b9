"""`auger hooks add|list|remove|deliveries`: the webhook intakes of `auger serve` (fleet/intake.py).

`add` writes an `[intake.NAME]` table in the user's config.toml (checked as the server will read it,
before the file is touched); the server reads its config at each delivery, so a new intake is live at
once. `list` never prints a secret. `deliveries` reads what the intakes received from the store (`--db`)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any, Callable

from auger.frontends.cli_support import CliError, with_store


def add_commands(sub: Any, store_opts: Callable[[argparse.ArgumentParser], None]) -> None:
    p = sub.add_parser("hooks", help="webhook intakes of `auger serve` (POST /api/hooks/NAME): add, list, remove, "
                                     "deliveries")
    commands = p.add_subparsers(dest="hooks_command", required=True)
    add = commands.add_parser("add", help="add (or replace) an intake in your config.toml")
    add.add_argument("name", help="1-64 lower-case letters, digits, '_' or '-': the URL is /api/hooks/NAME")
    secret = add.add_mutually_exclusive_group(required=True)
    secret.add_argument("--secret", help="the shared secret deliveries are signed with (16+ characters)")
    secret.add_argument("--secret-env", metavar="VAR", help="...or the variable holding it, read by the server")
    add.add_argument("--action", choices=("task", "message"), default="task",
                     help="queue a task (default), or send a message into --session")
    add.add_argument("--session", metavar="ID", help="action message: the session it speaks to")
    add.add_argument("--repo", help="action task: the repository the task works on (the intake's, never the payload's)")
    add.add_argument("--ref", help="the base ref, or a template such as '{{pull_request.head.sha}}'")
    add.add_argument("-m", "--model", help="model name")
    add.add_argument("-p", "--provider", help="a provider the workers offer, by name")
    add.add_argument("--base-url", help="a base URL: the task names the provider of your config that has it")
    add.add_argument("--mode", choices=("plan", "safe", "auto"), help="the task's mode (within the workers' ceiling)")
    add.add_argument("--prompt", help="the task's prompt: text with {{field.path}} placeholders for the payload's "
                                      "fields, each set apart as untrusted data")
    add.add_argument("--message", help="action message: the message, a template as --prompt")
    add.add_argument("--event", action="append", default=[], metavar="NAME",
                     help="an event taken (X-GitHub-Event / X-Auger-Event; repeatable; default: all)")
    add.add_argument("--filter", action="append", default=[], metavar="PATH=VALUE",
                     help="a payload field that must have this value (repeatable; a path twice: either value)")
    add.add_argument("--mention", metavar="TEXT", help="text that must appear, e.g. @auger")
    add.add_argument("--mention-in", metavar="PATH", help="the field it must appear in (default comment.body)")
    add.add_argument("--deliver", choices=("none", "branch", "pr", "comment"), help="what becomes of the result")
    add.add_argument("--kind", choices=("change", "review"), help="a change (default) or a review of --ref")
    add.add_argument("--base", help="the branch a pull request targets or a review compares against (a template)")
    add.add_argument("--issue", help="the issue or pull request to answer in: a template such as '{{issue.number}}'")
    add.add_argument("--title", help="a short title (a template)")
    add.add_argument("--label", action="append", default=[], metavar="NAME", help="a label for its tasks")
    add.add_argument("--queue", help="the queue its tasks go to")
    add.add_argument("--priority", type=int)
    add.add_argument("--max-attempts", type=int)
    add.add_argument("--token-budget", type=int)
    add.add_argument("--cost-budget", type=float)
    commands.add_parser("list", help="the intakes of your config: name, action, repository, events (no secret)")
    remove = commands.add_parser("remove", help="remove an intake from your config.toml")
    remove.add_argument("name")
    deliveries = commands.add_parser("deliveries", help="what the intakes received, newest first (from the store)")
    deliveries.add_argument("name", nargs="?", help="one intake's only")
    deliveries.add_argument("--limit", type=int, default=30)
    for command in commands.choices.values():
        command.add_argument("--json", action="store_true", help="print JSON")
        store_opts(command)
    p.set_defaults(run=_cmd_hooks)


def _cmd_hooks(args: argparse.Namespace) -> int:
    from auger.user_config import ConfigEditError, set_table, user_config_path

    command = args.hooks_command
    path = user_config_path()
    if command == "add":
        table = _table(args)
        _check(args.name, table, args)
        try:
            set_table(path, "intake", args.name, table)
        except ConfigEditError as exc:
            raise CliError(str(exc)) from None
        if "secret" in table and path.stat().st_mode & 0o077:
            print(f"auger: warning: {path} is readable by others and now holds a secret: chmod 600 {path}, or use "
                  "--secret-env", file=sys.stderr)
        print(json.dumps({"name": args.name, "url": f"/api/hooks/{args.name}"}) if args.json
              else f"intake {args.name}: POST /api/hooks/{args.name} on `auger serve`, signed with its secret")
        return 0
    if command == "remove":
        try:
            removed = set_table(path, "intake", args.name, None)
        except ConfigEditError as exc:
            raise CliError(str(exc)) from None
        if not removed:
            raise CliError(f"no intake named {args.name} in {path}")
        print(f"intake {args.name} removed")
        return 0
    if command == "list":
        return _list(args)
    found = with_store(args, lambda store: store.list_deliveries(args.name, args.limit))
    if args.json:
        print(json.dumps([d.__dict__ for d in found], indent=2))
    for d in [] if args.json else found:
        what = d.task_id or d.session_id or d.detail or ""
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(d.received))
        print(f"{when}  {d.intake:<16} {d.event or '-':<16} {d.outcome:<8} {d.delivery_id[:40]:<40} {what}")
    return 0


def _table(args: argparse.Namespace) -> dict[str, Any]:
    from auger.fleet.policy import is_remote

    table: dict[str, Any] = {"secret": args.secret} if args.secret else {"secret_env": args.secret_env}
    if args.action != "task":
        table["action"] = args.action
    for key in ("session", "repo", "ref", "model", "provider", "base_url", "mode", "prompt", "message", "mention",
                "mention_in", "deliver", "kind", "base", "title", "queue", "priority", "max_attempts",
                "token_budget", "cost_budget"):
        value = getattr(args, key)
        if value is not None:
            table[key] = value
    if args.repo is not None and not is_remote(args.repo):
        table["repo"] = os.path.realpath(args.repo)  # a local path, as the workers will find it
    if args.issue is not None:
        table["issue"] = int(args.issue) if args.issue.isdigit() else args.issue
    if args.event:
        table["events"] = list(args.event)
    if args.label:
        table["labels"] = list(args.label)
    if args.filter:
        filters: dict[str, Any] = {}
        for item in args.filter:
            key, sep, raw = item.partition("=")
            if not sep or not key.strip():
                raise CliError(f"--filter {item!r}: expected PATH=VALUE")
            value = _scalar(raw)
            filters.setdefault(key.strip(), []).append(value)
        table["filter"] = {k: v[0] if len(v) == 1 else v for k, v in filters.items()}
    return table


def _scalar(text: str) -> Any:
    """A filter's value: a TOML number or boolean when it reads as one, else the text."""
    import tomllib

    try:
        value = tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text
    return value if isinstance(value, (bool, int, float)) else text


def _check(name: str, table: dict[str, Any], args: argparse.Namespace) -> None:
    """The table as the server will read it: refused here, before the file changes, if it would be."""
    from auger.config import load_config
    from auger.fleet.intake import IntakeError, parse_intake
    from auger.models.registry import registry_for

    config = load_config(args.overrides, {"db_path": args.db})
    providers = {p.base_url.rstrip("/"): p.name for p in registry_for(config).providers.values() if p.base_url}
    env = dict(os.environ)
    if "secret_env" in table:
        env.setdefault(table["secret_env"], "x" * 32)  # the server's environment holds it, not necessarily this one
    try:
        parse_intake(name, table, providers, env)
    except IntakeError as exc:
        raise CliError(str(exc)) from None


def _list(args: argparse.Namespace) -> int:
    from auger.config import load_config
    from auger.fleet.intake import IntakeError, configured
    from auger.models.registry import registry_for

    config = load_config(args.overrides, {"db_path": args.db})
    providers = {p.base_url.rstrip("/"): p.name for p in registry_for(config).providers.values() if p.base_url}
    intakes = configured(config.tables, providers, os.environ)
    rows: list[dict[str, Any]] = []
    for name, intake in sorted(intakes.items()):
        if isinstance(intake, IntakeError):
            rows.append({"name": name, "usable": False, "error": str(intake)})
        else:
            rows.append({"name": name, "usable": True, "action": intake.action,
                         "repo": intake.task.get("repo"), "session": intake.session, "events": list(intake.events),
                         "mention": intake.mention, "deliver": intake.task.get("deliver", "none")})
    if args.json:
        print(json.dumps(rows, indent=2))
    elif not rows:
        print("No intakes. Add one with `auger hooks add NAME --secret S --repo … --prompt …`.")
    for row in [] if args.json else rows:
        if not row["usable"]:
            print(f"{row['name']:<16} unusable: {row['error']}")
        else:
            target = row["repo"] if row["action"] == "task" else f"session {row['session']}"
            events = ",".join(row["events"]) or "any event"
            print(f"{row['name']:<16} {row['action']:<8} {target}  ({events})")
    return 0
