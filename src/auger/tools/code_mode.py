"""Code mode: `run_code{code, timeout?}` runs a short Python program whose functions are the session's tools.

Why: a chore of many small calls (read 40 files, count, grep) costs a model round trip per step and puts
every output in the conversation; one program makes the calls, and only what it prints comes back.

The program runs in the session's sandbox (tools/code_runner.py says how it talks to auger). Its prelude is
generated here from the caller's catalog (`ToolContext.call_tool`, engine/turn/inner_calls.py): one function per
tool, named after it (`read_file(path, offset=None, limit=None)`, `shell(command, …)`,
`mcp__server__tool(…)`), returning the text the model would have read and raising `ToolFailed` when the call
was refused or failed. Every call travels back to auger and through the tool runtime, one by one: hooks,
policy, approval (headless: refused as a direct call would be), sandbox, snapshots, shown as children of the
run_code call. The program itself runs read-only in plan mode (where the sandbox confines writes), and like
a shell command that changes files otherwise; it is stopped by an interrupt, by its `timeout` (its own time:
the clock stands still while a call it made runs, an approval included) and by the inner calls' loop guard.
"""

from __future__ import annotations

import asyncio
import json
import keyword
import os
import re
import time
from pathlib import Path
from typing import Any, Sequence

from auger.tools.base import (
    LOCAL_MUTATION, READ_ONLY, Classification, ToolCaller, ToolContext, ToolError, ToolResult, ToolSpec,
)
from auger.tools.shell import COMMAND_ENV, CapturedStream, kill_group, note_sandbox, pump_lines, spawn_command

NAME = "run_code"
DEFAULT_TIMEOUT, MAX_TIMEOUT = 60, 300
SHOWN_CHARS = 16_000  # of the program's printed output, head and tail
REQUEST_LIMIT = 64 << 20  # bytes of one call the program sends (a file it writes)
_PRIVATE = {"_call", "_given", "ToolFailed"}


def prelude(specs: Sequence[ToolSpec]) -> str:
    """Python source defining one function per tool: required arguments first, the optional ones defaulting to
    None (left out of the call), anything else by keyword (`**extra`, which the tool's own validation judges)."""
    lines = ["def _given(extra, **named):",
             "    return {**{k: v for k, v in named.items() if v is not None}, **extra}", ""]
    taken = set(_PRIVATE)
    for spec in specs:
        name = _identifier(spec.name)
        if name is None or name in taken:
            continue
        taken.add(name)
        props = spec.parameters.get("properties", {})
        required = [p for p in spec.parameters.get("required", []) if p in props]
        params = [p for p in required if _identifier(p) == p] + [
            f"{p}=None" for p in props if p not in required and _identifier(p) == p]
        named = ", ".join(f"{p}={p}" for p in props if _identifier(p) == p)
        lines += [f"def {name}({', '.join([*params, '**extra'])}):",
                  f"    return _call({spec.name!r}, _given(extra{', ' if named else ''}{named}))", ""]
    return "\n".join(lines)


def _identifier(name: str) -> str | None:
    """A Python name for a tool or argument name (`mcp__my-server__x` → `mcp__my_server__x`), or None."""
    ident = re.sub(r"\W", "_", name)
    if not ident or ident[0].isdigit():
        return None
    return ident + "_" if keyword.iskeyword(ident) else ident


def classify(args: dict[str, Any], ctx: ToolContext) -> Classification:
    """Read-only in plan mode where the sandbox holds the program read-only (each call it makes is judged on its
    own); otherwise a change, as a shell command that may write is."""
    mode = ctx.mode() if ctx.mode is not None else None
    confined = ctx.sandbox is not None and ctx.sandbox.writes_confined
    effect = READ_ONLY if mode == "plan" and confined else LOCAL_MUTATION
    return Classification(effect, args["code"], reasons=("a Python program; each tool call it makes is decided on "
                                                         "its own",))


