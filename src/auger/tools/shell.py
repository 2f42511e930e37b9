"""The `shell` tool: run a command in its own process group, stream its lines, summarise for the model.

The model sees a compact summary (exit code, line counts, the tail of stderr and
stdout); the full output, capped, is stored so `recall` can fetch any part later.
Every way a command can end — exit, timeout, interrupt, orphaned children holding
the pipes — ends with the whole process group gone.

When the session has the editor's terminals (`ToolContext.state.client_terminal`, ACP), a command
the policy let through as a change runs there instead, so the user watches it; read-only commands
stay here, in the read-only sandbox that backs the classifier.
"""

from __future__ import annotations

import asyncio
import os
import posixpath
import shutil
import signal
import time
from dataclasses import field
from pathlib import Path
from typing import Any, Callable

from auger.context.instructions import COMMAND_SHELL
from auger.lazy_dataclass import Deferred, dataclass
from auger.policy.paths import PathEscape, display, resolve_inside
from auger.tools.base import (
    LOCAL_MUTATION, READ_ONLY, Classification, ClientTerminal, SessionToolState, ToolContext, ToolError, ToolResult,
    ToolSpec,
)

DEFAULT_TIMEOUT = 60
MAX_TIMEOUT = 300
MAX_COMMAND_BYTES = 100_000  # Linux refuses any single argument over 128 KiB (MAX_ARG_STRLEN)
STDERR_TAIL = 50
STDOUT_TAIL = 20
LINE_CUT = 500
STREAM_CAP = 100_000  # bytes kept per stream (head and tail halves): 200 KB in all
PIPE_GRACE = 0.3  # seconds to drain pipes after the command exits
KILL_GRACE = 1.0  # seconds between SIGTERM and SIGKILL

COMMAND_ENV = {"PAGER": "cat", "GIT_PAGER": "cat", "NO_COLOR": "1", "TERM": "dumb"}
# System locations only: PATH may start with project dirs where a command could plant a `bash`.
SYSTEM_BIN = "/usr/bin:/bin:/usr/local/bin:/run/current-system/sw/bin"


@dataclass
class CapturedStream(Deferred):
    """Counts every line, keeps the head and tail of the text within a byte cap."""

    head: bytearray = field(default_factory=bytearray)
    tail: bytearray = field(default_factory=bytearray)
    dropped: int = 0
    lines: int = 0
    last_partial: bool = False

    def add(self, chunk: bytes) -> None:
        self.lines += chunk.count(b"\n")
        self.last_partial = not chunk.endswith(b"\n")
        room = STREAM_CAP // 2 - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            excess = len(self.tail) - STREAM_CAP // 2
            if excess > 0:
                del self.tail[:excess]
                self.dropped += excess

    @property
    def line_count(self) -> int:
        return self.lines + (1 if self.last_partial and (self.head or self.tail) else 0)

    def text(self) -> str:
        joined = self.head.decode("utf-8", "replace")
        if self.dropped:
            joined += f"\n[... {self.dropped} bytes not kept ...]\n"
        return joined + self.tail.decode("utf-8", "replace")

    def last_lines(self, n: int) -> tuple[list[str], int]:
        """The last n lines (each cut at LINE_CUT chars), and how many earlier lines were left out."""
        lines = self.text().splitlines()
        shown = lines[-n:] if n else []
        cut = [ln if len(ln) <= LINE_CUT else ln[:LINE_CUT] + f" [... {len(ln) - LINE_CUT} chars cut]"
               for ln in shown]
        return cut, max(0, self.line_count - len(shown))


