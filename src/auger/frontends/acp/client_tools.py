"""The editor's files and terminals, as the tools' `ClientFiles` / `ClientTerminal` seam (tools/base.py).

The tools have already resolved the path beneath the session root and the runtime has already
decided (and, where needed, asked about) the call before anything here runs: these classes only
carry the content to and from the editor. A failure the editor reports is a ToolError the model
reads, never a crash of the turn.
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any, Awaitable, Callable

from acp import RequestError
from acp.schema import EnvVariable

from auger.tools.base import ToolError
from auger.tools.shell import COMMAND_ENV, STREAM_CAP


def _why(exc: Exception) -> str:
    if isinstance(exc, RequestError):
        data = exc.data if isinstance(exc.data, dict) else {}
        return str(data.get("message") or data.get("details") or exc)
    return f"{type(exc).__name__}: {exc}"


class EditorFiles:
    """`fs/read_text_file` and `fs/write_text_file`, for the directions the client offered."""

    def __init__(self, conn: Any, session_id: str, *, reads: bool, writes: bool) -> None:
        self._conn = conn
        self._session_id = session_id
        self.reads = reads
        self.writes = writes

    async def read_text(self, path: Path) -> str:
        try:
            response = await self._conn.read_text_file(session_id=self._session_id, path=str(path))
        except Exception as exc:  # the editor refused or the connection is gone: the model is told
            raise ToolError(f"the editor could not read {path.name}: {_why(exc)}") from None
        return response.content

    async def write_text(self, path: Path, text: str) -> None:
        try:
            await self._conn.write_text_file(session_id=self._session_id, path=str(path), content=text)
        except Exception as exc:
            raise ToolError(f"the editor could not write {path.name}: {_why(exc)}") from None


class EditorTerminal:
    """`terminal/*`: create, wait (with the tool's timeout), read the output, release."""

    def __init__(self, conn: Any, session_id: str, on_terminal: Callable[[str, str], Awaitable[None]]) -> None:
        self._conn = conn
        self._session_id = session_id
        self._on_terminal = on_terminal  # (call id, terminal id): shows the terminal in the tool call

    async def run(self, argv: list[str], cwd: Path, timeout: float, call_id: str) -> tuple[str, int | None, bool]:
        conn, sid = self._conn, self._session_id
        try:
            created = await conn.create_terminal(
                session_id=sid, command=argv[0], args=argv[1:], cwd=str(cwd), output_byte_limit=2 * STREAM_CAP,
                env=[EnvVariable(name=k, value=v) for k, v in COMMAND_ENV.items()])
        except Exception as exc:
            raise ToolError(f"shell: the editor could not start a terminal: {_why(exc)}") from None
        terminal_id = created.terminal_id
        timed_out = False
        try:
            await self._on_terminal(call_id, terminal_id)
            try:
                await asyncio.wait_for(conn.wait_for_terminal_exit(session_id=sid, terminal_id=terminal_id), timeout)
            except TimeoutError:
                timed_out = True
                await conn.kill_terminal(session_id=sid, terminal_id=terminal_id)
            result = await conn.terminal_output(session_id=sid, terminal_id=terminal_id)
        except asyncio.CancelledError:  # the turn was interrupted: the command must not run on
            await _quietly(conn.kill_terminal(session_id=sid, terminal_id=terminal_id))
            raise
        except Exception as exc:
            raise ToolError(f"shell: the editor's terminal failed: {_why(exc)}") from None
        finally:
            await _quietly(conn.release_terminal(session_id=sid, terminal_id=terminal_id))
        status = result.exit_status
        code = status.exit_code if status is not None else None
        if code is None and status is not None and status.signal:
            number = _signal_number(status.signal)
            code = -number if number else None
        output = result.output + ("\n[the editor kept only the end of the output]" if result.truncated else "")
        return output, code, timed_out


async def _quietly(request: Awaitable[Any]) -> None:
    """A clean-up request whose failure changes nothing (the terminal is gone either way)."""
    try:
        await asyncio.wait_for(request, 5)
    except Exception:
        pass


def _signal_number(name: str) -> int | None:
    try:
        return int(signal.Signals[name if name.startswith("SIG") else f"SIG{name}"])
    except KeyError:
        return None
