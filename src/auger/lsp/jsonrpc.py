"""JSON-RPC 2.0 over a language server's stdin and stdout, framed with `Content-Length` headers (LSP's base
protocol): requests with ids and their answers, notifications both ways, and the server's own requests.

Why a client of its own: the maintained Python clients start the server themselves (pygls's
`start_io`, multilspy's downloads and subprocesses), and a language server here must be started through
the session's sandbox (`CommandSandbox.spawn`) with pipes auger made. What is left is this framing, a
hundred lines. The server is a program reading a repository auger does not trust, so what it sends is
bounded: a header block, a message's declared length (MAX_MESSAGE) and its JSON nesting
(protocol/jsontext.py); a server that breaks the framing is disconnected, never believed.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Awaitable, Callable

from auger.protocol.jsontext import dumps, loads as loads_bounded

log = logging.getLogger("auger.lsp")

MAX_MESSAGE = 64 * 1024 * 1024  # bytes of one message (a workspace's symbols can be large); more: disconnected
MAX_HEADER = 8 * 1024  # bytes of one message's header block
METHOD_NOT_FOUND = -32601
REQUEST_CANCELLED = -32800

Handler = Callable[[str, Any], Awaitable[Any]]  # a server's request: (method, params) -> the result to answer


class RpcError(Exception):
    """The server answered a request with an error (`code`, message), or the connection ended first
    (code None)."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


class Connection:
    """One server's JSON-RPC connection: `request` and `notify` out; notifications in go to `on_notify`,
    the server's requests to `on_request` (its answer is sent back; an exception is an error answer)."""

    def __init__(self, reader: asyncio.StreamReader, write: Callable[[bytes], None], *,
                 on_notify: Callable[[str, Any], None], on_request: Handler) -> None:
        self._reader = reader
        self._write = write
        self._on_notify = on_notify
        self._on_request = on_request
        self._next = 0
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._reading: asyncio.Task[None] | None = None
        self.closed = asyncio.Event()
        self.why_closed = ""

    def start(self) -> None:
        self._reading = asyncio.create_task(self._read_loop(), name="lsp-reader")

    async def request(self, method: str, params: Any) -> Any:
        """Send a request and wait for its answer (callers bound the wait: asyncio.timeout). Cancelled,
        it tells the server with `$/cancelRequest`."""
        if self.closed.is_set():
            raise RpcError(f"the server is gone ({self.why_closed})")
        self._next += 1
        request_id = self._next
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = future
        self._send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        try:
            return await future
        except asyncio.CancelledError:
            if not self.closed.is_set():
                self.notify("$/cancelRequest", {"id": request_id})
            raise
        finally:
            self._waiting.pop(request_id, None)

    def notify(self, method: str, params: Any) -> None:
        if not self.closed.is_set():
            self._send({"jsonrpc": "2.0", "method": method, "params": params})

    def _send(self, message: dict[str, Any]) -> None:
        body = dumps(message, compact=True).encode("utf-8")
        try:
            self._write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        except (OSError, RuntimeError) as exc:  # the pipe closed under us
            self._close(f"writing failed: {exc}")

    async def close(self) -> None:
        self._close("closed by auger")
        if self._reading is not None:
            self._reading.cancel()
            await asyncio.gather(self._reading, return_exceptions=True)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _close(self, why: str) -> None:
        if self.closed.is_set():
            return
        self.why_closed = why
        self.closed.set()
        for future in self._waiting.values():
            if not future.done():
                future.set_exception(RpcError(f"the server is gone ({why})"))

    async def _read_loop(self) -> None:
        try:
            while True:
                message = await self._read_message()
                if message is None:
                    self._close("it closed its output")
                    return
                self._dispatch(message)
        except _Broken as exc:
            log.debug("language server connection broken: %s", exc)
            self._close(str(exc))
        except (OSError, asyncio.IncompleteReadError) as exc:
            self._close(f"reading failed: {exc}")

    async def _read_message(self) -> Any:
        """The next message, or None at the end of the output."""
        length = None
        size = 0
        while True:
            try:
                line = await self._reader.readuntil(b"\r\n")
            except asyncio.IncompleteReadError as exc:
                if not exc.partial and length is None and size == 0:
                    return None
                raise _Broken("its output ended inside a message") from None
            except asyncio.LimitOverrunError:
                raise _Broken("a header line too long") from None
            size += len(line)
            if size > MAX_HEADER:
                raise _Broken("a header block too long")
            if line == b"\r\n":
                break
            name, _, value = line.decode("ascii", "replace").partition(":")
            if name.strip().lower() == "content-length":
                try:
                    length = int(value.strip())
                except ValueError:
                    raise _Broken(f"a bad Content-Length {value.strip()[:20]!r}") from None
        if length is None or length < 0:
            raise _Broken("a message without Content-Length")
        if length > MAX_MESSAGE:
            raise _Broken(f"a message of {length:,} bytes (more than {MAX_MESSAGE:,})")
        body = await self._reader.readexactly(length)
        try:
            return loads_bounded(body.decode("utf-8", "replace"))
        except ValueError as exc:
            raise _Broken(f"a message that is not JSON ({exc})") from None

    def _dispatch(self, message: Any) -> None:
        if not isinstance(message, dict):
            return
        method = message.get("method")
        if isinstance(method, str) and "id" in message:
            task = asyncio.create_task(self._answer(message["id"], method, message.get("params")))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        elif isinstance(method, str):
            try:
                self._on_notify(method, message.get("params"))
            except Exception:  # a notification auger cannot read is dropped, never the connection
                log.debug("language server notification %s not handled", method, exc_info=True)
        elif isinstance(message.get("id"), int):
            future = self._waiting.get(message["id"])
            if future is None or future.done():
                return
            error = message.get("error")
            if isinstance(error, dict):
                code = error.get("code")
                future.set_exception(RpcError(str(error.get("message", "error"))[:500],
                                              code if isinstance(code, int) else None))
            else:
                future.set_result(message.get("result"))

    async def _answer(self, request_id: Any, method: str, params: Any) -> None:
        try:
            result = await self._on_request(method, params)
        except RpcError as exc:
            self._send({"jsonrpc": "2.0", "id": request_id,
                        "error": {"code": exc.code or METHOD_NOT_FOUND, "message": str(exc)}})
            return
        except Exception as exc:
            log.debug("answering the server's %s failed", method, exc_info=True)
            self._send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32603, "message": str(exc)[:200]}})
            return
        self._send({"jsonrpc": "2.0", "id": request_id, "result": result})


class _Broken(Exception):
    """The server broke the framing: the connection ends."""
