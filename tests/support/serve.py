"""`auger serve` for tests: the real ASGI app, served by real uvicorn on 127.0.0.1 in the test's own event
loop (or reached in-process through httpx's ASGI transport), with the mock model server behind it; and a
reader of server-sent events.

    async with served(project, mock, db) as srv:
        created = await srv.client.post("/api/sessions", json={"cwd": str(project)})
        async with srv.events(session_id) as stream:
            async for event in stream: ...
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator

import httpx

from auger.frontends.server.app import Server, ServerOptions, create_app
from auger.frontends.http_guard import Pairing, exposure
from auger.store.base import Store
from auger.store.factory import open_store
from auger.config import load_config
from tests.support.harness import FAST
from tests.support.mock_openai import MockChatServer

TOKEN = "test-token-0123456789abcdef"


def model_config(mock: MockChatServer, *overrides: str) -> Any:
    """The server's config: the test's AUGER_HOME config.toml (which PATCH /api/providers edits), the mock."""
    config = load_config([*FAST, "provider=openai-compatible", f"base_url={mock.base_url}", "model=mock-model",
                          "mode=safe", *overrides], env={})
    assert not config.warnings, config.warnings
    return config


@dataclass
class Served:
    url: str
    server: Server
    client: httpx.AsyncClient  # authenticated, base_url set
    store: Any  # a SQLite store, or a PostgreSQL one (db given as a postgresql:// URL)
    uvicorn: Any = None
    clients: list[httpx.AsyncClient] = field(default_factory=list)

    def another_client(self, name: str) -> httpx.AsyncClient:
        client = httpx.AsyncClient(base_url=self.url, timeout=30,
                                   headers={"authorization": f"Bearer {TOKEN}", "x-auger-client": name})
        self.clients.append(client)
        return client

    @contextlib.asynccontextmanager
    async def events(self, session_id: str, *, client: httpx.AsyncClient | None = None, after: int | None = None,
                     last_event_id: int | None = None) -> AsyncIterator[AsyncIterator[dict[str, Any]]]:
        """One SSE connection to a session's stream; yields its events as {id, event, data}."""
        headers = {} if last_event_id is None else {"last-event-id": str(last_event_id)}
        params = {} if after is None else {"after_seq": str(after)}
        async with (client or self.client).stream("GET", f"/api/sessions/{session_id}/events", headers=headers,
                                                  params=params) as response:
            assert response.status_code == 200, await response.aread()
            yield sse_events(response)


async def sse_events(response: httpx.Response) -> AsyncIterator[dict[str, Any]]:
    """The events of an SSE response as they arrive; comments (pings) are counted in `ping`."""
    event: dict[str, Any] = {}
    async for line in response.aiter_lines():
        if line == "":
            if "data" in event:
                event["data"] = json.loads(event["data"])
                yield event
            event = {}
        elif line.startswith(":"):
            yield {"comment": line[1:].strip()}
        else:
            key, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if key == "id":
                event["id"] = int(value)
            elif key in ("event", "data", "retry"):
                event[key] = value


def options(mock: MockChatServer, store: Any, roots: list[Path], port: int, *overrides: str,
            static_dir: Path | None = None, mode: str = "safe", ping_s: float = 15.0,
            pairing: Pairing | None = None) -> ServerOptions:
    extra = {} if static_dir is None else {"static_dir": static_dir}
    return ServerOptions(store=store, config_for=lambda root: model_config(mock, f"mode={mode}", *overrides),
                         roots=[str(r) for r in roots], mode=mode, token=TOKEN,
                         exposure=exposure("127.0.0.1", port, tls=False), ping_s=ping_s,
                         pairing=pairing or Pairing(), **extra)


