"""The interactive command tools, named and shaped as Codex names them (models trained on them use them well):

    exec_command{cmd, workdir?, tty?, yield_time_ms?, max_output_tokens?}  start a command; after
        `yield_time_ms` (default 10 s) return its output so far and, while it runs, the session id to type to
    write_stdin{session_id, chars, yield_time_ms?, max_output_tokens?}  type `chars` (empty: just poll) and
        return what it printed since (default wait 250 ms)

Policy: the command is classified, decided, approved and sandboxed exactly as `shell`'s (the same
classifier, read-only sandbox in plan mode and for what safe mode judged read-only; an `apply_patch`
heredoc is applied by auger). Keystrokes stay inside that decision: input to a process the sandbox holds
read-only is read-only; input to one that runs writable has the starting command's effect (a change at
least: whatever it is told to do, it may do) and needs no approval of its own (`Classification.continues`),
so plan mode refuses it (after a switch to plan only a poll or Ctrl-C reaches it) and the mutation hooks
(snapshots for undo) run before it. Polling and Ctrl-C alone are read-only.

What the model reads is Codex's shape — wall time, "Process exited with code N" or "Process running with
session ID N", the output — as a terminal would leave it (escape sequences dropped, carriage returns
applied), cut in the middle to `max_output_tokens`; the whole output of the call is kept for `recall`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import fcntl
import os
import struct
import termios
import time
from typing import TYPE_CHECKING, Any

from auger.lazy_regex import lazy_compile
from auger.tools.base import (
    LOCAL_MUTATION, READ_ONLY, Classification, ToolContext, ToolError, ToolResult, ToolSpec,
)
from auger.tools.shell import (
    COMMAND_ENV, CapturedStream, bash_argv, check_command, classify as classify_command, command_cwd, note_sandbox,
    preview as preview_command, run_shell_patch, shell_patch, signal_name, spawn_command,
)

if TYPE_CHECKING:  # the processes' registry loads with the first call, not with the tool's schema
    from auger.tools.exec_sessions import ExecSession, ExecSessions

EXEC, WRITE = "exec_command", "write_stdin"
EXEC_YIELD_MS, WRITE_YIELD_MS = 10_000, 250
MIN_YIELD_MS, MAX_YIELD_MS = 250, 30_000
MAX_OUTPUT_TOKENS = 10_000
SEND_TIMEOUT = 10.0  # seconds a process may take to read what is typed into it
BYTES_PER_TOKEN = 4
KEYSTROKES = "an interactive process: what is typed into it later runs without asking again"
WINDOW = (40, 120)  # rows, columns of a session's terminal

_ESCAPES = lazy_compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")


def _as_shell(args: dict[str, Any]) -> dict[str, Any]:
    """exec_command's arguments as shell's, for the shared classifier, previewer and patch path."""
    return {"command": args["cmd"], **({"workdir": args["workdir"]} if args.get("workdir") else {})}


def classify_exec(args: dict[str, Any], root) -> Classification:
    """shell's verdict on the command; an approval of it says that what is typed into it is not asked again."""
    c = classify_command(_as_shell(args), root)
    if c.effect == READ_ONLY or shell_patch(args["cmd"]) is not None:
        return c
    return dataclasses.replace(c, reasons=(*c.reasons, KEYSTROKES))


async def _preview_exec(args: dict[str, Any], ctx: ToolContext) -> str:
    return await preview_command(_as_shell(args), ctx)


