"""Interactive processes: `exec_command` starts one, `write_stdin` types into it and reads what it printed.

A process runs in the session's sandbox like any command (tools/shell.py `spawn_command`: read-only as its
classification and the mode say), in a session and process group of its own, either

    on a pseudo-terminal (tty): auger holds the master; the slave is the command's stdin, stdout and stderr
        and its controlling terminal, so `\\u0003` typed into it makes the terminal interrupt the
        foreground job, as Ctrl-C at a keyboard does; or
    on pipes: stdout and stderr merged into one; `\\u0003` is sent as SIGINT to its process group and
        `\\u0004` closes its stdin (there is no terminal to do either).

Its output is read as it comes, whether or not a call is waiting: into `pending`, which the next call takes
(capped, head and tail kept, like a shell command's), and live to the front ends of the call that waits on
it now (and, when a call begins, what was already waiting for it).

`ExecSessions` holds one runtime's processes (a sub-agent has its own: it cannot type into its parent's),
numbered 1, 2, 3… as the model addresses them. At most `max_sessions` run at once: a new one ends the one
unused for longest first. One unused for `idle_timeout` seconds ends. All end when the runtime's owner
does (the session, or the sub-agent), and a process that exited is ended (its group killed) by the call
that reports its exit. Ending one kills its whole process group.
"""

from __future__ import annotations

import asyncio
import codecs
import os
import signal
import time
from typing import Any, Callable

from auger.tools.base import ExecLimits, SessionToolState, ToolError
from auger.tools.shell import PIPE_GRACE, CapturedStream, kill_group

INTERRUPT, END_OF_INPUT = "\x03", "\x04"
ENDED_KEPT = 64  # why a session ended, remembered for the model's next write to it