async def _shell(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    command: str = args["command"]
    check_command(command, "shell", "command")
    patch = shell_patch(command)
    if patch is not None:
        return await run_shell_patch(patch, args, ctx)
    cwd = command_cwd(args, ctx, "shell")
    env = {**(ctx.env if ctx.env is not None else os.environ), **COMMAND_ENV}
    # The classifier's verdict decides whether the sandbox lets the command write (plan and
    # safe modes): computed here again, from the same arguments the gate saw.
    effect = classify(args, ctx.root).effect
    if args.get("background"):
        return await _start_background(command, cwd, env, ctx, effect)
    timeout = min(args.get("timeout", DEFAULT_TIMEOUT), MAX_TIMEOUT)
    terminal = ctx.state.client_terminal
    if terminal is not None and effect != READ_ONLY:
        return await _run_in_terminal(terminal, command, cwd, timeout, ctx)
    return await _run(command, cwd, env, timeout, ctx, effect)


def check_command(command: str, tool: str, name: str) -> None:
    """Refuse a command line no shell can run, in words the model can act on."""
    if not command.strip():
        raise ToolError(f"{tool}: {name!r} is empty")
    if "\x00" in command:
        raise ToolError(f"{tool}: {name!r} contains a NUL byte, which no command line can carry")
    if len(command.encode("utf-8", "surrogateescape")) > MAX_COMMAND_BYTES:
        raise ToolError(f"{tool}: {name!r} is too long ({len(command):,} characters; the limit is "
                        f"{MAX_COMMAND_BYTES:,} bytes): write a script file and run that instead")


def command_cwd(args: dict[str, Any], ctx: ToolContext, tool: str) -> Path:
    """Where a command runs: its `workdir` beneath the root, else the session's working directory."""
    cwd = ctx.cwd or ctx.root
    if args.get("workdir"):
        try:
            cwd = resolve_inside(ctx.root, args["workdir"])
        except PathEscape as exc:
            raise ToolError(f"{tool}: {exc}") from None
        if not cwd.is_dir():
            raise ToolError(f"{tool}: workdir {display(ctx.root, cwd)!r} is not a directory")
    return cwd


async def _run_in_terminal(terminal: ClientTerminal, command: str, cwd, timeout: int, ctx: ToolContext) -> ToolResult:
    """Run the command in the editor's terminal; summarised like a local run (the terminal merges
    stderr into stdout, so all of it is counted as stdout)."""
    started = time.monotonic()
    output, code, timed_out = await terminal.run(bash_argv(command), cwd, timeout, ctx.call_id)
    out = CapturedStream()
    out.add(output.encode("utf-8", "surrogateescape"))
    return _summarise(command, code, timed_out, timeout, time.monotonic() - started, out, CapturedStream(),
                      ctx.call_id)


def shell_patch(command: str):
    """The patch in `apply_patch <<'EOF' … EOF`, which is applied by auger, never run by bash."""
    if "apply_patch" not in command and "applypatch" not in command:
        return None  # most commands: no need to load the patch module
    from auger.changes.apply_patch import extract_from_shell

    return extract_from_shell(command)


async def run_shell_patch(patch, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    """Apply a patch sent as a command (`args`: the command's, for its `workdir`) as the apply_patch tool does."""
    from auger.tools.patch import run_patch

    return await run_patch(patch.patch, ctx, _patch_dir(patch, args))


def _patch_dir(patch, args: dict[str, Any]) -> str | None:
    """The directory a patch sent as a command is relative to: the call's `workdir`, then the `cd`
    before `apply_patch` from there (as bash would go). apply_patch walks it beneath the root."""
    parts = [part for part in (args.get("workdir"), patch.workdir) if part]
    return posixpath.join(*parts) if parts else None


async def preview(args: dict[str, Any], ctx: ToolContext) -> str:
    """The diff of a patch sent as a command (for its approval); other commands have none ("")."""
    patch = shell_patch(args["command"])
    if patch is None:
        return ""
    from auger.tools.patch import preview_patch

    return await preview_patch(patch.patch, ctx, _patch_dir(patch, args))


def bash_argv(command: str) -> list[str]:
    """bash, the shell whose grammar the classifier parses (dash would read the line differently), and
    the one the environment context names to the model (`COMMAND_SHELL`)."""
    bash = shutil.which(COMMAND_SHELL, path=SYSTEM_BIN)
    if bash is None:
        raise ToolError("shell: bash is not installed (commands are run with bash, whose grammar auger checks); "
                        "install bash to run commands")
    return [bash, "-c", command]


async def spawn_command(argv: list[str], cwd: Path, env: dict[str, str], stdio: tuple[int, int, int],
                        ctx: ToolContext, effect: str, *, tty: bool = False, tool: str = "shell"):
    """Start `argv` in the session's sandbox (read-only as `effect` and the caller's mode say), in a process
    group of its own, with stdin, stdout and stderr from `stdio` (the caller keeps its copies); `tty`: stdin
    is a pseudo-terminal, which becomes the controlling terminal. Without a sandbox it runs directly."""
    from auger.policy.supervised import SandboxGone, spawn_local

    try:
        if ctx.sandbox is None:
            return await spawn_local(argv, cwd, env, stdio, tty)
        return await ctx.sandbox.spawn(argv, cwd, env, stdio, effect, ctx.mode() if ctx.mode is not None else None,
                                       tty)
    except SandboxGone as exc:
        raise ToolError(f"{tool}: {exc}; the command did not run") from None


async def _run(command: str, cwd, env: dict[str, str], timeout: int, ctx: ToolContext, effect: str) -> ToolResult:
    started, wall_start = time.monotonic(), time.time()
    out, err = CapturedStream(), CapturedStream()
    # Our own pipes, not asyncio's: asyncio's Process.wait() also waits for its pipes to
    # close, which a backgrounded grandchild can hold open forever.
    (out_r, out_w), (err_r, err_w) = os.pipe(), os.pipe()
    devnull = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    try:
        proc = await spawn_command(bash_argv(command), cwd, env, (devnull, out_w, err_w), ctx, effect)
    except BaseException:
        for fd in (out_r, err_r):
            os.close(fd)
        raise
    finally:
        for fd in (out_w, err_w, devnull):
            os.close(fd)
    readers = [asyncio.create_task(pump_lines(out_r, out, "stdout", ctx.emit_output)),
               asyncio.create_task(pump_lines(err_r, err, "stderr", ctx.emit_output))]
    timed_out = False
    try:
        try:
            await asyncio.wait_for(proc.wait(), timeout)
        except TimeoutError:
            timed_out = True
            await kill_group(proc)
        # Children that outlive the shell may hold the pipes open; don't wait for them.
        _, pending = await asyncio.wait(readers, timeout=PIPE_GRACE)
        if pending:
            proc.signal_group(signal.SIGKILL)
            await asyncio.wait(readers, timeout=PIPE_GRACE)
    except asyncio.CancelledError:
        await asyncio.shield(kill_group(proc))
        raise
    finally:
        for task in readers:
            task.cancel()
        await asyncio.gather(*readers, return_exceptions=True)
        proc.signal_group(signal.SIGKILL)  # nothing of this command survives it
    elapsed = time.monotonic() - started
    result = _summarise(command, proc.returncode, timed_out, timeout, elapsed, out, err, ctx.call_id)
    await note_sandbox(result, ctx, proc, err.text(), wall_start)
    return result


async def note_sandbox(result: ToolResult, ctx: ToolContext, proc, stderr: str, since: float) -> None:
    """Tell the model (and the runtime, which may ask to run it again outside) when the sandbox or its proxy
    is why a command failed; `since`: when it started (time.time()). A refused host can hide behind exit 0
    (curl without -f), so this is asked whatever the exit code."""
    if ctx.sandbox is None:
        return
    blocked = await ctx.sandbox.explain(proc.returncode, stderr, since, readonly=getattr(proc, "readonly", False))
    if blocked:
        result.output = f"[sandbox] {blocked}\n{result.output}"
        result.sandbox_denial = blocked


async def pump_lines(fd: int, sink: CapturedStream, name: str, emit: Callable[[str, str], None]) -> None:
    """Copy a pipe into the capture, emitting (`emit(name, text)`) whole lines live as they arrive; closes
    the pipe."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 20)
    pipe = os.fdopen(fd, "rb", buffering=0)
    try:
        transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
    except BaseException:
        pipe.close()
        raise
    pending = b""
    try:
        while True:
            chunk = await reader.read(65536)
            if not chunk:
                break
            sink.add(chunk)
            pending += chunk
            cut = pending.rfind(b"\n")
            if cut >= 0:
                emit(name, pending[:cut + 1].decode("utf-8", "replace"))
                pending = pending[cut + 1:]
            elif len(pending) > 65536:
                emit(name, pending.decode("utf-8", "replace"))
                pending = b""
    finally:
        transport.close()
        if pending:
            emit(name, pending.decode("utf-8", "replace"))


def _summarise(command: str, code: int | None, timed_out: bool, timeout: int, elapsed: float,
               out: CapturedStream, err: CapturedStream, call_id: str) -> ToolResult:
    if timed_out:
        status = f"Command timed out after {timeout}s and was killed"
    elif code is not None and code < 0:
        status = f"Exit code: killed by {signal_name(-code)}"
    else:
        status = f"Exit code: {code}"
    parts = [f"{status} | stdout: {out.line_count} lines | stderr: {err.line_count} lines"]
    stored = False
    for label, stream, keep in (("stderr", err, STDERR_TAIL), ("stdout", out, STDOUT_TAIL)):
        lines, hidden = stream.last_lines(keep)
        if not lines:
            continue
        header = f"--- {label}" + (f" (last {len(lines)} of {stream.line_count} lines)" if hidden else "") + " ---"
        parts.append(header + "\n" + "\n".join(lines))
        stored = stored or hidden > 0 or any("chars cut]" in ln for ln in lines)
    if stored:
        parts.append(f"[full output stored: recall with call_id={call_id!r}]")
    full = (f"$ {command}\n{status} (after {elapsed:.1f}s)\n--- stdout ---\n{out.text()}\n"
            f"--- stderr ---\n{err.text()}")
    return ToolResult(output="\n".join(parts), ok=not timed_out and code == 0, full_output=full,
                      metadata={"exit_code": code, "timed_out": timed_out, "duration_s": round(elapsed, 3)})


async def _start_background(command: str, cwd, env: dict[str, str], ctx: ToolContext, effect: str) -> ToolResult:
    log_fd, log_path = _open_log(ctx)
    devnull = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    try:
        proc = await spawn_command(bash_argv(command), cwd, env, (devnull, log_fd, log_fd), ctx, effect)
    finally:
        os.close(log_fd)
        os.close(devnull)
    ctx.state.background[proc.pid] = proc
    return ToolResult(
        output=(f"Started in the background: pid {proc.pid}. Output (stdout and stderr) goes to {log_path}; "
                f"read it with e.g. `tail -n 50 {log_path}`. It is stopped when the session ends "
                f"(or stop it with `kill {proc.pid}`)."),
        metadata={"pid": proc.pid, "log": str(log_path)})


def _open_log(ctx: ToolContext) -> tuple[int, object]:
    """A background log, named by a counter (never by the call id) and opened without following
    links: in the confinement's private dir, which no command can write, when there is one;
    else (no sandbox: commands can write everywhere anyway) in the session's scratch dir."""
    if ctx.sandbox is not None:
        return ctx.sandbox.open_log()
    ctx.state.scratch_dir.mkdir(parents=True, exist_ok=True)
    for n in range(1, 100_000):
        path = ctx.state.scratch_dir / f"background-{n}.log"
        try:
            return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644), path
        except FileExistsError:
            continue
    raise ToolError("shell: too many background logs in this session")


async def kill_group(proc) -> None:
    """SIGTERM the process group, then SIGKILL whatever is left after a grace period."""
    if proc.returncode is None:
        proc.signal_group(signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), KILL_GRACE)
        except TimeoutError:
            pass
    proc.signal_group(signal.SIGKILL)
    if proc.returncode is None:
        await proc.wait()