async def _exec_command(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    command: str = args["cmd"]
    check_command(command, EXEC, "cmd")
    patch = shell_patch(command)
    if patch is not None:
        return await run_shell_patch(patch, _as_shell(args), ctx)
    cwd = command_cwd(args, ctx, EXEC)
    env = {**(ctx.env if ctx.env is not None else os.environ), **COMMAND_ENV}
    effect = classify_exec(args, ctx.root).effect  # as the gate judged it: the sandbox holds it to that
    tty = bool(args.get("tty"))
    from auger.tools.exec_sessions import sessions_of

    registry = sessions_of(ctx.state)
    started, wall_start = time.monotonic(), time.time()
    session = await _start(registry.next_id(), command, cwd, env, ctx, effect, tty)
    notes = await registry.add(session)
    try:
        output = await session.collect(started + _yield_s(args, EXEC_YIELD_MS), _live(ctx))
    except BaseException:  # interrupted before the model learned its id: nobody could reach it
        await registry.end(session, "its exec_command was interrupted")
        raise
    return await _report(registry, session, output, started, args, ctx, notes, wall_start)


async def _start(session_id: int, command: str, cwd, env: dict[str, str], ctx: ToolContext, effect: str,
                 tty: bool) -> ExecSession:
    """Start the command on a terminal or on pipes; auger keeps only its own ends."""
    ours: tuple[int, int]
    theirs: tuple[int, ...]
    if tty:
        master, slave = os.openpty()
        os.set_inheritable(master, False)
        fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", *WINDOW, 0, 0))
        ours, theirs, stdio = (master, master), (slave,), (slave, slave, slave)
    else:
        (in_r, in_w), (out_r, out_w) = os.pipe(), os.pipe()
        ours, theirs, stdio = (out_r, in_w), (in_r, out_w), (in_r, out_w, out_w)
    try:
        proc = await spawn_command(bash_argv(command), cwd, env, stdio, ctx, effect, tty=tty, tool=EXEC)
    except BaseException:
        for fd in set(ours):
            os.close(fd)
        raise
    finally:
        for fd in theirs:
            os.close(fd)
    from auger.tools.exec_sessions import ExecSession

    return ExecSession(session_id, command, proc, tty=tty, read_fd=ours[0], write_fd=ours[1], effect=effect)


async def _write_stdin(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    from auger.tools.exec_sessions import sessions_of

    registry = sessions_of(ctx.state)
    session = registry.get(args["session_id"])
    if session is None:
        raise ToolError(f"{WRITE}: {registry.missing(args['session_id'])}")
    started, wall_start = time.monotonic(), time.time()
    chars: str = args.get("chars", "")
    if chars and not session.exited:
        try:
            await asyncio.wait_for(session.send(chars), SEND_TIMEOUT)
        except TimeoutError:
            raise ToolError(f"{WRITE}: session {session.id} did not read its input within {SEND_TIMEOUT:g}s (part "
                            "of it may have been taken); poll it with chars \"\", or send \\u0003") from None
    try:
        output = await session.collect(started + _yield_s(args, WRITE_YIELD_MS), _live(ctx))
    except BaseException:  # an interrupt stops the wait, not the process
        registry.touched()
        raise
    return await _report(registry, session, output, started, args, ctx, [], wall_start)


def _yield_s(args: dict[str, Any], default_ms: int) -> float:
    return min(max(args.get("yield_time_ms", default_ms), MIN_YIELD_MS), MAX_YIELD_MS) / 1000


def _live(ctx: ToolContext):
    return lambda text: ctx.emit_output("stdout", text)


async def _report(registry: ExecSessions, session: ExecSession, output: CapturedStream, started: float,
                  args: dict[str, Any], ctx: ToolContext, notes: list[str], wall_start: float) -> ToolResult:
    """Codex's shape: wall time, exit or session id, output cut to the token budget; a process that exited
    is ended here (what it left running in its group with it)."""
    elapsed = time.monotonic() - started
    code = session.proc.returncode
    if code is None:
        status = f"Process running with session ID {session.id}"
    elif code < 0:
        status = f"Process was killed by {signal_name(-code)}"
    else:
        status = f"Process exited with code {code}"
    text = screen_text(output.text())
    shown, tokens = _cut(text, args.get("max_output_tokens", MAX_OUTPUT_TOKENS), ctx.call_id)
    lines = [*notes, f"Wall time: {elapsed:.1f} seconds", status]
    if shown != text:
        lines.append(f"Original token count: {tokens}")
    result = ToolResult("\n".join([*lines, "Output:", shown]), ok=code in (None, 0),
                        full_output=f"$ {session.command}\n{status}\n{text}",
                        metadata={"session_id": session.id, "exit_code": code, "running": code is None})
    if code is None:
        registry.touched()
    else:
        await registry.end(session, f"it exited: {status[len('Process '):]}")
        await note_sandbox(result, ctx, session.proc, text, wall_start)
    return result


def _cut(text: str, max_tokens: int, call_id: str) -> tuple[str, int]:
    """The text within `max_tokens` (its head and tail, the middle cut), and its own size in tokens."""
    data = text.encode("utf-8", "surrogateescape")
    tokens = (len(data) + BYTES_PER_TOKEN - 1) // BYTES_PER_TOKEN
    budget = max(max_tokens, 1) * BYTES_PER_TOKEN
    if len(data) <= budget:
        return text, tokens
    half = budget // 2
    head = data[:half].decode("utf-8", "ignore")
    tail = data[-half:].decode("utf-8", "ignore")
    cut = tokens - max_tokens
    return f"{head}\n[… about {cut} tokens cut; recall with call_id={call_id!r} shows all of it …]\n{tail}", tokens


def screen_text(raw: str) -> str:
    """Terminal output as text: escape sequences dropped, and each line as the terminal leaves it after its
    carriage returns (a progress bar: its last state)."""
    lines = []
    for line in _ESCAPES.sub("", raw).replace("\r\n", "\n").split("\n"):
        if "\r" in line:
            line = line.rstrip("\r").rsplit("\r", 1)[-1]
        lines.append(line)
    return "\n".join(lines)


def classify_input(args: dict[str, Any], ctx: ToolContext) -> Classification:
    """Keystrokes stay inside the decision that started the process: read-only where the sandbox holds it
    read-only (or only a poll or Ctrl-C is sent), else the starting command's effect — a change at least —
    continuing without an approval of its own (plan mode refuses it)."""
    registry = ctx.state.exec_sessions
    if registry is None:  # no process was started yet: the handler says there is none
        return Classification(READ_ONLY, f"session {args['session_id']}")
    from auger.tools.exec_sessions import INTERRUPT, ExecSessions  # loaded with the registry already

    session = registry.get(args["session_id"]) if isinstance(registry, ExecSessions) else None
    chars: str = args.get("chars", "")
    if session is None:
        return Classification(READ_ONLY, f"session {args['session_id']}")  # the handler says it is gone
    subject = f"input to session {session.id} (`{session.command}`): {chars!r}"
    if session.readonly or not chars.strip(INTERRUPT):
        return Classification(READ_ONLY, subject)
    effect = LOCAL_MUTATION if session.effect == READ_ONLY else session.effect
    return Classification(effect, subject, continues=f"input to session {session.id}, which policy let run")


_YIELD = {"type": "integer", "minimum": 0, "description": "ms to wait for output"}
_TOKENS = {"type": "integer", "minimum": 1, "description": f"output cap (default {MAX_OUTPUT_TOKENS})"}

EXEC_COMMAND = ToolSpec(
    name=EXEC,
    description=(f"Run a command (bash) that may keep running: returns its output after yield_time_ms (default "
                 f"{EXEC_YIELD_MS}) and, if it still runs, its session ID for write_stdin. tty=true for a "
                 "terminal (REPLs, prompts). Use shell for one-shot commands."),
    parameters={
        "type": "object",
        "properties": {
            "cmd": {"type": "string"},
            "workdir": {"type": "string"},
            "tty": {"type": "boolean"},
            "yield_time_ms": _YIELD,
            "max_output_tokens": _TOKENS,
        },
        "required": ["cmd"],
    },
    handler=_exec_command,
    effect=LOCAL_MUTATION,
    classifier=classify_exec,
    previewer=_preview_exec,
)

WRITE_STDIN = ToolSpec(
    name=WRITE,
    description=(f"Type chars into a running exec_command session (\"\" to poll; \\u0003 is Ctrl-C) and return "
                 f"its new output after yield_time_ms (default {WRITE_YIELD_MS})."),
    parameters={
        "type": "object",
        "properties": {
            "session_id": {"type": "integer"},
            "chars": {"type": "string"},
            "yield_time_ms": _YIELD,
            "max_output_tokens": _TOKENS,
        },
        "required": ["session_id"],
    },
    handler=_write_stdin,
    effect=LOCAL_MUTATION,
    context_classifier=classify_input,
)

TOOLS = [EXEC_COMMAND, WRITE_STDIN]