async def _run_code(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    code: str = args["code"]
    if not code.strip():
        raise ToolError(f"{NAME}: 'code' is empty")
    if ctx.call_tool is None:
        raise ToolError(f"{NAME}: no tools to call here")
    from auger.policy.sandbox import _python, _source

    timeout = min(args.get("timeout", DEFAULT_TIMEOUT), MAX_TIMEOUT)
    argv = [_python(), "-I", "-X", "utf8", "-u", "-c", _source(Path(__file__).with_name("code_runner.py"))]
    env = {**(ctx.env if ctx.env is not None else os.environ), **COMMAND_ENV}
    effect = classify(args, ctx).effect
    started, wall_start = time.monotonic(), time.time()
    (to_r, to_w), (from_r, from_w), (out_r, out_w) = os.pipe(), os.pipe(), os.pipe()
    try:
        proc = await spawn_command(argv, ctx.cwd or ctx.root, env, (to_r, from_w, out_w), ctx, effect, tool=NAME)
    except BaseException:
        for fd in (to_w, from_r, out_r):
            os.close(fd)
        raise
    finally:
        for fd in (to_r, from_w, out_w):
            os.close(fd)
    out = CapturedStream()
    printing = asyncio.create_task(pump_lines(out_r, out, "stdout", ctx.emit_output))
    session = _Program(proc, ctx.call_tool, to_w, from_r)
    stopped = ""
    try:
        async with asyncio.timeout(timeout) as limit:
            stopped = await session.serve(code, limit)
            if not stopped:
                await proc.wait()
    except TimeoutError:
        stopped = f"it ran past its timeout of {timeout}s"
    finally:
        await asyncio.shield(kill_group(proc))
        session.close()
        await asyncio.wait([printing], timeout=0.3)
        printing.cancel()
        await asyncio.gather(printing, return_exceptions=True)
    result = _summarise(proc.returncode, stopped, out, session, time.monotonic() - started, code, ctx.call_id)
    await note_sandbox(result, ctx, proc, out.text(), wall_start)
    return result


class _Program:
    """auger's end of a running program's channel: its calls in, their answers out."""

    def __init__(self, proc: Any, tools: ToolCaller, to_fd: int, from_fd: int) -> None:
        self.proc = proc
        self.tools = tools
        self.log: list[str] = []
        self.failed = 0
        self._fds = [to_fd, from_fd]  # ours until a transport owns them
        self._transports: list[asyncio.BaseTransport] = []

    async def serve(self, code: str, limit: asyncio.Timeout) -> str:
        """Answer the program's calls until it ends; why it was stopped, if it was ("" when it ended itself).
        `limit` bounds the program's own time: it stands still while a call runs (an approval may wait)."""
        loop = asyncio.get_running_loop()
        to_fd, from_fd = self._fds
        reader = asyncio.StreamReader(limit=REQUEST_LIMIT)
        read, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader),
                                               os.fdopen(from_fd, "rb", buffering=0))
        self._transports.append(read)
        self._fds.remove(from_fd)
        write, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin,
                                                        os.fdopen(to_fd, "wb", buffering=0))
        self._transports.append(write)
        self._fds.remove(to_fd)
        writer = asyncio.StreamWriter(write, protocol, None, loop)
        names = {spec.name: spec for spec in self.tools.specs()}
        if not await _send(writer, {"prelude": prelude(list(names.values())), "code": code}):
            return ""
        while True:
            try:
                line = await reader.readline()
            except ValueError:
                return f"it sent a call larger than {REQUEST_LIMIT >> 20} MB"
            if not line:
                return ""
            try:
                request = json.loads(line)
                name, call_args, call_id = request["tool"], request["args"], request["id"]
            except (ValueError, KeyError, TypeError):
                return "it wrote something other than a call on auger's channel"
            left = (limit.when() or loop.time()) - loop.time()
            limit.reschedule(None)
            try:
                result = await self.tools.call(name, call_args) if name in names else ToolResult(
                    f"Error: there is no tool named {name!r}", ok=False)
            except ToolError as exc:  # a limit: the program may make no more calls
                self.log.append(f"{name}: stopped: {exc}")
                return str(exc)
            limit.reschedule(loop.time() + left)
            self.failed += not result.ok
            self.log.append(f"{name} {json.dumps(call_args, ensure_ascii=False)[:200]} -> "
                            f"{'ok' if result.ok else 'failed'} ({len(result.output)} chars)")
            if not await _send(writer, {"id": call_id, "ok": result.ok, "output": result.output}):
                return ""

    def close(self) -> None:
        for transport in self._transports:
            transport.close()
        for fd in self._fds:
            os.close(fd)
        self._fds.clear()


async def _send(writer: asyncio.StreamWriter, message: dict[str, Any]) -> bool:
    """Write one line to the program; False when it is gone."""
    writer.write((json.dumps(message) + "\n").encode("utf-8", "surrogateescape"))
    try:
        await writer.drain()
    except (ConnectionError, OSError):
        return False
    return True


def _summarise(code: int | None, stopped: str, out: CapturedStream, program_run: _Program, elapsed: float,
               program: str, call_id: str) -> ToolResult:
    log, failed = program_run.log, program_run.failed
    head = f"Exit code: {code}" if not stopped else f"Stopped: {stopped}"
    text = out.text()
    shown = text if len(text) <= SHOWN_CHARS else (
        text[:SHOWN_CHARS // 2] + f"\n[… {len(text) - SHOWN_CHARS:,} characters cut; recall with call_id="
        f"{call_id!r} shows all of it …]\n" + text[-SHOWN_CHARS // 2:])
    output = f"{head} | {len(log)} tool calls ({failed} failed) | {elapsed:.1f}s\n{shown}".rstrip()
    full = "\n".join([f"--- program ---\n{program}", f"--- {head} ---", f"--- output ---\n{text}",
                      "--- tool calls ---", *log])
    return ToolResult(output, ok=not stopped and code == 0, full_output=full,
                      metadata={"exit_code": code, "stopped": stopped or None, "calls": len(log)})


RUN_CODE = ToolSpec(
    name=NAME,
    description=("Run a Python program in which each of your tools is a function of the same name and arguments, "
                 "returning its output text (ToolFailed on failure). Only what it prints comes back: batch many "
                 f"calls into one. timeout: seconds (default {DEFAULT_TIMEOUT})."),
    parameters={
        "type": "object",
        "properties": {
            "code": {"type": "string"},
            "timeout": {"type": "integer", "minimum": 1},
        },
        "required": ["code"],
    },
    handler=_run_code,
    effect=LOCAL_MUTATION,
    context_classifier=classify,
    calls_tools=True,
)

TOOLS = [RUN_CODE]
