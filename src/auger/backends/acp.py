"""AcpBackend: one agent process spoken to over ACP (JSON-RPC on its stdin/stdout).

The process is started in a session (process group) of its own, so `dispose` stops it and whatever it
started (a `npx` wrapper's node, its language servers) with one signal; its stderr goes to a temp
file whose last lines explain a failed start or a crash. A process that died (killed, crashed) is
noticed by the broken connection: the prompt ends with a BackendError naming the exit, and the next
`ensure_session` starts it again (resuming, else loading, the agent's session when it can).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import tempfile
from typing import IO, Any, AsyncGenerator

from auger.backends.acp_client import AcpClient
from auger.backends.base import BackendError, BackendEvent, BackendSpec, Health, UsageReported

START_TIMEOUT_S = 60.0  # initialize and session/new; an npx wrapper may download first
_STDIO_LIMIT = 50 << 20  # one JSON-RPC line may carry a whole file
_DONE = object()


class AcpBackend:
    def __init__(self, spec: BackendSpec, *, start_timeout: float = START_TIMEOUT_S) -> None:
        self.spec = spec
        self._start_timeout = start_timeout
        self._proc: asyncio.subprocess.Process | None = None
        self._conn: Any = None
        self._client = AcpClient()
        self._stderr: IO[bytes] | None = None
        self._session_id: str | None = None
        self._can_load = False
        self._can_resume = False
        self._busy = False
        self.agent_info = ""  # the agent's name and version, from its initialize reply
        self._protocol = 0

    @property
    def agent_session_id(self) -> str | None:
        return self._session_id

    @property
    def busy(self) -> bool:
        return self._busy

    def health(self) -> Health:
        if self._proc is None:
            return Health(False, None, "not started")
        if self._proc.returncode is not None:
            return Health(False, self._proc.pid, _exit_text(self._proc.returncode))
        return Health(True, self._proc.pid)

    # -- life cycle -------------------------------------------------------------------
    async def ensure_session(self, cwd: str, agent_session_id: str | None) -> str:
        if self.health().alive and self._session_id is not None:
            return self._session_id
        await self.dispose()
        try:
            await asyncio.wait_for(self._start(cwd), self._start_timeout)
            wanted = agent_session_id if self._can_load or self._can_resume else None
            self._session_id = await asyncio.wait_for(self._open_session(cwd, wanted), self._start_timeout)
        except TimeoutError:
            await self.dispose()
            raise BackendError(f"backend {self.spec.name!r} did not answer within {self._start_timeout:g} s "
                               f"of starting{self._stderr_tail(': ')}") from None
        except BackendError:
            await self.dispose()
            raise
        except Exception as exc:  # the process died or spoke something else than ACP
            message = await self._failure("could not start", exc)
            await self.dispose()
            raise BackendError(message) from None
        return self._session_id

    async def probe(self, cwd: str) -> str:
        """Start the agent, initialize, stop it: what it says it is, or BackendError saying why not."""
        try:
            await asyncio.wait_for(self._start(cwd), self._start_timeout)
            continues = "resume" if self._can_resume else "load" if self._can_load else "no"
            return f"{self.agent_info} (ACP {self._protocol}; continues sessions: {continues})"
        except TimeoutError:
            raise BackendError(f"no answer to initialize within {self._start_timeout:g} s"
                               f"{self._stderr_tail(': ')}") from None
        except BackendError:
            raise
        except Exception as exc:
            raise BackendError(await self._failure("could not start", exc)) from None
        finally:
            await self.dispose()

    async def _start(self, cwd: str) -> None:
        from auger._version import __version__
        from auger.extras import MissingExtra, importing

        try:
            with importing("acp", f"backend {self.spec.name!r}"):
                from auger.pydantic_lazy import imported

                imported("acp")  # the SDK's models made at their first use (auger/pydantic_lazy.py)
                import acp
                from acp.schema import ClientCapabilities, FileSystemCapabilities, Implementation
        except MissingExtra as exc:
            raise BackendError(str(exc)) from None

        executable = shutil.which(self.spec.command)
        if executable is None:
            raise BackendError(f"backend {self.spec.name!r}: {self.spec.command!r} is not installed "
                               "(not found on PATH); see `auger backends`")
        # kept open for the process's life (closed by dispose), so no context manager
        self._stderr = tempfile.TemporaryFile(prefix=f"auger-backend-{self.spec.name}-")  # noqa: SIM115
        self._proc = await asyncio.create_subprocess_exec(
            executable, *self.spec.args, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=self._stderr, cwd=cwd, env={**os.environ, **self.spec.env}, start_new_session=True,
            limit=_STDIO_LIMIT)
        self._client = AcpClient()
        # AcpClient answers what auger offers (no terminals, no elicitation): the SDK routes those as optional
        self._conn = acp.connect_to_agent(self._client, self._proc.stdin, self._proc.stdout)  # type: ignore[arg-type]
        capabilities = ClientCapabilities(fs=FileSystemCapabilities(read_text_file=True, write_text_file=True),
                                          terminal=False)
        reply = await self._conn.initialize(protocol_version=acp.PROTOCOL_VERSION, client_capabilities=capabilities,
                                            client_info=Implementation(name="auger", version=__version__))
        caps = reply.agent_capabilities
        self._can_load = bool(caps and caps.load_session)
        self._can_resume = bool(caps and caps.session_capabilities and caps.session_capabilities.resume)
        self._protocol = reply.protocol_version
        info = reply.agent_info
        self.agent_info = f"{info.name} {info.version}".strip() if info is not None else "an unnamed agent"

    async def _open_session(self, cwd: str, agent_session_id: str | None) -> str:
        from acp import RequestError

        if agent_session_id is not None:
            try:  # resume when the agent can: a load would replay the whole conversation, for nothing
                if self._can_resume:
                    await self._conn.resume_session(cwd=cwd, session_id=agent_session_id, mcp_servers=[])
                else:
                    await self._conn.load_session(cwd=cwd, session_id=agent_session_id, mcp_servers=[])
                return agent_session_id
            except RequestError:  # the agent forgot it: a new conversation on its side
                pass
        reply = await self._conn.new_session(cwd=cwd, mcp_servers=[])
        return str(reply.session_id)

    async def close(self) -> None:
        """Forget the agent's session; the next ensure_session opens a new one."""
        self._session_id = None

    async def dispose(self) -> None:
        """Stop the process group: stdin closed, then SIGTERM, then SIGKILL; nothing is left behind."""
        conn, proc, stderr = self._conn, self._proc, self._stderr
        self._conn = self._proc = self._stderr = None
        self._session_id = None
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close()
        if proc is not None:
            if proc.stdin is not None:
                proc.stdin.close()
            if proc.returncode is None:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(proc.wait(), 0.5)
            for signum, grace in ((signal.SIGTERM, 1.0), (signal.SIGKILL, 5.0)):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signum)  # the group outlives its leader while children live
                if proc.returncode is None:
                    with contextlib.suppress(asyncio.TimeoutError):
                        await asyncio.wait_for(proc.wait(), grace)
        if stderr is not None:
            stderr.close()

    # -- a prompt ---------------------------------------------------------------------
    async def prompt(self, text: str) -> AsyncGenerator[BackendEvent, None]:
        import acp

        if self._conn is None or self._session_id is None or not self.health().alive:
            raise BackendError(f"backend {self.spec.name!r} is not running; start its session first")
        queue: asyncio.Queue[Any] = asyncio.Queue()
        self._client.begin(self._session_id, queue.put_nowait)
        task = asyncio.create_task(self._conn.prompt(session_id=self._session_id, prompt=[acp.text_block(text)]))
        task.add_done_callback(lambda _: queue.put_nowait(_DONE))
        self._busy = True
        try:
            while (item := await queue.get()) is not _DONE:
                yield item
            try:
                reply = task.result()
            except Exception as exc:
                raise BackendError(await self._failure("failed mid-turn", exc)) from None
            usage = getattr(reply, "usage", None)
            if usage is not None:
                yield UsageReported(usage.input_tokens, usage.output_tokens, usage.cached_read_tokens or 0,
                                    usage.thought_tokens or 0)
            if reply.stop_reason not in ("end_turn", "cancelled"):
                raise BackendError(f"backend {self.spec.name!r} stopped: {reply.stop_reason.replace('_', ' ')}")
        finally:
            self._busy = False
            self._client.end()
            if not task.done():
                task.cancel()

    async def cancel(self) -> None:
        """session/cancel for the running prompt (a notification: nothing to wait for)."""
        if self._conn is not None and self._session_id is not None and self.health().alive:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._conn.cancel(session_id=self._session_id), 2.0)

    # -- diagnostics ------------------------------------------------------------------
    async def _failure(self, what: str, exc: BaseException) -> str:
        """One line: which agent, what happened (its exit or its error), and its last stderr line."""
        from acp import RequestError

        proc = self._proc
        if proc is not None and proc.returncode is None and isinstance(exc, ConnectionError):
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(proc.wait(), 2.0)
        if proc is not None and proc.returncode is not None:
            cause = _exit_text(proc.returncode)
            hint = "; the next prompt starts it again" if what == "failed mid-turn" else ""
        elif isinstance(exc, RequestError):
            details = exc.data.get("details") if isinstance(exc.data, dict) else exc.data
            cause = f"error {exc.code}: {exc}" + (f" ({details})" if details else "")
            hint = ""
        else:
            cause = f"{type(exc).__name__}: {exc}"
            hint = ""
        return f"backend {self.spec.name!r} {what}: {cause}{self._stderr_tail(' — ')}{hint}"

    def _stderr_tail(self, lead: str) -> str:
        if self._stderr is None:
            return ""
        try:
            self._stderr.seek(0, os.SEEK_END)
            size = self._stderr.tell()
            self._stderr.seek(max(0, size - 2048))
            lines = [line for line in self._stderr.read().decode("utf-8", "replace").splitlines() if line.strip()]
        except OSError:
            return ""
        return f"{lead}{lines[-1].strip()[:300]}" if lines else ""


def _exit_text(code: int) -> str:
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"the agent process was killed ({name})"
    return f"the agent process exited with code {code}"
