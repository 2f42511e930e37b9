"""The `/` commands. Each says what it did in the transcript, or one line saying why it could not."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Awaitable, Callable

from auger.frontends.tui.view import Tui

if TYPE_CHECKING:
    from auger.frontends.tui.feed import Feed


Handler = Callable[["Tui", str], Awaitable[None]]
COMMANDS: dict[str, tuple[str, Handler]] = {}


def command(name: str, help_text: str):
    def register(fn: Handler) -> Handler:
        COMMANDS[name] = (help_text, fn)
        return fn

    return register


def completions(tui: Tui) -> list[tuple[str, str]]:
    """(name, help) of every command, custom prompt and skill the prompt can complete."""
    items = [(name, help_text) for name, (help_text, _) in COMMANDS.items()]
    if tui.feed is not None:
        items += [(name, f"prompt: {desc}"[:60]) for name, desc in tui.feed.prompts()]
        items += [(name, f"skill: {desc}"[:60]) for name, desc in tui.feed.skills()]
    return sorted(items)


class _NoSession(Exception):
    """A command needs the session, which is still opening (or failed to open)."""


def _open(tui: Tui) -> Feed:
    if tui.feed is None:
        raise _NoSession
    return tui.feed


async def run_command(tui: Tui, line: str) -> None:
    from auger.frontends.tui.feed import NotHere

    try:
        await _run_command(tui, line)
    except _NoSession:
        tui.say(f"{line.split()[0]} needs the session, which is not open yet", "yellow")
    except NotHere as exc:
        tui.say(f"{line.split()[0]}: {exc}", "yellow")


async def _run_command(tui: Tui, line: str) -> None:
    name, _, arg = line[1:].partition(" ")
    arg = arg.strip()
    if name in COMMANDS:
        await COMMANDS[name][1](tui, arg)
    elif any(p == name for p, _ in _open(tui).prompts()):
        tui.say(f"› {line}", "bold")
        _open(tui).send(line)  # the engine expands a custom prompt
    elif any(s == name for s, _ in _open(tui).skills()):
        tui.say(f"› {line}  (skill {name})", "bold")
        _open(tui).send(arg or f"Use the {name} skill.", skills=[name])
    else:
        tui.say(f"unknown command /{name}; /help lists them", "yellow")


def _between_turns(tui: Tui, what: str) -> bool:
    """Commands that act on what the running turn is changing (undo, rollback, pending) are refused
    during it: run later, they would act on a state the user has not seen."""
    if tui.busy:
        tui.say(f"{what} waits for the turn to end (esc interrupts it)", "yellow")
        return False
    return True


def _after_turn(tui: Tui, line: str, action: Callable[[], None]) -> None:
    """Settings for the next turns (model, backend, a server's removal) typed during a turn are held
    and applied as it ends, as a queued message is; shown under the prompt until then."""
    if tui.busy:
        tui.after_turn.append((line, action))
        tui.redraw()
    else:
        action()


@command("help", "list commands and keys")
async def _help(tui: Tui, arg: str) -> None:
    rows = [f"  /{name:<10} {help_text}" for name, (help_text, _) in sorted(COMMANDS.items())]
    keys = ["  enter send (queued if a turn runs) · shift-enter, alt-enter or ctrl-j new line · ctrl-g edit in $EDITOR",
            "  @path attach a file · !cmd run a shell command · ctrl-r search history",
            "  esc or ctrl-c interrupt · ctrl-c twice or ctrl-d quit",
            "  approvals: y once · s session · a always · n deny · f deny and say why · esc abort the turn"]
    tui.say("\n".join(["commands:", *rows, "keys:", *keys]), "")


@command("model", "show or switch the model: /model NAME [PROVIDER]")
async def _model(tui: Tui, arg: str) -> None:
    if not arg:
        tui.say(f"model: {_open(tui).model}; switch with /model NAME (auger models lists them)")
        return
    model, _, provider = arg.partition(" ")
    feed = _open(tui)
    _after_turn(tui, f"/model {arg}", lambda: feed.set_model(model, provider.strip() or None))


@command("mode", "show or switch the trust mode: /mode plan|safe|auto")
async def _mode(tui: Tui, arg: str) -> None:
    if not arg:
        tui.say(f"mode: {_open(tui).mode}; plan = read-only, safe = ask before changes, auto = sandboxed changes")
        return
    _open(tui).set_mode(arg)


@command("compact", "summarise the conversation to free context")
async def _compact(tui: Tui, arg: str) -> None:
    tui.say("compacting…" if not tui.busy else "compacting before the next model call…")
    _open(tui).compact()


@command("diff", "show what the last turn changed in the project")
async def _diff(tui: Tui, arg: str) -> None:
    text = tui.renderer.last_turn_diff
    if text:
        tui.out(tui.renderer.ansi.diff(text, limit=400))
    else:
        tui.say("no turn has changed files in this session yet", "yellow")


@command("undo", "put the project back as it was before the last changing turn: /undo [redo] [force]")
async def _undo(tui: Tui, arg: str) -> None:
    words = arg.split()
    if any(w not in ("redo", "force") for w in words):
        tui.say("usage: /undo [redo] [force]", "yellow")
    elif _between_turns(tui, "undo"):
        _open(tui).undo(redo="redo" in words, force="force" in words)


@command("mcp", "MCP servers of this session: /mcp · /mcp add NAME [--url URL] [-- CMD ARGS] · /mcp remove NAME")
async def _mcp(tui: Tui, arg: str) -> None:
    import shlex

    feed = _open(tui)
    try:
        words = shlex.split(arg)
    except ValueError as exc:
        tui.say(f"/mcp: {exc}", "yellow")
        return
    if not words or words == ["list"]:
        servers = feed.mcp_servers()
        rows = [f"  {s.name:<16} {'up' if s.connected else 'down':<5} {s.tools:>3} tools  {s.kind:<15} {s.target}"
                f"  ({s.source})" for s in servers]
        tui.say("\n".join(["MCP servers:", *rows]) if rows else
                "no MCP servers in this session; /mcp add NAME -- CMD ARGS or /mcp add NAME --url URL adds one")
    elif words[0] == "remove" and len(words) == 2:
        def remove() -> None:
            feed.remove_mcp_server(words[1])
            tui.say(f"MCP server {words[1]!r}: removed from this session")

        _after_turn(tui, f"/mcp remove {words[1]}", remove)
    elif words[0] == "add" and len(words) >= 2:
        table = _server_table(tui, words[1:])
        if table is not None:
            feed.add_mcp_server(words[1], table)
            tui.say(f"MCP server {words[1]!r}: starting; its tools are offered from the next model call "
                    "(this session only; `auger mcp add` keeps it for every session)")
    else:
        tui.say("usage: /mcp · /mcp add NAME [--url URL] [-- CMD ARGS] · /mcp remove NAME", "yellow")


def _server_table(tui: Tui, words: list[str]) -> dict | None:
    """`NAME [OPTIONS] [-- CMD ARGS…]` read with `auger mcp add`'s own options; None (said why) if wrong."""
    import argparse

    from auger.frontends.cli_support import CliError
    from auger.frontends.mcp_commands import add_server_arguments, server_table
    from auger.tools.mcp_config import parse_server

    class Parser(argparse.ArgumentParser):
        def error(self, message: str):  # a message in the transcript, never an exit
            raise CliError(message)

    cut = words.index("--") if "--" in words else len(words)
    parser = Parser(prog="/mcp add", add_help=False)
    parser.add_argument("name")
    add_server_arguments(parser)
    try:
        args = parser.parse_args(words[:cut])
        table = server_table(args, words[cut + 1:])
        parse_server(args.name, table, source="session")
    except (CliError, ValueError) as exc:
        tui.say(f"/mcp add: {exc}", "yellow")
        return None
    return table


@command("review", "review changes in a read-only session: /review [--base BRANCH | --commit SHA] [FOCUS…]")
async def _review(tui: Tui, arg: str) -> None:
    import asyncio
    import shlex

    from auger.changes.review_change import ReviewTarget

    try:
        words = shlex.split(arg)
    except ValueError as exc:
        tui.say(f"/review: {exc}", "yellow")
        return
    target = ReviewTarget()
    if words[:1] in (["--base"], ["--commit"]):
        if len(words) < 2:
            tui.say(f"usage: /review {words[0]} REF [FOCUS…]", "yellow")
            return
        target = ReviewTarget("base" if words[0] == "--base" else "commit", words[1])
        words = words[2:]
    if any(task for task in _REVIEWS if not task.done()):
        tui.say("a review is already running; its report comes here when it is done", "yellow")
        return
    tui.say(f"reviewing {target.describe()} in a read-only session… (you can go on meanwhile)")
    task = asyncio.create_task(_run_review(tui, target, " ".join(words)))
    _REVIEWS.add(task)
    task.add_done_callback(_REVIEWS.discard)


_REVIEWS: set = set()  # running /review tasks (kept referenced until they end)


async def _run_review(tui: Tui, target: Any, instructions: str) -> None:
    from auger.frontends.review_cli import render_report
    from auger.frontends.tui.render import clean, no_color, review_line
    from auger.protocol import events as ev

    def progress(envelope: Any) -> None:
        event = envelope.event
        if isinstance(event, (ev.EnteredReviewMode, ev.ExitedReviewMode)):
            tui.say(f"  {review_line(event)}", "dim")
        elif isinstance(event, ev.ToolCallStarted):
            args = event.arguments if isinstance(event.arguments, dict) else {}
            detail = str(args.get("command") or args.get("path") or args.get("pattern") or "")[:80]
            tui.say(clean(f"  review ▸ {event.name} {detail}"), "dim")

    outcome = await tui.sessions.review(target, instructions, progress)
    if isinstance(outcome, str):
        tui.say(f"/review: {outcome}", "yellow")
    else:
        change, result = outcome
        tui.out(await render_report(tui.root, change, result, colour=not no_color()))
    tui.redraw()


@command("agents", "the sub-agents the model can start and those this session started · /agents cancel [ID…]")
async def _agents(tui: Tui, arg: str) -> None:
    import time

    from auger.frontends.tui.render import clean

    feed = _open(tui)
    words = arg.split()
    if words[:1] == ["cancel"]:  # background agents outlive the turn (and Esc): stopping them is asked for here
        ids, running = words[1:], feed.running_agents()
        if not ids and not running:
            tui.say("no sub-agent is running", "yellow")
            return
        feed.cancel_agents(ids)
        tui.say(f"cancelling {', '.join(ids) if ids else f'{running} running sub-agent(s)'}…")
        return
    if words:
        tui.say("usage: /agents lists them; /agents cancel [ID…] stops those still running (all, or the ids given)",
                "yellow")
        return
    definitions, runs = feed.agents()
    rows = [clean(f"  {a.name:<12} {a.mode or 'as parent':<9} {a.description[:60]}  ({a.source})") for a in definitions]
    now = time.monotonic()
    started = [clean(f"  {r.id:<10} {r.agent.name:<12} {r.status:<10} {'background' if r.background else 'foreground'} "
                     f"{now - r.started:5.0f}s  {' '.join(r.prompt.split())[:50]}") for r in runs]
    tui.say("\n".join(["agents the model can start (spawn_agent):", *rows,
                        *(["started in this session (/agents cancel [ID…] stops those still running):", *started]
                          if started else ["none started in this session yet"])]))


@command("backend", "which agent runs the turns: /backend · /backend NAME · /backend auger (auger's own loop)")
async def _backend(tui: Tui, arg: str) -> None:
    from auger.frontends.tui.render import clean

    feed = _open(tui)
    if not arg:
        rows = [clean(f"  {b.name:<16} {b.status:<14} {b.label}  {b.detail}".rstrip()) for b in feed.backends()]
        tui.say("\n".join([f"turns are run by: {feed.backend or 'auger'}; other agents (/backend NAME):", *rows]))
    else:
        _after_turn(tui, f"/backend {arg}", lambda: feed.set_backend("" if arg in ("auger", "none", "native") else arg))


@command("pending", "pending changes: /pending · /pending apply|discard [PATH…] · /pending rewind SEQ")
async def _pending(tui: Tui, arg: str) -> None:
    feed = _open(tui)
    words = arg.split()
    lines = await feed.pending_lines()
    if lines is None:
        tui.say("this session writes its changes directly; start one with --pending to hold them back", "yellow")
    elif not words:
        tui.say("\n".join([f"{len(lines)} file(s) pending (/pending apply or discard [PATH…]):", *lines])
                if lines else "nothing is pending")
    elif words[0] in ("apply", "discard") and _between_turns(tui, f"{words[0]}ing pending changes"):
        feed.pending(words[0], words[1:])
    elif words[0] == "rewind" and len(words) == 2 and words[1].isdigit():
        if _between_turns(tui, "rewinding pending changes"):
            feed.pending("rewind", words[1:])
    elif words[0] not in ("apply", "discard"):
        tui.say("usage: /pending · /pending apply|discard [PATH…] · /pending rewind SEQ", "yellow")


@command("rollback", "drop the last N user turns from the context: /rollback [N]")
async def _rollback(tui: Tui, arg: str) -> None:
    if not arg.isdigit() and arg:
        tui.say("usage: /rollback [N]", "yellow")
        return
    if _between_turns(tui, "rollback"):
        _open(tui).rollback(int(arg or 1))


@command("new", "start a new session")
async def _new(tui: Tui, arg: str) -> None:
    if await tui.switch():
        tui.say("new session")


@command("fork", "continue in a copy of this session")
async def _fork(tui: Tui, arg: str) -> None:
    source = _open(tui).id
    if await tui.switch(fork=source):
        tui.say(f"forked {source[:8]} → {_open(tui).id[:8]}")


@command("resume", "resume a recent session of this project: /resume [ID]")
async def _resume(tui: Tui, arg: str) -> None:
    if arg:
        from auger.frontends.tui.sessions import OpenError

        try:
            record = await tui.sessions.find(arg)
        except OpenError as exc:
            tui.say(f"✗ {exc}", "red")
            return
        await tui.switch(resume=record.id)
        return
    await offer_sessions(tui)


@command("sessions", "list recent sessions of this project")
async def _sessions(tui: Tui, arg: str) -> None:
    records = await tui.sessions.recent(20)
    tui.say("\n".join(_session_rows(records, tui)) if records else "no stored sessions in this project")


@command("skills", "list the skills the agent can use (/NAME uses one)")
async def _skills(tui: Tui, arg: str) -> None:
    skills = _open(tui).skills()
    prompts = _open(tui).prompts()
    rows = [f"  /{n:<16} {d}" for n, d in skills] or ["  (no skills: add .auger/skills/NAME/SKILL.md)"]
    rows += ["custom prompts:", *([f"  /{n:<16} {d}" for n, d in prompts] or ["  (none)"])]
    tui.say("skills:\n" + "\n".join(rows), "")


@command("cost", "tokens and cost of this session")
async def _cost(tui: Tui, arg: str) -> None:
    tokens, cost = _open(tui).usage()
    tui.say(f"{tokens:,} tokens · " + ("cost unknown (a price is missing)" if cost is None else f"${cost:.4f}"))


@command("status", "session, model, mode, sandbox, context")
async def _status(tui: Tui, arg: str) -> None:
    r = tui.renderer
    left = "unknown" if r.context_left is None else f"{r.context_left:.0f}%"
    tui.say(f"session {_open(tui).id} · model {_open(tui).model} · {_open(tui).mode} mode · sandbox {r.sandbox} · "
            f"context left {left} · branch {tui.branch or '-'} · {_open(tui).root}")


@command("init", "draft AGENTS.md in a read-only session (or improve it): see the diff, then write it or not")
async def _init(tui: Tui, arg: str) -> None:
    import asyncio

    if any(task for task in _INITS if not task.done()):
        tui.say("an AGENTS.md is already being drafted; its diff comes here when it is done", "yellow")
        return
    tui.say("drafting AGENTS.md in a read-only session… (you can go on meanwhile)")
    task = asyncio.create_task(_run_init(tui))
    _INITS.add(task)
    task.add_done_callback(_INITS.discard)


_INITS: set = set()  # the running /init task (kept referenced until it ends)


async def _run_init(tui: Tui) -> None:
    from auger.engine.session.init_doc import settle
    from auger.frontends.tui.render import clean

    def progress(envelope: Any) -> None:
        from auger.protocol import events as ev

        event = envelope.event
        if isinstance(event, ev.ToolCallStarted):
            args = event.arguments if isinstance(event.arguments, dict) else {}
            detail = str(args.get("command") or args.get("path") or args.get("pattern") or "")[:80]
            tui.say(clean(f"  init ▸ {event.name} {detail}"), "dim")

    draft = await tui.sessions.draft_agents_md(progress)
    if isinstance(draft, str):
        tui.say(f"/init: {draft}", "yellow")
        return
    short = draft.session.id[:8]
    tui.say(f"{'an improved' if draft.existed else 'a new'} AGENTS.md (pending in session {short}):")
    tui.out(tui.renderer.ansi.diff(draft.diff, limit=400))
    answer = await tui.choose("write AGENTS.md?", [("y", "yes, write it"), ("n", "no, drop it")])
    warnings = await settle(draft, None if answer is None else answer == "y")
    for warning in warnings:
        tui.say(f"! {warning}", "yellow")
    if answer is None:
        tui.say(f"AGENTS.md left pending: `auger pending apply -s {short}` writes it")
    elif answer == "y" and not warnings:
        tui.say(f"wrote AGENTS.md: the next turn reads it (`auger undo {short}` takes it back)")
    elif answer == "n":
        tui.say("AGENTS.md not written")
    tui.redraw()


# -- memory: the instruction files ---------------------------------------------------------
@command("memory", "the instruction files in force: /memory lists them, /memory N opens one in $EDITOR")
async def _memory(tui: Tui, arg: str) -> None:
    files = _open(tui).memory_files()
    if not arg:
        rows = [f"  {n}. {f.kind:<8} {f.path}" + ("" if f.exists else "  (not created yet)")
                for n, f in enumerate(files, 1)]
        tui.say("\n".join(["instruction files (/memory N opens one in $EDITOR; #text adds a line):", *rows]), "")
        return
    if not arg.isdigit() or not 1 <= int(arg) <= len(files):
        tui.say(f"usage: /memory · /memory N (1 to {len(files)})", "yellow")
        return
    path = files[int(arg) - 1].path
    status = await tui.edit(path)
    if status != 0:
        tui.say(f"the editor exited with status {status}", "yellow")
    tui.say(f"{path}: the next turn reads it as it is now")


async def add_note(tui: Tui, note: str) -> None:
    """`#text`: add `text` as a line to an instruction file the user picks, and show the change."""
    from auger.context.memory import NoteRefused, append_line

    if not note:
        tui.say("usage: #TEXT adds TEXT as a line to the project's or your global AGENTS.md", "yellow")
        return
    targets = _open(tui).note_targets()
    key = await tui.choose("add it to:", [(key, label) for key, label, _, _ in targets])
    chosen = [(root, rel) for k, _, root, rel in targets if k == key]
    if not chosen:
        tui.say("not added", "yellow")
        return
    root, rel = chosen[0]
    try:
        root.mkdir(parents=True, exist_ok=True)
        diff = append_line(root, rel, note)
    except (NoteRefused, OSError) as exc:
        tui.say(f"✗ not added: {exc}", "red")
        return
    tui.say(f"added to {root / rel}; the next turn reads it")
    tui.out(tui.renderer.ansi.diff(diff))


# -- per-turn settings ---------------------------------------------------------------------
@command("effort", "show or set the reasoning effort: /effort low|medium|high|… · /effort default")
async def _effort(tui: Tui, arg: str) -> None:
    feed = _open(tui)
    if not arg:
        tui.say(f"reasoning effort: {feed.effort or 'the provider default'}; set it with /effort low|medium|high "
                "(models that take one: the Responses API), /effort default for the configured one")
        return
    effort = "" if arg == "default" else arg
    _after_turn(tui, f"/effort {arg}", lambda: feed.set_turn_context(effort=effort))


@command("cd", "show or change the working directory inside the project: /cd DIR")
async def _cd(tui: Tui, arg: str) -> None:
    import os

    feed = _open(tui)
    if not arg:
        tui.say(f"working directory: {feed.cwd}; /cd DIR changes it (inside the project)")
        return
    target = os.path.normpath(os.path.join(feed.cwd, os.path.expanduser(arg)))
    _after_turn(tui, f"/cd {arg}", lambda: feed.set_turn_context(cwd=target))


@command("quit", "leave (the session is saved; a server's goes on running there)")
async def _quit(tui: Tui, arg: str) -> None:
    tui.done = True
    if tui.ps.app.is_running:
        tui.ps.app.exit(exception=EOFError())


@command("handoff", "move this session into the auger serve on its store (or /handoff URL) and follow it there")
async def _handoff(tui: Tui, arg: str) -> None:
    from auger.frontends.tui.handoff import hand_off

    await hand_off(tui, arg.strip() or None)


@command("detach", "leave a server's session running there (as Ctrl-D does)")
async def _detach(tui: Tui, arg: str) -> None:
    if not tui.sessions.where:
        tui.say("this session runs in this terminal: /handoff moves it into a server first, then /detach "
                "leaves it running there", "yellow")
        return
    await _quit(tui, arg)


# -- the session picker ----------------------------------------------------------------
def _session_rows(records, tui: Tui) -> list[str]:
    rows = []
    for i, r in enumerate(records, 1):
        current = " (this one)" if tui.feed is not None and r.id == _open(tui).id else ""
        when = time.strftime("%m-%d %H:%M", time.localtime(r.updated))
        running = " (running)" if r.running else ""
        rows.append(f"  {i:>2}. {r.id[:8]}  {when}  {(r.title or '(untitled)')[:50]}{running}{current}")
    return rows


async def offer_sessions(tui: Tui) -> bool:
    """Print the picker; True when there was something to pick (the answer comes as the next input)."""
    records = await tui.sessions.recent(10)
    where = tui.sessions.where
    if not records:
        tui.say(f"no sessions in {where}" if where else "no stored sessions in this project")
        return False
    tui.picking = records
    tui.say((f"sessions in {where} (running first):\n" if where else "recent sessions in this project:\n")
            + "\n".join(_session_rows(records, tui)))
    tui.redraw()
    return True


async def pick_session(tui: Tui, answer: str) -> None:
    records, tui.picking = tui.picking or [], None
    if answer.isdigit() and 1 <= int(answer) <= len(records):
        record = records[int(answer) - 1]
        if await tui.switch(resume=record.id):
            await tui.send_initial()
            return
    else:
        tui.say("no session chosen", "yellow")
    if tui.feed is None:  # started as `auger resume`: go on with a new session
        await tui.switch()
        await tui.send_initial()
