"""auger's side of the session sandbox: start it, run commands through its supervisor, end it.

See `auger.policy.supervisor` for what runs inside and the message format. One `SessionSandbox` per
live sandbox of a session (auger.policy.confinement starts one at the session's first command and ends
it when it has been idle a while); every command it runs shares the sandbox's namespaces. Closing it
(or auger dying) ends every process it started.

Under bubblewrap, the sandbox is bwrap around a holder: pid 1 of the sandbox's PID namespace, a shell
reading its stdin until auger closes the other end. The template (auger.policy.template) starts bwrap,
and forks the supervisor into the holder's namespaces once the holder runs. Under Landlock the
supervisor confines itself with the session's ruleset.
"""

from __future__ import annotations

import asyncio
import json
import marshal
import os
import shutil
import signal
import socket
import weakref
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from auger.policy.sandbox import Sandbox, SandboxPolicy

READY_TIMEOUT = 10.0
STARTS_AT_ONCE = 4 * (os.cpu_count() or 1)  # sandboxes a process starts at the same time (more wait their turn)
CLOSE_TIMEOUT = 3.0
SYSTEM_BIN = "/usr/bin:/bin"
# The holder: lets go of every descriptor but its input (commands can reach a process of theirs such as this
# one), says it runs (bubblewrap has set everything up by then), and waits for the end of its input.
HOLDER_SCRIPT = "exec 2>/dev/null 3>&- 4>&- 5<&-; echo; exec >/dev/null; read -r line"


def _starting() -> asyncio.Semaphore:
    """The running loop's turn to start a sandbox."""
    loop = asyncio.get_running_loop()
    if loop not in _starts:
        _starts[loop] = asyncio.Semaphore(STARTS_AT_ONCE)
    return _starts[loop]


_starts: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = weakref.WeakKeyDictionary()


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


async def _exited(pidfd: int, timeout: float) -> bool:
    """Wait until the process behind `pidfd` exits (at most `timeout` seconds); whether it did."""
    loop = asyncio.get_running_loop()
    done = loop.create_future()

    def readable() -> None:
        if not done.done():
            done.set_result(None)

    loop.add_reader(pidfd, readable)
    try:
        await asyncio.wait_for(done, timeout)
        return True
    except TimeoutError:
        return False
    finally:
        loop.remove_reader(pidfd)


