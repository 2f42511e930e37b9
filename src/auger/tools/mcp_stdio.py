"""A stdio MCP transport whose server runs in the session's sandbox and egress policy.

The SDK's own stdio transport starts the server itself, outside any confinement. Here the server
is started the way every shell command is — `CommandSandbox.spawn` (policy/confinement.py): inside
bubblewrap or Landlock, its network through the egress proxy — with pipes for stdin and stdout, and
this module speaks newline-delimited JSON-RPC over them, as the SDK's transport does.

A server is started as a command judged read-only is (`SERVER_EFFECT`): held read-only in plan and
safe mode, with the project writable in auto mode. Whoever starts it learns which (`started`), since
only a server the sandbox holds read-only may be believed when it says a tool reads only. When it is
stopped, its whole process group goes with it, also what it left running after it exited.
"""

from __future__ import annotations

import asyncio
import os
import signal
from contextlib import asynccontextmanager
from pathlib import Path
from typing import IO, Any, AsyncIterator, Callable

from auger.tools.base import READ_ONLY, CommandSandbox

MAX_LINE = 16 * 1024 * 1024  # one JSON-RPC message; a server sending more is broken
SERVER_EFFECT = READ_ONLY  # read-only in plan and safe mode, writable within the project in auto


@asynccontextmanager
async def confined_stdio(sandbox: CommandSandbox, argv: list[str], cwd: Path, env: dict[str, str],
                         errlog: IO[str], started: Callable[[bool], None]) -> AsyncIterator[tuple[Any, Any]]:
    """The server's streams; `started(read_only)` is told whether the sandbox holds it read-only."""
    import anyio
    import mcp.types as types
    from mcp.shared.message import SessionMessage

    stdin_r, stdin_w = os.pipe()
    stdout_r, stdout_w = os.pipe()
    try:
        proc = await sandbox.spawn(argv, cwd, env, (stdin_r, stdout_w, errlog.fileno()), SERVER_EFFECT)
    except BaseException:
        for fd in (stdin_r, stdin_w, stdout_r, stdout_w):
            os.close(fd)
        raise
    os.close(stdin_r)
    os.close(stdout_w)
    started(bool(getattr(proc, "readonly", False)) and sandbox.writes_confined)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=MAX_LINE, loop=loop)
    read_transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader, loop=loop),
                                                     os.fdopen(stdout_r, "rb", 0))
    write_transport, write_protocol = await loop.connect_write_pipe(asyncio.Protocol, os.fdopen(stdin_w, "wb", 0))
    incoming_send, incoming = anyio.create_memory_object_stream[Any](0)
    outgoing, outgoing_receive = anyio.create_memory_object_stream[Any](0)

    async def read_lines() -> None:
        async with incoming_send:
            while line := await reader.readline():
                try:
                    message: Any = SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
                except ValueError as exc:
                    message = exc
                await incoming_send.send(message)

    async def write_lines() -> None:
        async with outgoing_receive:
            async for message in outgoing_receive:
                data = message.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                write_transport.write(data.encode())

    async with anyio.create_task_group() as group:
        group.start_soon(read_lines)
        group.start_soon(write_lines)
        try:
            yield incoming, outgoing
        finally:
            write_transport.close()  # the server sees end of input and should exit
            with anyio.CancelScope(shield=True):
                with anyio.move_on_after(2):
                    await proc.wait()
                proc.signal_group(signal.SIGKILL)  # it, or what it left behind in its group
                await proc.wait()
            read_transport.close()
            group.cancel_scope.cancel()
