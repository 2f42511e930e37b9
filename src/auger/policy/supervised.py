"""auger's side of the session sandbox: start it, run commands through its supervisor, end it.

See `auger.policy.supervisor` for what runs inside and the message format. One `SessionSandbox` per
live sandbox of a session (auger.policy.confinement starts one at the session's first command and ends
it when it has been idle a while); every command it runs shares the sandbox's namespaces. Closing it
(or auger dying) ends every process it started.

Under bubblewrap, the sandbox is bwrap around a holder (`_Holder`): pid 1 of the sandbox's PID
namespace, a shell reading its stdin until auger closes the other end. The supervisor, forked by the
template (auger.policy.template), joins the holder's namespaces. Under Landlock the supervisor confines
itself with the session's ruleset.
"""

from __future__ import annotations

import asyncio
import json
import marshal
import os
import shutil
import signal
import socket
import subprocess
import weakref
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from auger.policy.sandbox import BwrapSandbox, Sandbox, SandboxPolicy

READY_TIMEOUT = 10.0
STARTS_AT_ONCE = 2 * (os.cpu_count() or 1)  # sandboxes a process starts at the same time (more wait their turn)
CLOSE_TIMEOUT = 3.0
SYSTEM_BIN = "/usr/bin:/bin"
# The holder: says it runs (bubblewrap has set everything up by then), then waits for the end of its input.
HOLDER_SCRIPT = "echo; read -r line"


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


class _Holder:
    """A bubblewrap sandbox around the holder (see the module docstring)."""

    def __init__(self, proc: subprocess.Popen[bytes], keep: int, pid: int, mnt: int):
        self._proc = proc  # bwrap, outside the sandbox
        self._keep = keep  # the holder's stdin: closing it ends the sandbox
        self._pidfd = os.pidfd_open(proc.pid)
        self.pid = pid  # the holder's pid on the host
        self.mnt = mnt  # the inode of the sandbox's mount namespace

    @classmethod
    async def start(cls, sandbox: BwrapSandbox, policy: SandboxPolicy, env: dict[str, str], log: int) -> _Holder:
        """Start bwrap and wait until the holder runs inside (every mount made, every namespace there)."""
        from auger.policy.supervisor import seccomp_program

        sh = shutil.which("sh", path=SYSTEM_BIN) or "/bin/sh"
        keep_r, keep_w = os.pipe()
        ready_r, ready_w = os.pipe()
        info_r, info_w = os.pipe()
        seccomp = os.memfd_create("auger-seccomp", os.MFD_CLOEXEC)
        os.write(seccomp, seccomp_program())
        os.lseek(seccomp, 0, os.SEEK_SET)
        try:
            argv = sandbox.holder_argv(env, policy, [sh, "-c", HOLDER_SCRIPT], info_fd=info_w, seccomp_fd=seccomp)
            proc = subprocess.Popen(argv, env={"PATH": SYSTEM_BIN, "LANG": "C.UTF-8"}, stdin=keep_r, stdout=ready_w,
                                    stderr=log, pass_fds=(info_w, seccomp), start_new_session=True)
        except BaseException:
            os.close(keep_w)
            os.close(ready_r)
            os.close(info_r)
            raise
        finally:
            for fd in (keep_r, ready_w, info_w, seccomp):
                os.close(fd)
        holder = None
        try:
            ready, info = await asyncio.wait_for(asyncio.gather(_read_when_ready(ready_r), _read_json(info_r)),
                                                 READY_TIMEOUT)
            if not ready or "child-pid" not in info:
                raise SandboxGone("bwrap exited before the sandbox was ready")
            holder = cls(proc, keep_w, int(info["child-pid"]), int(info["mnt-namespace"]))
            return holder
        except (TimeoutError, ValueError, OSError) as exc:
            if holder is None:
                os.close(keep_w)
                _kill(proc)
            raise SandboxGone(f"bwrap did not start the sandbox ({str(exc) or 'timed out'})") from None
        finally:
            os.close(ready_r)
            os.close(info_r)

    async def stop(self) -> None:
        """End the sandbox: the holder reads the end of its input and exits, and the kernel kills every
        process left in its PID namespace; bwrap exits with it."""
        if self._keep >= 0:
            os.close(self._keep)
            self._keep = -1
        if self._proc.poll() is None and not await _exited(self._pidfd, CLOSE_TIMEOUT):
            _kill(self._proc)
        self._proc.wait()
        os.close(self._pidfd)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """bwrap's whole session (with --die-with-parent, the holder dies with bwrap anyway)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


async def _read_when_ready(fd: int) -> bytes:
    """What arrives first on a pipe (b"" at its end)."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[bytes] = loop.create_future()

    def readable() -> None:
        if not done.done():
            try:
                done.set_result(os.read(fd, 4096))
            except OSError as exc:
                done.set_exception(exc)

    loop.add_reader(fd, readable)
    try:
        return await done
    finally:
        loop.remove_reader(fd)