async def end_processes(state: SessionToolState) -> None:
    """End every process a runtime started that outlives its call: background commands' process groups and
    interactive sessions (exec_command's)."""
    procs = list(state.background.values())
    state.background.clear()
    await asyncio.gather(*(kill_group(p) for p in procs), return_exceptions=True)
    if state.exec_sessions is not None:
        await state.exec_sessions.close()


def signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def classify(args: dict[str, Any], root) -> Classification:
    """Per-command effect: parse the command line, strictest simple command wins."""
    from auger.policy.effects import analyze_command

    cwd = root
    if args.get("workdir"):
        try:
            cwd = resolve_inside(root, args["workdir"])
        except PathEscape:
            pass  # the handler refuses it with a clear message
    if shell_patch(args["command"]) is not None:  # applied beneath the root like the apply_patch tool
        return Classification(LOCAL_MUTATION, args["command"])
    analysis = analyze_command(args["command"], root, cwd)
    return Classification(analysis.effect, args["command"], analysis.commands, analysis.outside_paths,
                          analysis.reasons, outside_real=analysis.outside_real)


SHELL = ToolSpec(
    name="shell",
    description=(
        "Run a one-shot command (bash -c) in the project root or `workdir`. Returns the exit code and the last "
        f"{STDERR_TAIL} stderr and {STDOUT_TAIL} stdout lines (all of it via `recall`). Timeout {DEFAULT_TIMEOUT}s "
        f"by default (max {MAX_TIMEOUT}s). background=true for servers and watchers: returns the pid at once. "
        "Prefer the file tools for reading and editing."
    ),
    parameters={
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "The command line."},
            "timeout": {"type": "integer", "minimum": 1, "description": "Seconds before the command is killed."},
            "background": {"type": "boolean", "description": "Start it and return immediately."},
            "workdir": {"type": "string", "description": "Directory inside the project to run in."},
        },
        "required": ["command"],
    },
    handler=_shell,
    effect=LOCAL_MUTATION,
    parallel_safe=False,
    classifier=classify,
    previewer=preview,
)

TOOLS = [SHELL]