class SessionSandbox:
    def __init__(self, sock: socket.socket, log: Path, keep: int = -1):
        self._sock = sock
        self._log = log
        self._keep = keep  # bubblewrap: the holder's stdin (closing it ends the sandbox)
        self._supervisor_pidfd = -1  # Landlock: the supervisor's, to end it if it does not end itself
        self._next = 0
        self._started: dict[int, asyncio.Future] = {}
        self._asked: dict[int, asyncio.Future[int]] = {}  # "left" questions not answered yet
        self._running: dict[int, SupervisedProcess] = {}
        self._ready = asyncio.get_running_loop().create_future()
        self._ended = asyncio.get_running_loop().create_future()  # done when the supervisor's socket closed
        self.alive = True
        asyncio.get_running_loop().add_reader(sock.fileno(), self._on_readable)

    @classmethod
    async def start(cls, sandbox: Sandbox, policy: SandboxPolicy, env: dict[str, str], log: Path) -> SessionSandbox:
        """Start the sandbox and wait until its supervisor serves; SandboxGone saying why it does not.
        `env`: auger's own, to plan the sandbox with (its HOME's secrets are hidden); the supervisor
        itself runs with almost none: each command brings its own. At most STARTS_AT_ONCE start at a
        time in a process: a thousand sessions starting their sandboxes together would otherwise share
        the processors so thinly that none would be ready in time."""
        async with _starting():
            box = await cls._start(sandbox, policy, env, log)
            try:
                await box.ready()
            except BaseException:
                await box.close()
                raise
        return box

    @classmethod
    async def _start(cls, sandbox: Sandbox, policy: SandboxPolicy, env: dict[str, str], log: Path) -> SessionSandbox:
        """Ask the template for the sandbox: under bubblewrap it starts bwrap around the holder (planned
        here, on a thread: it reads the filesystem) and forks the supervisor into it once the holder runs."""
        from auger.policy.sandbox import BwrapSandbox, LandlockSandbox
        from auger.policy.supervisor import seccomp_program
        from auger.policy.template import TEMPLATE

        passed: list[int] = []  # descriptors for the template beside the socket and the log
        keep = -1
        landlock = None
        if isinstance(sandbox, BwrapSandbox):
            sh = shutil.which("sh", path=SYSTEM_BIN) or "/bin/sh"
            argv, covers = await asyncio.to_thread(sandbox.holder_argv, env, policy, [sh, "-c", HOLDER_SCRIPT],
                                                   info_fd=3, seccomp_fd=4)
            request = {"op": "start", "kind": "bwrap", "argv": argv,
                       "bridge": [[port, os.path.realpath(path)] for port, path in policy.bridged()],
                       # the protected files, covered by the supervisor before it serves (supervisor.py `_cover`)
                       "cover": [str(policy.cover), [[path, is_dir] for path, is_dir in covers]]
                       if covers and policy.cover is not None else None}
            keep_r, keep = os.pipe()
            seccomp = os.memfd_create("auger-seccomp", os.MFD_CLOEXEC)
            os.write(seccomp, seccomp_program())
            os.lseek(seccomp, 0, os.SEEK_SET)
            passed = [keep_r, seccomp]
        elif isinstance(sandbox, LandlockSandbox):
            options = await asyncio.to_thread(sandbox.supervisor_options, env, policy)
            request = {"op": "start", "kind": "landlock", "landlock": options}
            landlock = "auger.policy.landlock"
        else:
            raise SandboxGone(f"no session sandbox of the kind {sandbox.kind!r}")
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            with open(log, "ab") as err:
                TEMPLATE.start_supervisor(request, [child.fileno(), err.fileno(), *passed], landlock)
        except BaseException:
            parent.close()
            if keep >= 0:
                os.close(keep)
            raise
        finally:
            child.close()
            for fd in passed:
                os.close(fd)
        parent.setblocking(False)
        return cls(parent, log, keep)

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
        """The supervisor's (or bwrap's) last complaint on stderr, if any."""
        try:
            lines = self._log.read_text("utf-8", "replace").strip().splitlines()
        except OSError:
            return ""
        return lines[-1] if lines else ""

    @property
    def running(self) -> int:
        """Commands whose first process has not ended (what they left behind is not counted)."""
        return len(self._running)

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
            if self._keep < 0 and isinstance(message.get("pid"), int):
                try:  # Landlock: the supervisor runs on the host's pid numbers
                    self._supervisor_pidfd = os.pidfd_open(message["pid"])
                except OSError:
                    pass
            if not self._ready.done():
                self._ready.set_result(True)
            return
        request_id = message.get("id")
        if not isinstance(request_id, int):
            return  # not an answer to any request of ours
        if "left" in message:
            asked = self._asked.pop(request_id, None)
            if asked is not None and not asked.done():
                asked.set_result(int(message["left"]))
            return
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
        if not self._ended.done():
            self._ended.set_result(None)
        if not self._ready.done():
            self._ready.set_exception(SandboxGone("the sandbox supervisor exited"))
            self._ready.exception()  # retrieved: a start that nobody awaits must not warn
        for future in self._started.values():
            if not future.done():
                future.set_exception(SandboxGone("the sandbox supervisor exited"))
        self._started.clear()
        for asked in self._asked.values():
            if not asked.done():
                asked.set_result(0)  # nothing is left running in a sandbox that ended
        self._asked.clear()
        for proc in self._running.values():
            proc._finished(9)  # as if SIGKILLed: the namespace is gone
        self._running.clear()

    def _send(self, message: dict, fds: tuple[int, ...] = ()) -> None:
        if not self.alive:
            raise SandboxGone("the session sandbox is not running")
        data = marshal.dumps(message)
        try:
            if fds:
                socket.send_fds(self._sock, [data], list(fds))
            else:
                self._sock.send(data)
        except OSError as exc:
            raise SandboxGone(f"the session sandbox is not running ({exc.strerror or exc})") from None

    async def run(self, argv: list[str], cwd: Path, env: dict[str, str], stdio: tuple[int, int, int],
                  readonly: bool, writable: tuple[str, ...] = (), tty: bool = False,
                  landlock: list[str] | None = None, offline: bool = False) -> SupervisedProcess:
        """Start a command in the sandbox with the given stdin/stdout/stderr fds (the caller keeps its copies);
        `tty`: stdin is a pseudo-terminal, made the controlling terminal of the command's session; `landlock`:
        options of a ruleset of the command's own (`LandlockSandbox.secrets_layer`), applied before it runs;
        `offline`: in a network namespace of its own (bubblewrap only: the supervisor can make one there)."""
        await self.ready()
        self._next += 1
        request_id = self._next
        future = asyncio.get_running_loop().create_future()
        self._started[request_id] = future
        request = {"op": "run", "id": request_id, "argv": argv, "cwd": str(cwd), "env": env,
                   "readonly": readonly, "writable": list(writable), "tty": tty}
        if landlock:
            request["landlock"] = landlock
        if offline:
            request["offline"] = True
        self._send(request, stdio)
        return await future

    async def left_running(self) -> int:
        """How many processes still run in the sandbox: commands, and what they left behind (a daemon)."""
        if not self.alive:
            return 0
        self._next += 1
        asked: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._asked[self._next] = asked
        try:
            self._send({"op": "left", "id": self._next})
        except SandboxGone:
            return 0
        return await asked

    async def close(self) -> None:
        """End the sandbox and every process in it, and wait until they are gone: the holder's end of
        input ends it under bubblewrap (the kernel kills the whole PID namespace then); the end of its
        socket's input makes the supervisor kill what it started and exit."""
        from auger.policy.template import TEMPLATE

        if self._keep >= 0:
            os.close(self._keep)
            self._keep = -1
        try:
            self._sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        try:
            if self.alive:
                try:
                    await asyncio.wait_for(asyncio.shield(self._ended), CLOSE_TIMEOUT)
                except TimeoutError:
                    if self._supervisor_pidfd >= 0:
                        signal.pidfd_send_signal(self._supervisor_pidfd, signal.SIGKILL)
            self._gone()
            self._sock.close()
        finally:
            if self._supervisor_pidfd >= 0:
                os.close(self._supervisor_pidfd)
                self._supervisor_pidfd = -1
            TEMPLATE.release()


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
