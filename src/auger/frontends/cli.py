"""The `auger` command: the interactive terminal (`auger [PROMPT]`), headless runs (`exec`, `resume`),
stored sessions, version.

Imports are deferred to the command that needs them: `auger --version` loads
nothing of the engine, and `auger exec` loads no more than one run needs.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any

from auger import start_gc
from auger._version import __version__
from auger.extras import MissingExtra
from auger.frontends.cli_support import (
    CliError, JsonRenderer, claim_session, find_session, guard_store, load_cli_config, open_store, store_opts,
)

if TYPE_CHECKING:
    from auger.protocol.ops import UserTurn

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_REFUSED, EXIT_CANCELLED, EXIT_TERMINATED = 0, 1, 2, 3, 130, 143
# How a goal run (`--until`, `--goal`) that did not pass ended: a limit it reached (refused: EXIT_REFUSED)
EXIT_GOAL_MAX_TURNS, EXIT_GOAL_BUDGET, EXIT_GOAL_NO_PROGRESS = 4, 5, 6


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv in (["--version"], ["-V"]):
        print(f"auger {__version__}")
        return EXIT_OK
    from auger import dataclass_methods  # (imports dataclasses, which --version never needs)

    dataclass_methods.install()  # every command: a class's methods other than __init__ compiled when called
    if argv and argv[0] in _RUN_COMMANDS:  # their parser alone: no other command's module is imported
        dataclass_methods.keep()
        start_gc.hold()  # until the first model request has gone out
        args = _run_parsers(_standalone)[argv[0]].parse_intermixed_args(argv[1:])
        return _run(args)
    from auger.frontends.mcp_commands import split_command

    parser, commands = _parser()
    argv, server_command = split_command(argv)
    if argv and argv[0] in commands:
        # Per-command parsing lets options sit between positionals: `auger resume ID --json PROMPT`.
        args = commands[argv[0]].parse_intermixed_args(argv[1:])
    elif not argv or argv[0] not in (*_subcommands(parser), "-h", "--help"):
        dataclass_methods.keep()
        start_gc.hold()  # one session, until its first model request (servers hold none: see start_gc)
        args = commands[""].parse_intermixed_args(argv)  # `auger [OPTIONS] [PROMPT]`: interactive
    else:
        args = parser.parse_args(argv)
    if server_command is not None:
        args.server_argv = server_command
    if not hasattr(args, "run"):
        parser.print_help()
        return EXIT_USAGE
    return _run(args)


def _run(args: argparse.Namespace) -> int:
    from auger import child_watch  # (imports asyncio: here, once the collector is held back)

    child_watch.install()  # the children of the command's event loops watched through pidfds, not threads
    try:
        return args.run(args)
    except (CliError, MissingExtra) as exc:
        print(f"auger: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return EXIT_CANCELLED
    except BrokenPipeError:  # `auger models | head`: the reader left; that is not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except Exception as exc:  # a store failure a command did not wrap (guard_store) is still its one line
        from auger.store.base import StoreError

        if not isinstance(exc, StoreError):
            raise
        print(f"auger: error: {exc}", file=sys.stderr)
        return EXIT_USAGE


def _subcommands(parser: argparse.ArgumentParser) -> list[str]:
    """Every subcommand name (`policy`, `mcp`, `schema`… included): a first word that is none of them
    is an interactive session's prompt."""
    return [name for action in parser._actions if isinstance(action, argparse._SubParsersAction)
            for name in action.choices]


_RUN_COMMANDS = ("exec", "resume", "fork")  # the commands that run a session headless


def _standalone(name: str, **options: Any) -> argparse.ArgumentParser:
    """A run command's parser on its own, named as the full parser names its subcommand."""
    options.pop("help", None)
    return argparse.ArgumentParser(prog=f"auger {name}", **options)