class ExecSession:
    """One interactive process: its input, its output as it arrives, whether it exited."""

    def __init__(self, session_id: int, command: str, proc: Any, *, tty: bool, read_fd: int,
                 write_fd: int | None, effect: str) -> None:
        self.id = session_id
        self.command = command
        self.proc = proc
        self.tty = tty
        self.effect = effect  # the starting command's classification
        self.readonly = bool(getattr(proc, "readonly", False))  # the sandbox holds it read-only
        self.started = self.last_used = time.monotonic()
        self.busy = False  # a call is waiting on it
        self.pending = CapturedStream()
        self.eof = False
        self._read_fd = read_fd
        self._write_fd = write_fd  # None once stdin was closed (pipes)
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._listener: Callable[[str], None] | None = None
        self._changed = asyncio.Event()
        os.set_blocking(read_fd, False)
        if write_fd is not None:
            os.set_blocking(write_fd, False)
        loop = asyncio.get_running_loop()
        loop.add_reader(read_fd, self._readable)
        self._exit = loop.create_task(self._watch_exit(), name=f"exec-session-{session_id}")

    @property
    def exited(self) -> bool:
        return self.proc.returncode is not None

    def _readable(self) -> None:
        try:
            data = os.read(self._read_fd, 65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:  # EIO: the terminal's last other end closed
            data = b""
        if not data:
            self._stop_reading()
        else:
            self.pending.add(data)
            if self._listener is not None:
                self._listener(self._decoder.decode(data))
        self._changed.set()

    def _stop_reading(self) -> None:
        if not self.eof:
            self.eof = True
            try:
                asyncio.get_running_loop().remove_reader(self._read_fd)
            except (RuntimeError, ValueError):
                pass

    async def _watch_exit(self) -> None:
        await self.proc.wait()
        self._changed.set()

    async def send(self, chars: str) -> None:
        """Type `chars`: to the terminal as they are, or (pipes) into stdin, Ctrl-C as SIGINT to the group and
        Ctrl-D as the end of input."""
        if self.tty:
            await self._write(chars.encode("utf-8", "surrogateescape"))
            return
        text = ""
        for char in chars:
            if char == INTERRUPT:
                await self._write(text.encode("utf-8", "surrogateescape"))
                text = ""
                self.proc.signal_group(signal.SIGINT)
            elif char == END_OF_INPUT:
                await self._write(text.encode("utf-8", "surrogateescape"))
                text = ""
                self._close_input()
            else:
                text += char
        await self._write(text.encode("utf-8", "surrogateescape"))

    async def _write(self, data: bytes) -> None:
        while data:
            if self._write_fd is None:
                raise ToolError(f"write_stdin: session {self.id}'s input is closed (it was sent \\u0004)")
            try:
                written = os.write(self._write_fd, data)
            except BlockingIOError:
                await self._writable()
                continue
            except OSError as exc:  # the process closed its end
                raise ToolError(f"write_stdin: session {self.id} takes no more input ({exc.strerror})") from None
            data = data[written:]

    async def _writable(self) -> None:
        assert self._write_fd is not None
        loop = asyncio.get_running_loop()
        ready = loop.create_future()
        fd = self._write_fd
        loop.add_writer(fd, _settle, ready)
        try:
            await ready
        finally:
            loop.remove_writer(fd)

    def _close_input(self) -> None:
        if self._write_fd is not None:
            os.close(self._write_fd)
            self._write_fd = None

    async def collect(self, until: float, listener: Callable[[str], None]) -> CapturedStream:
        """What it printed since the last call, until the monotonic time `until` or its exit (then the rest of
        its output, briefly: a child of it may hold the output open); `listener` hears it live, starting with
        what was already waiting."""
        self.busy = True
        if self.pending.head or self.pending.tail:
            listener(self.pending.text())
        self._listener = listener
        try:
            while True:
                self._changed.clear()
                if self.exited:  # the rest of its output, unless a child of it keeps the other end open
                    deadline = time.monotonic() + PIPE_GRACE
                    while not self.eof and time.monotonic() < deadline:
                        self._changed.clear()
                        await _wait(self._changed, deadline - time.monotonic())
                    break
                remaining = until - time.monotonic()
                if remaining <= 0:
                    break
                await _wait(self._changed, remaining)
        finally:
            self._listener = None
            self.busy = False
            self.last_used = time.monotonic()
            taken, self.pending = self.pending, CapturedStream()
        return taken

    async def end(self) -> None:
        """Kill its process group and let go of its terminal or pipes."""
        self._stop_reading()
        try:
            await kill_group(self.proc)
        finally:
            self._exit.cancel()
            await asyncio.gather(self._exit, return_exceptions=True)
            for fd in {self._read_fd, self._write_fd} - {None, -1}:  # a terminal's master is both
                assert fd is not None
                os.close(fd)
            self._read_fd, self._write_fd = -1, None


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


async def _wait(event: asyncio.Event, timeout: float) -> None:
    try:
        await asyncio.wait_for(event.wait(), max(timeout, 0.0))
    except TimeoutError:
        pass


class ExecSessions:
    """One runtime's interactive processes, by the number the model knows them by."""

    def __init__(self, limits: ExecLimits) -> None:
        self.limits = limits
        self._sessions: dict[int, ExecSession] = {}
        self._ended: dict[int, str] = {}
        self._next = 0
        self._reaper: asyncio.TimerHandle | None = None
        self._ending: set[asyncio.Task[None]] = set()

    def __len__(self) -> int:
        return len(self._sessions)

    def next_id(self) -> int:
        self._next += 1
        return self._next

    def get(self, session_id: int) -> ExecSession | None:
        return self._sessions.get(session_id)

    def missing(self, session_id: int) -> str:
        """Why there is no session `session_id`, for the model."""
        live = ", ".join(str(i) for i in self._sessions) or "none"
        why = self._ended.get(session_id)
        if why is not None:
            return f"session {session_id} has ended ({why}); running sessions: {live}"
        return f"there is no session {session_id}; running sessions: {live}"

    async def add(self, session: ExecSession) -> list[str]:
        """Keep a new session; notes for the model about sessions ended to make room for it."""
        notes = []
        while len(self._sessions) >= self.limits.max_sessions:
            idle = [s for s in self._sessions.values() if not s.busy]
            if not idle:
                break
            oldest = min(idle, key=lambda s: s.last_used)
            await self.end(oldest, f"ended to make room: at most {self.limits.max_sessions} run at once "
                                   "(exec_sessions_max)")
            notes.append(f"Session {oldest.id} (`{_short(oldest.command)}`) was ended to make room: at most "
                         f"{self.limits.max_sessions} sessions run at once.")
        self._sessions[session.id] = session
        self._schedule()
        return notes

    async def end(self, session: ExecSession, why: str) -> None:
        if self._sessions.pop(session.id, None) is not None:
            self._ended[session.id] = why
            while len(self._ended) > ENDED_KEPT:
                del self._ended[next(iter(self._ended))]
        await session.end()

    def touched(self) -> None:
        """A call finished with a session: its idle time starts now."""
        self._schedule()

    def _schedule(self) -> None:
        if self._reaper is not None:
            self._reaper.cancel()
            self._reaper = None
        idle = [s for s in self._sessions.values() if not s.busy]
        if not idle:
            return
        due = min(s.last_used for s in idle) + self.limits.idle_timeout
        self._reaper = asyncio.get_running_loop().call_later(max(0.0, due - time.monotonic()), self._reap)

    def _reap(self) -> None:
        self._reaper = None
        now = time.monotonic()
        for session in list(self._sessions.values()):
            if not session.busy and now - session.last_used >= self.limits.idle_timeout:
                task = asyncio.create_task(self.end(session, f"unused for {self.limits.idle_timeout:g}s "
                                                             "(exec_session_idle_timeout)"))
                self._ending.add(task)
                task.add_done_callback(self._ending.discard)
        self._schedule()

    async def close(self) -> None:
        """End every session (the runtime's owner is ending)."""
        if self._reaper is not None:
            self._reaper.cancel()
            self._reaper = None
        sessions = list(self._sessions.values())
        await asyncio.gather(*(self.end(s, "the session ended") for s in sessions), *self._ending,
                             return_exceptions=True)


def sessions_of(state: SessionToolState) -> ExecSessions:
    """The runtime's interactive processes, made at the first exec_command."""
    if state.exec_sessions is None:
        state.exec_sessions = ExecSessions(state.exec_limits)
    assert isinstance(state.exec_sessions, ExecSessions)
    return state.exec_sessions


def _short(command: str, limit: int = 60) -> str:
    line = " ".join(command.split())
    return line if len(line) <= limit else line[:limit - 1] + "…"
