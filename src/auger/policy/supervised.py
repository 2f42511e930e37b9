"""auger's side of the session sandbox: start the supervisor, run commands through it.

See `auger.policy.supervisor` for what runs inside and the message format. One
`SessionSandbox` per session; every command it runs shares the sandbox's
namespaces. Closing it (or auger dying) ends every process the session started.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
from pathlib import Path

READY_TIMEOUT = 10.0
CLOSE_TIMEOUT = 3.0


class SandboxGone(OSError):
    """The supervisor is not running (it failed to start, or was killed)."""


class SupervisedProcess:
    """A command running under the supervisor: the subset of asyncio's Process the shell tool uses."""

    def __init__(self, owner: SessionSandbox, request_id: int, pid: int):
        self._owner = owner
        self._id = request_id
        self.pid = pid  # in the sandbox's PID namespace: what commands see
        self.returncode: int | None = None
        self.readonly = False  # whether it runs without write access (set by its starter)
        self._done = asyncio.get_running_loop().create_future()

    def _finished(self, status: int) -> None:
        self.returncode = os.waitstatus_to_exitcode(status)
        if not self._done.done():
            self._done.set_result(self.returncode)

    async def wait(self) -> int:
        return await asyncio.shield(self._done)

    def signal_group(self, sig: int) -> None:
        """Signal the command's process group (and its leader), also after the leader exited."""
        try:
            self._owner._send({"op": "kill", "id": self._id, "sig": int(sig)})
        except SandboxGone:
            pass  # the sandbox is gone, and every process in it