async def _read_json(fd: int) -> dict:
    """One JSON object from a pipe (bubblewrap's --info-fd), however it is cut into writes."""
    data = b""
    while True:
        chunk = await _read_when_ready(fd)
        data += chunk
        try:
            found = json.loads(data)
        except ValueError:
            if not chunk:
                return {}
            continue
        return found if isinstance(found, dict) else {}


class SessionSandbox:
    def __init__(self, sock: socket.socket, log: Path, holder: _Holder | None):
        self._sock = sock
        self._log = log
        self._holder = holder
        self._supervisor_pidfd = -1  # Landlock: the supervisor's, to wait for its end
        self._next = 0
        self._started: dict[int, asyncio.Future] = {}
        self._asked: dict[int, asyncio.Future[int]] = {}  # "left" questions not answered yet
        self._running: dict[int, SupervisedProcess] = {}
        self._ready = asyncio.get_running_loop().create_future()
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
        from auger.policy.sandbox import BwrapSandbox, LandlockSandbox
        from auger.policy.template import TEMPLATE

        with open(log, "ab") as err:
            holder = None
            if isinstance(sandbox, BwrapSandbox):
                holder = await _Holder.start(sandbox, policy, env, err.fileno())
                request = {"op": "start", "kind": "bwrap", "pid": holder.pid, "mnt": holder.mnt,
                           "bridge": [[port, os.path.realpath(path)] for port, path in policy.proxy_sockets]
                           if policy.network == "proxy" else []}
                landlock = None
            elif isinstance(sandbox, LandlockSandbox):
                request = {"op": "start", "kind": "landlock", "landlock": sandbox.supervisor_options(env, policy)}
                landlock = "auger.policy.landlock"
            else:
                raise SandboxGone(f"no session sandbox of the kind {sandbox.kind!r}")
            parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            try:
                TEMPLATE.start_supervisor(request, child.fileno(), err.fileno(), landlock)
            except BaseException:
                parent.close()
                if holder is not None:
                    await holder.stop()
                raise
            finally:
                child.close()
        parent.setblocking(False)
        return cls(parent, log, holder)

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
            if self._holder is None and isinstance(message.get("pid"), int):
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
                  readonly: bool, writable: tuple[str, ...] = ()) -> SupervisedProcess:
        """Start a command in the sandbox with the given stdin/stdout/stderr fds (the caller keeps its copies)."""
        await self.ready()
        self._next += 1
        request_id = self._next
        future = asyncio.get_running_loop().create_future()
        self._started[request_id] = future
        self._send({"op": "run", "id": request_id, "argv": argv, "cwd": str(cwd), "env": env,
                    "readonly": readonly, "writable": list(writable)}, stdio)
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
        """End the supervisor and, with it, every process of the sandbox."""
        from auger.policy.template import TEMPLATE

        if self.alive:
            self._gone()
        try:
            self._sock.close()  # the supervisor reads the end: it kills what it started, and exits
        except OSError:
            pass
        try:
            if self._holder is not None:
                await self._holder.stop()
            elif self._supervisor_pidfd >= 0:
                if not await _exited(self._supervisor_pidfd, CLOSE_TIMEOUT):
                    signal.pidfd_send_signal(self._supervisor_pidfd, signal.SIGKILL)
                os.close(self._supervisor_pidfd)
        finally:
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


async def spawn_local(argv: list[str], cwd: Path, env: dict[str, str], stdio: tuple[int, int, int]) -> LocalProcess:
    """Start a command directly, in a new session (process group) of its own."""
    proc = await asyncio.create_subprocess_exec(*argv, cwd=cwd, env=env, stdin=stdio[0], stdout=stdio[1],
                                                stderr=stdio[2], start_new_session=True)
    return LocalProcess(proc)