@contextlib.asynccontextmanager
async def served(project: Path, mock: MockChatServer, db: Path | str, *overrides: str, roots: list[Path] | None = None,
                 **kwargs: Any) -> AsyncIterator[Served]:
    """The server under real uvicorn; on exit it shuts down gracefully (turns interrupted, streams closed)."""
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    port = sock.getsockname()[1]
    store = open_store(db)
    app, server = create_app(options(mock, store, roots or [project], port, *overrides, **kwargs))
    config = uvicorn.Config(app, lifespan="on", log_level="warning", ws="websockets-sansio",
                            timeout_graceful_shutdown=10)

    class Draining(uvicorn.Server):
        async def shutdown(self, sockets: list[Any] | None = None) -> None:
            await server.drain()
            await super().shutdown(sockets)

    runner = Draining(config)
    task = asyncio.create_task(runner.serve(sockets=[sock]))
    while not runner.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    url = f"http://127.0.0.1:{port}"
    client = httpx.AsyncClient(base_url=url, timeout=30, headers={"authorization": f"Bearer {TOKEN}"})
    srv = Served(url, server, client, store, runner, [client])
    try:
        yield srv
    finally:
        runner.should_exit = True
        await asyncio.wait_for(task, 30)
        for c in srv.clients:
            await c.aclose()
        await store.aclose()


@contextlib.asynccontextmanager
async def in_process(project: Path, mock: MockChatServer, db: Path, *overrides: str, **kwargs: Any
                     ) -> AsyncIterator[tuple[httpx.AsyncClient, Server]]:
    """The app reached through httpx's ASGI transport (no socket): fast, for routes that do not stream."""
    store = open_store(db)
    app, server = create_app(options(mock, store, kwargs.pop("roots", None) or [project], 8765, *overrides, **kwargs))
    transport = httpx.ASGITransport(app=app)
    client = httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8765",
                               headers={"authorization": f"Bearer {TOKEN}"})
    try:
        yield client, server
    finally:
        await server.drain()
        await client.aclose()
        await store.aclose()


def start_process(project: Path, home: Path, mock: MockChatServer, db: Path, *extra: str
                  ) -> tuple[subprocess.Popen, str, list[str]]:
    """The real `auger serve` command on a free port, with TOKEN and the mock model; its URL and the three
    lines it printed (the URL, the pairing link, where the token is)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AUGER_", "OPENAI_"))}
    env.update({"AUGER_HOME": str(home), "OPENAI_API_KEY": "sk-test", "AUGER_SERVER_TOKEN": TOKEN})
    overrides = [arg for o in FAST for arg in ("-c", o)]
    proc = subprocess.Popen([sys.executable, "-m", "auger", "serve", "--port", "0", "--base-url", mock.base_url,
                             "--model", "mock-model", "--db", str(db), *overrides, *extra], cwd=project, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stderr is not None
    lines = []
    while True:
        line = proc.stdout.readline()
        assert line, f"auger serve exited: {proc.stderr.read()}"
        lines.append(line)
        if "Authorization" in line:
            break
    found = re.search(r"listening on (https?://\S+)/", lines[0])
    assert found, lines
    return proc, found.group(1), lines


def stop_process(proc: subprocess.Popen) -> tuple[int, str]:
    """SIGTERM, as a user's Ctrl-C: the exit status and what it wrote on stderr."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    return proc.returncode, proc.stderr.read() if proc.stderr else ""


def pairing_link(printed: list[str]) -> str:
    """The one-use pairing link `auger serve` printed at start."""
    found = re.search(r"(https?://\S+/pair\?code=\S+)", printed[1])
    assert found, printed
    return found.group(1)


async def long_session(store: Store, project: Path, turns: int, *, title: str = "a long session") -> str:
    """A stored session of `turns` turns, four items each (the user's message, a command and its output, the
    reply): what a session looks like after a long day. Its id."""
    import time
    import uuid

    from auger.protocol.items import AssistantMessage, ToolCall, ToolOutput, UserMessage
    from auger.store.base import SessionRecord

    now = time.time()
    session_id = str(uuid.uuid4())
    await store.create_session(SessionRecord(session_id, now, now, str(project), "openai-compatible", "mock-model",
                                             "safe", title))
    for n in range(turns):
        turn = f"turn{n:05d}"
        await store.append(session_id, turn, UserMessage(f"question {n}: what does module {n} do?"))
        await store.append(session_id, turn, ToolCall(f"call-{n}", "shell", json.dumps({"command": f"cat m{n}.py"})))
        await store.append(session_id, turn, ToolOutput(f"call-{n}", f"Exit code: 0\ndef f{n}():\n    return {n}\n"))
        await store.append(session_id, turn, AssistantMessage(f"Module {n} defines **f{n}**, which returns `{n}`."))
    return session_id