def _run_options() -> argparse.ArgumentParser:
    """The options of every command that runs a session (exec, resume, fork, the interactive one)."""
    run_opts = argparse.ArgumentParser(add_help=False)
    run_opts.add_argument("--json", action="store_true", help="print one JSON event per line")
    run_opts.add_argument("-m", "--model", help="model name")
    run_opts.add_argument("-p", "--provider", help="provider name; `auger providers` lists them")
    run_opts.add_argument("--base-url", help="base URL of an OpenAI-compatible API, e.g. http://localhost:11434/v1")
    run_opts.add_argument("-C", "--cd", dest="cwd", help="project directory (default: current directory)")
    run_opts.add_argument("--mode", choices=("plan", "safe", "auto"),
                          help="trust mode: plan (read-only), safe (ask before changes), auto (default headless: "
                               "changes inside the project run in the sandbox)")
    run_opts.add_argument("-i", "--image", action="append", metavar="FILE", help="attach an image (repeatable)")
    run_opts.add_argument("--cassette", metavar="FILE",
                          help="recording for --provider replay: a JSONL file, "
                               "or session:ID to replay a stored session")
    run_opts.add_argument("--skill", action="append", metavar="NAME", help="inject a skill for this turn (repeatable)")
    run_opts.add_argument("--backend", metavar="NAME",
                          help="another agent runs the turns (see `auger backends`); `-c backend=` for auger's own")
    run_opts.add_argument("--approve-all", action="store_true", default=None,
                          help="approve what would be asked instead of denying it (headless runs have nobody to ask)")
    run_opts.add_argument("--worktree", action="store_true", default=None,
                          help="a new session works in a copy of the project; see `auger worktree`")
    run_opts.add_argument("--pending", action="store_true", default=None,
                          help="queue file changes for review (`auger pending`) instead of writing them")
    store_opts(run_opts)
    return run_opts


def _run_parsers(add: Any, run_opts: argparse.ArgumentParser | None = None) -> dict[str, argparse.ArgumentParser]:
    """`exec`, `resume` and `fork`, each made by `add(name, **options)`: a subparser of the full parser, or a
    parser of its own (`_standalone`) when the command line names one of them."""
    from auger.frontends.run_output import add_options as add_output_options

    run_opts = run_opts or _run_options()
    answer_opts = argparse.ArgumentParser(add_help=False)  # what a headless run leaves (frontends/run_output.py)
    add_output_options(answer_opts)

    p_exec = add("exec", parents=[run_opts, answer_opts], help="run one task headless and exit")
    p_exec.add_argument("prompt", nargs="?", help="the task; '-' or omitted reads it from stdin")
    p_exec.set_defaults(run=_cmd_exec)

    p_resume = add("resume", parents=[run_opts, answer_opts],
                   help="continue a stored session (in a terminal with no prompt: interactively)")
    p_resume.add_argument("session_id", nargs="?",
                          help="session id (or a unique prefix), see `auger sessions`; omitted in a terminal: "
                               "pick one of this project's recent sessions")
    p_resume.add_argument("--last", action="store_true", help="the most recent session of this project")
    p_resume.add_argument("prompt", nargs="?", help="the next prompt; '-' or omitted reads it from stdin")
    p_resume.set_defaults(run=_cmd_resume)

    p_fork = add("fork", parents=[run_opts, answer_opts], help="start a new session from a copy of another's history")
    p_fork.add_argument("session_id", help="session id (or a unique prefix) to copy")
    p_fork.add_argument("prompt", nargs="?", help="the next prompt; '-' or omitted reads it from stdin")
    p_fork.add_argument("--before", type=int, default=0, metavar="N",
                        help="copy only what came before the Nth user message (1-based)")
    p_fork.set_defaults(run=_cmd_fork)
    return {"exec": p_exec, "resume": p_resume, "fork": p_fork}