class SessionSandbox:
    def __init__(self, proc: asyncio.subprocess.Process, sock: socket.socket, log: Path):
        self._proc = proc
        self._sock = sock
        self._log = log
        self._next = 0
        self._started: dict[int, asyncio.Future] = {}
        self._running: dict[int, SupervisedProcess] = {}
        self._ready = asyncio.get_running_loop().create_future()
        self.alive = True
        asyncio.get_running_loop().add_reader(sock.fileno(), self._on_readable)

    @classmethod
    async def start(cls, launch_argv: list[str], env: dict[str, str], log: Path) -> SessionSandbox:
        """Start `launch_argv` (the sandbox) with the supervisor at its end. Not waited for: the
        session starts at once, and the first command waits (see `run`)."""
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            argv = [*launch_argv, "--fd", str(child.fileno())]
            with open(log, "wb") as err:
                proc = await asyncio.create_subprocess_exec(
                    *argv, env=env, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
                    stderr=err, pass_fds=(child.fileno(),), start_new_session=True)
        except BaseException:
            parent.close()
            raise
        finally:
            child.close()
        parent.setblocking(False)
        return cls(proc, parent, log)

    async def ready(self) -> None:
        """Wait until the supervisor serves; raise SandboxGone saying why it does not."""
        if self._ready.done() and self._ready.exception() is None:
            return
        try:
            await asyncio.wait_for(asyncio.shield(self._ready), READY_TIMEOUT)
        except (TimeoutError, SandboxGone) as exc:
            self._gone()
            raise SandboxGone(f"the session sandbox did not start: {self.failure() or exc}") from None

    def failure(self) -> str:
        """The supervisor's last complaint on stderr, if any."""
        try:
            lines = self._log.read_text("utf-8", "replace").strip().splitlines()
        except OSError:
            return ""
        return lines[-1] if lines else ""

    def _on_readable(self) -> None:
        while True:
            try:
                data = self._sock.recv(65536)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                data = b""
            if not data:
                self._gone()
                return
            try:
                message = json.loads(data)
            except ValueError:
                continue
            self._dispatch(message)

    def _dispatch(self, message: dict) -> None:
        if message.get("ready"):
            if not self._ready.done():
                self._ready.set_result(True)
            return
        request_id = message.get("id")
        if not isinstance(request_id, int):
            return  # not an answer to any request of ours
        if "status" in message:
            proc = self._running.pop(request_id, None)
            if proc is not None:
                proc._finished(int(message["status"]))
            return
        future = self._started.pop(request_id, None)
        if future is not None and not future.done():
            if "pid" in message:  # registered now: its status may come in the same read
                proc = SupervisedProcess(self, request_id, int(message["pid"]))
                self._running[request_id] = proc
                future.set_result(proc)
            else:
                future.set_exception(SandboxGone(str(message.get("error", "the command could not start"))))

    def _gone(self) -> None:
        """The supervisor ended: nothing it started is alive any more."""
        if not self.alive:
            return
        self.alive = False
        try:
            asyncio.get_running_loop().remove_reader(self._sock.fileno())
        except (RuntimeError, ValueError):
            pass
        if not self._ready.done():
            self._ready.set_exception(SandboxGone("the sandbox supervisor exited"))
            self._ready.exception()  # retrieved: a start that nobody awaits must not warn
        for future in self._started.values():
            if not future.done():
                future.set_exception(SandboxGone("the sandbox supervisor exited"))
        self._started.clear()
        for proc in self._running.values():
            proc._finished(9)  # as if SIGKILLed: the namespace is gone
        self._running.clear()

    def _send(self, message: dict, fds: tuple[int, ...] = ()) -> None:
        if not self.alive:
            raise SandboxGone("the session sandbox is not running")
        data = json.dumps(message).encode()
        try:
            if fds:
                socket.send_fds(self._sock, [data], list(fds))
            else:
                self._sock.send(data)
        except OSError as exc:
            raise SandboxGone(f"the session sandbox is not running ({exc.strerror or exc})") from None

    async def run(self, argv: list[str], cwd: Path, env: dict[str, str], stdio: tuple[int, int, int],
                  readonly: bool, writable: tuple[str, ...] = (), tty: bool = False) -> SupervisedProcess:
        """Start a command in the sandbox with the given stdin/stdout/stderr fds (the caller keeps its copies);
        `tty`: stdin is a pseudo-terminal, made the controlling terminal of the command's session."""
        await self.ready()
        self._next += 1
        request_id = self._next
        future = asyncio.get_running_loop().create_future()
        self._started[request_id] = future
        self._send({"op": "run", "id": request_id, "argv": argv, "cwd": str(cwd), "env": env,
                    "readonly": readonly, "writable": list(writable), "tty": tty}, stdio)
        return await future

    async def close(self) -> None:
        """End the supervisor and, with it, every process of the session."""
        if self.alive:
            self._gone()
        try:
            self._sock.close()
        except OSError:
            pass
        if self._proc.returncode is None:
            try:
                await asyncio.wait_for(self._proc.wait(), CLOSE_TIMEOUT)
            except TimeoutError:
                try:
                    os.killpg(self._proc.pid, 9)
                except (ProcessLookupError, PermissionError):
                    pass
                await self._proc.wait()


class LocalProcess:
    """An unsandboxed command, with the same surface as SupervisedProcess."""

    def __init__(self, proc: asyncio.subprocess.Process):
        self._proc = proc
        self.pid = proc.pid

    @property
    def returncode(self) -> int | None:
        return self._proc.returncode

    async def wait(self) -> int:
        return await self._proc.wait()

    def signal_group(self, sig: int) -> None:
        try:
            os.killpg(self.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


async def spawn_local(argv: list[str], cwd: Path, env: dict[str, str], stdio: tuple[int, int, int],
                      tty: bool = False) -> LocalProcess:
    """Start a command directly, in a new session (process group) of its own; `tty`: stdin is a
    pseudo-terminal, made that session's controlling terminal (as the supervisor does)."""
    proc = await asyncio.create_subprocess_exec(*argv, cwd=cwd, env=env, stdin=stdio[0], stdout=stdio[1],
                                                stderr=stdio[2], start_new_session=True,
                                                preexec_fn=_terminal_taker() if tty else None)
    return LocalProcess(proc)


def _terminal_taker():
    """What the child runs after setsid: stdin becomes its controlling terminal. Its modules are imported
    here, in auger: the child of a process with threads must take no lock (an import would)."""
    import fcntl
    import termios

    return lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0)