def _parser() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    parser = argparse.ArgumentParser(prog="auger", description="An AI coding agent for your project.")
    parser.add_argument("-V", "--version", action="version", version=f"auger {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    run_opts = _run_options()
    runs = _run_parsers(sub.add_parser, run_opts)

    p_sessions = sub.add_parser("sessions", help="list stored sessions")
    p_sessions.add_argument("--json", action="store_true", help="print JSON")
    p_sessions.add_argument("-n", "--limit", type=int, default=30)
    p_sessions.add_argument("--tree", action="store_true", help="show each session's sub-agents under it")
    p_sessions.add_argument("--cost", action="store_true",
                            help="show each session's tokens and cost per model (its own, fallbacks, the small model) "
                                 "and per purpose (turn, title, compaction, goal_check, review)")
    store_opts(p_sessions)
    p_sessions.set_defaults(run=_cmd_sessions)

    p_demo = sub.add_parser("demo", help="watch a scripted session fix a bug in a sample project (no API key needed)")
    p_demo.add_argument("--json", action="store_true", help="print the events as JSON lines")
    p_demo.add_argument("--keep", action="store_true", help="keep the sample project's temp copy")
    p_demo.set_defaults(run=_cmd_demo)

    p_providers = sub.add_parser("providers", help="list model providers and whether they are usable")
    store_opts(p_providers)
    p_providers.add_argument("--json", action="store_true", help="print JSON")
    p_providers.add_argument("--probe", nargs="?", const="stale", choices=("stale", "now"),
                             help="ask each available provider's server whether it answers and takes the key: "
                                  "those not checked in the last 5 minutes (by this command or `auger serve`), "
                                  "or all of them with `--probe now`")
    p_providers.set_defaults(run=_cmd_providers)

    p_models = sub.add_parser("models", help="list known models: context window, output limit, prices")
    store_opts(p_models)
    p_models.add_argument("--json", action="store_true", help="print JSON")
    p_models.set_defaults(run=_cmd_models)

    p_schema = sub.add_parser("schema", help="print the JSON Schema of every op, event (in its envelope) and item")
    p_schema.set_defaults(run=_cmd_schema)

    p_policy = sub.add_parser("policy", help="inspect the exec policy")
    policy_sub = p_policy.add_subparsers(dest="policy_command", metavar="SUBCOMMAND", required=True)
    p_check = policy_sub.add_parser("check", help="show what would happen to a command: auger policy check -- CMD...; "
                                                  "to a web fetch: auger policy check --fetch URL")
    p_check.add_argument("--mode", choices=("plan", "safe", "auto"), help="trust mode to decide for")
    p_check.add_argument("--fetch", metavar="URL", help="a web_fetch of URL instead of a command")
    p_check.add_argument("-C", "--cd", dest="cwd", help="project directory (default: current directory)")
    p_check.add_argument("words", nargs=argparse.REMAINDER, metavar="-- CMD", help="the command")
    store_opts(p_check)
    p_check.set_defaults(run=_cmd_policy_check)
    p_chat = argparse.ArgumentParser(prog="auger", parents=[run_opts],
                                     description="Work with the agent interactively in this project "
                                                 "(without a terminal: like `auger exec`).")
    p_chat.add_argument("prompt", nargs="?", help="a first prompt to send")
    p_chat.add_argument("--connect", metavar="URL",
                        help="the terminal UI on a session in the `auger serve` at URL (its token: `auger login URL` "
                             "or AUGER_SERVER_TOKEN); leaving it leaves it running there")
    p_chat.set_defaults(run=_cmd_interactive)
    from auger.frontends.agents_cli import add_commands as add_agent_commands
    from auger.frontends.acp.command import add_commands as add_acp_commands
    from auger.frontends.changes_cli import add_commands
    from auger.frontends.mcp_commands import add_parsers as add_mcp_parsers
    from auger.frontends.pending_cli import add_commands as add_pending_commands
    from auger.frontends.init_cli import add_commands as add_init_commands
    from auger.frontends.review_cli import add_commands as add_review_commands
    from auger.frontends.worktree_cli import add_commands as add_worktree_commands

    add_mcp_parsers(sub, store_opts)  # `mcp` and `mcp-server` (frontends/mcp_commands.py)
    changes = add_commands(sub, store_opts)  # `diff` and `undo` (frontends/changes_cli.py)
    changes.update(add_review_commands(sub, store_opts))  # `review` (frontends/review_cli.py)
    changes.update(add_init_commands(sub, store_opts))  # `init` (frontends/init_cli.py)
    agents = add_agent_commands(sub, store_opts)  # `agents` (frontends/agents_cli.py)
    add_worktree_commands(sub, store_opts)  # `worktree …` (frontends/worktree_cli.py)
    add_pending_commands(sub, store_opts)  # `pending` (frontends/pending_cli.py), parsed by the main parser
    changes.update(add_acp_commands(sub, store_opts))  # `acp` (frontends/acp/command.py)
    from auger.frontends.backends_cli import add_commands as add_backends

    changes.update(add_backends(sub, store_opts))  # `backends` (frontends/backends_cli.py)
    from auger.frontends.server.command import add_commands as add_serve

    changes.update(add_serve(sub, store_opts))  # `serve` (frontends/server/command.py)
    from auger.frontends.fleet_cli import add_commands as add_fleet

    changes.update(add_fleet(sub, store_opts))  # `submit`, `worker`, `tasks`, `db` (frontends/fleet_cli.py)
    from auger.frontends.users_cli import add_commands as add_users

    add_users(sub, store_opts)  # `users` (frontends/users_cli.py), parsed by the main parser
    from auger.frontends.schedule_cli import add_commands as add_schedules

    add_schedules(sub, store_opts)  # `schedule` (frontends/schedule_cli.py), parsed by the main parser
    from auger.frontends.intake_cli import add_commands as add_intakes

    add_intakes(sub, store_opts)  # `hooks`: webhook intakes (frontends/intake_cli.py), parsed by the main parser
    from auger.frontends.secrets_cli import add_commands as add_secrets

    add_secrets(sub, store_opts)  # `secrets check` (frontends/secrets_cli.py)
    from auger.frontends.connect_cli import add_commands as add_connect

    changes.update(add_connect(sub, store_opts))  # `login`, `attach` (frontends/connect_cli.py)
    return parser, {"": p_chat, **runs, "sessions": p_sessions,
                    "providers": p_providers, "models": p_models, "demo": p_demo, **changes, **agents}


# -- commands -------------------------------------------------------------------------
def _cmd_exec(args: argparse.Namespace) -> int:
    return _run_headless(args, _read_prompt(args.prompt))


def _cmd_interactive(args: argparse.Namespace) -> int:
    if args.connect:
        from auger.frontends.connect_cli import run_connected

        return run_connected(args, args.connect, prompt=args.prompt)
    if not _terminal():
        return _run_headless(args, _read_prompt(args.prompt))
    return _run_interactive(args, prompt=args.prompt)


def _cmd_resume(args: argparse.Namespace) -> int:
    if args.last and args.session_id and args.prompt is None:  # `auger resume --last PROMPT`
        args.prompt, args.session_id = args.session_id, None
    if args.last and args.session_id:
        raise CliError("give a session id or --last, not both")
    if args.prompt is None and _terminal():
        if args.output_schema or args.output_last_message:
            raise CliError("--output-schema and --output-last-message are for a headless run: give the prompt")
        return _run_interactive(args, resume=args.session_id or ("" if args.last else None),
                                pick=not (args.session_id or args.last))
    if args.last:
        args.session_id = _last_session(args)
    if not args.session_id:
        raise CliError("no session given: pass its id (see `auger sessions`) or --last")
    return _run_headless(args, _read_prompt(args.prompt), from_session=args.session_id)


def _terminal() -> bool:
    return sys.stdin is not None and sys.stdin.isatty() and sys.stdout.isatty()


def _run_interactive(args: argparse.Namespace, *, prompt: str | None = None, resume: str | None = None,
                     pick: bool = False) -> int:
    """The terminal UI; `resume` is an id prefix, or "" for this project's latest session."""
    config, root = _session_config(args)
    from auger.frontends.tui import run_tui
    from auger.frontends.worktree_cli import session_root

    root = session_root(config, root, args.worktree, new=resume is None and not pick)
    return run_tui(config, root, prompt=prompt, resume=resume, pick=pick)  # it reports store errors itself


def _last_session(args: argparse.Namespace) -> str:
    import asyncio

    config = load_cli_config(args)
    root = os.path.realpath(args.cwd or os.getcwd())

    async def latest():
        store = open_store(config)
        try:
            return await store.list_sessions(200, cwd=root)
        finally:
            await store.aclose()

    found = guard_store(lambda: asyncio.run(latest()))
    if not found:
        raise CliError(f"no stored session in {root}; list them with `auger sessions`")
    return found[0].id


def _cmd_fork(args: argparse.Namespace) -> int:
    return _run_headless(args, _read_prompt(args.prompt), from_session=args.session_id, fork_before=args.before)


def _cmd_sessions(args: argparse.Namespace) -> int:
    import asyncio
    import json

    from auger.frontends.agents_cli import sub_agent_tree, tree_json, tree_lines

    config = load_cli_config(args)

    async def fetch():
        from auger.models.registry import cost_breakdown, stored_cost, stored_costs

        store = open_store(config)
        try:
            sessions = await store.list_sessions(args.limit)
            tree = await sub_agent_tree(store) if args.tree else {}
            costs = {s.id: (await stored_cost(store, s.id, config),
                            await stored_cost(store, s.id, config, inherited=True)) for s in sessions}
            breakdown = {s.id: cost_breakdown(await stored_costs(store, s.id, config))
                         for s in sessions} if args.cost else {}
            return sessions, costs, tree, breakdown
        finally:
            await store.aclose()

    sessions, costs, tree, breakdown = guard_store(lambda: asyncio.run(fetch()))
    if args.json:
        for s in sessions:
            row = {"id": s.id, "title": s.title, "updated": s.updated, "created": s.created, "cwd": s.cwd,
                   "provider": s.provider, "model": s.model, "items": s.items, "cost_usd": costs[s.id][0],
                   "inherited_cost_usd": costs[s.id][1]}
            if args.cost:
                for field, rows in breakdown[s.id].items():
                    row[f"by_{field}"] = [{field: name, "input_tokens": u.input_tokens,
                                           "output_tokens": u.output_tokens, "cost_usd": c} for name, u, c in rows]
            print(json.dumps({**row, "children": tree_json(tree, s.id)} if args.tree else row))
        return EXIT_OK
    if not sessions:
        print("No stored sessions.")
        return EXIT_OK
    import time

    from auger.protocol.jsontext import printable

    def money(value: float | None) -> str:
        return "unknown" if value is None else f"${value:.4f}"

    # COST: what the session's own calls cost; INHERITED: a fork's, what its history had cost before it
    print(f"{'ID':<10} {'UPDATED':<16} {'MODEL':<20} {'COST':>9} {'INHERITED':>9} {'TITLE':<40} CWD")
    for s in sessions:
        updated = time.strftime("%Y-%m-%d %H:%M", time.localtime(s.updated))
        title = (s.title or "(untitled)").replace("\n", " ")
        own, inherited = costs[s.id]
        print(printable(f"{s.id[:8]:<10} {updated:<16} {s.model[:20]:<20} {money(own):>9} "
                        f"{money(inherited) if inherited != 0 else '-':>9} {title[:40]:<40} {s.cwd}"))
        for field, rows in breakdown.get(s.id, {}).items():
            for name, usage, cost in rows:  # each model's share, then each purpose's (model: a purpose's name)
                label = name if field == "model" else f"· {name}"
                print(printable(f"{'':<10} {'':<16} {label[:20]:<20} {money(cost):>9}   {usage.input_tokens:,} in, "
                                f"{usage.output_tokens:,} out"))
        for line in tree_lines(tree, s.id):
            print(printable(line))
    return EXIT_OK


def _cmd_policy_check(args: argparse.Namespace) -> int:
    """What a session would decide for a shell command, or a web fetch: the same classifiers and decision
    function a session uses."""
    import shlex
    from pathlib import Path

    from auger.config import home_dirs
    from auger.policy.decision import decide_call
    from auger.policy.rules import load_rules
    from auger.policy.sandbox import detect
    from auger.policy.trust import effective_mode
    from auger.tools.base import ToolSpec
    from auger.tools.shell import SHELL

    words = args.words[1:] if args.words[:1] == ["--"] else args.words
    if bool(words) == bool(args.fetch):
        raise CliError("give a command or a URL: auger policy check -- CMD [ARGS...] | --fetch URL")
    config = load_cli_config(args)
    root = Path(os.path.realpath(args.cwd or os.getcwd()))
    rules, problems = load_rules(home_dirs()["config"] / "rules.toml", root / ".auger" / "rules.toml",
                                 trust_project=config.trust_project_rules)
    for line in problems:
        print(f"auger: warning: {line}", file=sys.stderr)
    tool: ToolSpec = SHELL
    if args.fetch:
        from auger.tools.web import web_policy
        from auger.tools.web_fetch import refusal, web_fetch_tool

        print(f"url:      {args.fetch}")
        refused = refusal(args.fetch, web_policy(config))
        if refused:
            print(f"decision: refused in every mode: {refused}")
            return EXIT_OK
        policy = web_policy(config)
        tool, call = web_fetch_tool(lambda: policy), {"url": args.fetch}
    else:
        command = words[0] if len(words) == 1 else shlex.join(words)
        print(f"command:  {command}")
        call = {"command": command}
    c = tool.classify(call, root)
    sandboxed = detect(config.sandbox)[0] is not None
    decision = decide_call(tool.name, c, rules, config.mode, sandboxed=sandboxed)
    mode = effective_mode(config.mode, sandboxed)
    print(f"effect:   {c.effect}" + (f" ({'; '.join(c.reasons)})" if c.reasons else ""))
    if c.outside_paths:
        print(f"outside:  {', '.join(c.outside_paths)}")
    print(f"rule:     {decision.rule or 'none matches'}")
    shown_mode = mode if mode == config.mode else f"{config.mode} (acting as {mode}: no sandbox)"
    print(f"decision: {decision.verdict} in {shown_mode} mode: {decision.reason}")
    if args.fetch:
        from auger.tools.web_fetch import ADDRESS_CONDITION, SEEN_CONDITION

        for condition in (() if config.web_fetch_any_url else (SEEN_CONDITION,)) + (ADDRESS_CONDITION,):
            print(f"and:      {condition}")
    return EXIT_OK


def _cmd_schema(args: argparse.Namespace) -> int:
    from auger.protocol.schema import protocol_schema, schema_text

    sys.stdout.write(schema_text(protocol_schema()))
    return EXIT_OK


def _cmd_demo(args: argparse.Namespace) -> int:
    from auger.demo.run import run_demo

    return run_demo(json_output=args.json, keep=args.keep)


def _cmd_providers(args: argparse.Namespace) -> int:
    """The providers as `auger serve` shows them (models/status.py): the presence check, and what a check of
    their servers found lately — by this command's --probe or a server's — kept in the user's cache dir."""
    import asyncio
    import json

    from auger.config import home_dirs
    from auger.models.registry import registry_for
    from auger.models.status import ProbeCache, statuses
    from auger.protocol.jsontext import printable

    config = load_cli_config(args)
    for line in registry_for(config).diagnostics:
        print(f"auger: warning: {line}", file=sys.stderr)
    rows = asyncio.run(statuses(config, ProbeCache(home_dirs()["cache"]), args.probe))
    if args.json:
        for r in rows:
            print(json.dumps({"name": r.name, "label": r.label, "wire": r.wire, "base_url": r.base_url,
                              "key_env": r.key_env, "default_model": r.default_model, "source": r.source,
                              "status": r.status, "detail": r.detail, "checked": r.checked}))
        return EXIT_OK
    print(f"{'PROVIDER':<18} {'STATUS':<14} {'WIRE':<17} DETAIL")
    for r in rows:
        checked = f" (checked {r.checked:.0f}s ago)" if r.checked is not None else ""
        print(printable(f"{r.name:<18} {r.status:<14} {(r.wire or '-'):<17} {r.detail}{checked}"))
    return EXIT_OK


def _cmd_models(args: argparse.Namespace) -> int:
    import json

    from auger.models.registry import registry_for

    config = load_cli_config(args)
    registry = registry_for(config)
    for line in registry.diagnostics:
        print(f"auger: warning: {line}", file=sys.stderr)
    rows = registry.all_models()
    if args.json:
        for provider, m in rows:
            print(json.dumps({"provider": provider or None, "model": m.name, "context_window": m.context_window,
                              "max_output_tokens": m.max_output_tokens, "input_price": m.input_price,
                              "cached_input_price": m.cached_input_price, "output_price": m.output_price}))
        return EXIT_OK

    def price(value: float | None) -> str:
        return "unknown" if value is None else f"${value:g}"

    print(f"{'MODEL':<26} {'PROVIDER':<14} {'CONTEXT':>10} {'MAX OUT':>8} {'IN/1M':>9} {'CACHED/1M':>10} {'OUT/1M':>9}")
    for provider, m in rows:
        print(f"{m.name:<26} {(provider or '-'):<14} {m.context_window:>10,} {m.max_output_tokens:>8,} "
              f"{price(m.input_price):>9} {price(m.cached_input_price):>10} {price(m.output_price):>9}")
    return EXIT_OK


# -- headless run -----------------------------------------------------------------------
def _read_prompt(prompt: str | None) -> str:
    if prompt is None or prompt == "-":
        if sys.stdin is None or sys.stdin.isatty():
            raise CliError("no prompt given: pass it as an argument or pipe it on stdin")
        prompt = sys.stdin.read()
    if not prompt.strip():
        raise CliError("the prompt is empty")
    return prompt


def _session_config(args: argparse.Namespace) -> tuple[Any, str]:
    """The configuration and project directory a session command runs with (refused: CliError)."""
    from auger.models.registry import prepare_tls
    from auger.policy.sandbox import detect_ahead

    config = load_cli_config(args)
    prepare_tls(config)  # on a thread, while the engine is imported
    detect_ahead(config.sandbox)  # likewise: the session's sandbox is chosen from its answer
    _choose_backend(args, config)
    root = os.path.abspath(args.cwd or os.getcwd())
    problem = _dir_problem(root)
    if problem:
        raise CliError(f"project directory {root} {problem}")
    return config, root


def _run_headless(args: argparse.Namespace, prompt: str, from_session: str | None = None,
                  fork_before: int | None = None) -> int:
    """A new session, a resumed one (`from_session`), or a fork of one (`fork_before` set, 0 = whole)."""
    import asyncio

    from auger.frontends.run_output import RunOutput, read_schema
    from auger.protocol.ops import UserTurn

    schema = read_schema(getattr(args, "output_schema", None))  # refused before any session opens
    output = RunOutput(schema, getattr(args, "output_last_message", None))
    images = _read_images(getattr(args, "image", None) or [])  # ...as are images that cannot be sent
    until, goal, max_turns = (getattr(args, name, None) for name in ("until", "goal", "max_turns"))
    if max_turns is not None and until is None and goal is None:
        raise CliError("--max-turns is for a goal run: give --until CMD or --goal TEXT")
    if max_turns is not None and max_turns < 1:
        raise CliError(f"--max-turns must be at least 1, not {max_turns}")
    config, root = _session_config(args)
    return guard_store(lambda: asyncio.run(_headless(args, config, root, UserTurn(
        prompt, images=images, skills=list(getattr(args, "skill", None) or []), output_schema=output.schema,
        until=until, goal=goal, max_turns=max_turns), from_session, fork_before, output)))


def _read_images(paths: list[str]) -> list[str]:
    """The `--image` files, read here (the user's own choice of file) and sent as data URLs."""
    from auger.models.images import ImageError, user_data_url

    try:
        return [user_data_url(path) for path in paths]
    except ImageError as exc:
        raise CliError(str(exc)) from None


async def _headless(args, config, root: str, turn: UserTurn, resume_id: str | None, fork_before: int | None,
                    output) -> int:
    import asyncio
    import signal

    store = open_store(config, ahead=True)  # opened on its thread while the engine is imported

    from auger.engine.session.resume import resume_client, resume_config
    from auger.engine.session.sessions import SessionManager, SessionNotFound, recorded_backend, run_prompt
    from auger.engine.workspace import Workspace
    from auger.frontends.plain import PlainRenderer, RunTally
    from auger.models.registry import ProviderError, client_for
    from auger.protocol.ops import Interrupt
    from auger.store.base import StoreError

    from auger.frontends.worktree_cli import session_root

    leased: str | None = None
    store_failure = ""
    try:
        record = None
        switch = False  # whether the user named another provider or model for a stored session
        if resume_id is not None:
            record = await find_session(store, resume_id)
            if fork_before is None:
                await claim_session(store, record.id)
                leased = record.id
            explicit = {o.partition("=")[0].strip() for o in args.overrides}
            provider = config.provider if args.provider or "provider" in explicit else None  # not --base-url alone
            model = config.model if args.model or "model" in explicit else None
            config = resume_config(record, config, provider=provider, model=model)
            switch = provider is not None or model is not None
            if (config.base_url or config.api_key_env) and config.provider != config.endpoint_provider:
                print(f"auger: warning: session {record.id[:8]} continues with its provider '{config.provider}', "
                      f"at that provider's own address and key; your base_url and api_key_env are for "
                      f"'{config.endpoint_provider}' (pass -p {config.provider} --base-url URL to move it)",
                      file=sys.stderr)
            if config.backend is None:  # the agent it was left with runs it: auger's own model may be unset
                config.backend = await recorded_backend(store, record.id)
            if not args.cwd:
                root = record.cwd
                problem = _dir_problem(root)
                if problem:
                    raise CliError(f"session {record.id[:8]} was recorded in {root}, which {problem} any more; "
                                   "pass -C DIR to continue it in another directory")
        temp_cassette = None
        if config.provider == "replay" and (config.cassette or "").startswith("session:"):
            config.cassette = temp_cassette = await _cassette_from_session(store, config.cassette.partition(":")[2])
        try:
            # a cassette is read here, once: its temp copy is no longer needed
            client = client_for(config) if record is None else resume_client(record, config)
        except ProviderError as exc:
            raise CliError(str(exc)) from None
        finally:
            if temp_cassette is not None:
                os.unlink(temp_cassette)
        # made once nothing else can refuse the run, so none is left unused
        root = session_root(config, root, args.worktree, new=resume_id is None)
        sessions = SessionManager(Workspace.open(root, config), store)
        mode = getattr(args, "mode", None)
        try:
            if resume_id is None:
                session = await sessions.create(client)
            elif fork_before is not None:
                session = await sessions.fork(resume_id, client=client, mode=mode, switch=switch,
                                              before_user_message=fork_before or None)
            else:
                session = await sessions.resume(resume_id, client=client, mode=mode, switch=switch)
        except (SessionNotFound, ValueError) as exc:
            raise CliError(str(exc)) from None
        if leased is None:
            await claim_session(store, session.id)
            leased = session.id
        if session.confinement is not None:  # a task runs commands: its sandbox starts while the model replies
            session.confinement.prepare()

        loop = asyncio.get_running_loop()
        interrupts = 0
        terminated = False

        def on_signal(signum: int) -> None:
            nonlocal interrupts, terminated
            interrupts += 1
            terminated = terminated or signum == signal.SIGTERM
            if interrupts > 1:
                os._exit(EXIT_TERMINATED if terminated else EXIT_CANCELLED)
            session.submit(Interrupt("terminated by SIGTERM" if signum == signal.SIGTERM else ""))

        loop.add_signal_handler(signal.SIGINT, on_signal, signal.SIGINT)
        loop.add_signal_handler(signal.SIGTERM, on_signal, signal.SIGTERM)
        render = JsonRenderer() if args.json else PlainRenderer()
        tally = RunTally()

        def on_envelope(envelope) -> None:
            render(envelope)
            tally.see(envelope.event)
            output.see(envelope)

        try:
            ended_turns = await run_prompt(session, turn, on_envelope=on_envelope)
        except StoreError as exc:  # nothing more could be stored, so nothing more shown; the session is shut
            store_failure = str(exc)
        loop.remove_signal_handler(signal.SIGINT)
        loop.remove_signal_handler(signal.SIGTERM)
    finally:
        if leased is not None:
            await store.release(leased)
        await store.aclose()
    if store_failure:
        print(f"auger: error: {store_failure} (session {session.id[:8]})", file=sys.stderr)
        return EXIT_FAILED
    written = output.finish(json_events=args.json)
    summary = tally.summary(changes_known=config.snapshots)
    if summary:
        print(summary, file=sys.stderr)
    goal = tally.goal
    if goal is not None and goal.reason not in ("passed", "error", "cancelled"):  # ended by a limit
        print(f"auger: {goal.message} (session {session.id[:8]})", file=sys.stderr)
        return {"refused": EXIT_REFUSED, "max_turns": EXIT_GOAL_MAX_TURNS, "budget": EXIT_GOAL_BUDGET,
                "no_progress": EXIT_GOAL_NO_PROGRESS}[goal.reason]
    if not ended_turns:  # nothing ran, and no goal said why
        print(f"auger: no turn ran (session {session.id[:8]})", file=sys.stderr)
        return EXIT_FAILED
    ended = ended_turns[-1]
    if ended.reason == "complete":
        if not written:
            return EXIT_FAILED
        return EXIT_REFUSED if tally.blocked(changes_known=config.snapshots) else EXIT_OK
    if ended.reason == "cancelled" and terminated:
        print(f"auger: terminated by SIGTERM (session {session.id[:8]})", file=sys.stderr)
        return EXIT_TERMINATED
    print(f"auger: {ended.reason}: {ended.message or 'turn did not complete'} (session {session.id[:8]})",
          file=sys.stderr)
    return EXIT_CANCELLED if ended.reason == "cancelled" else EXIT_FAILED


def _choose_backend(args: argparse.Namespace, config: Any) -> None:
    """`--backend NAME` (or `backend` in the config): another agent runs the turns. Refused here, before
    any session opens, when that agent is unknown, disabled, not installed or broken in the config."""
    if getattr(args, "backend", None) is not None:
        config.backend = args.backend
    if not config.backend:
        return
    from auger.backends.config import load_backends
    from auger.backends.status import status_of

    catalog = load_backends(config.tables)
    spec = catalog.specs.get(config.backend)
    if spec is None:
        why = catalog.errors.get(config.backend) or "no such backend"
        raise CliError(f"backend {config.backend!r}: {why}; `auger backends` lists them")
    row = status_of(spec)
    if row.status == "error":
        raise CliError(f"backend {config.backend!r} cannot run: {row.detail}")
    if row.status != "available":
        raise CliError(f"backend {config.backend!r} is {row.status}: {row.detail}")


def _dir_problem(path: str) -> str | None:
    """Why `path` cannot be a project directory, or None when it can."""
    if os.path.isdir(path):
        return None
    return "is not a directory" if os.path.exists(path) else "does not exist"


async def _cassette_from_session(store, session_id: str) -> str:
    """Write a stored session's model replies to a temp JSONL cassette, so `--cassette session:ID` replays it."""
    import tempfile

    from auger.models.replay import cassette_from_items, dump_cassette

    source = await find_session(store, session_id, "for --cassette session:ID")
    replies = cassette_from_items([s.item for s in await store.load_items(source.id)])
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", prefix="auger-cassette-", delete=False) as f:
        f.write(dump_cassette(replies))
    return f.name

