"""What an auger process says of its health, for load balancers and systemd/Kubernetes probes: that it
answers, its version, and whether its store answers — nothing else (never the store's path or URL, nor
why it failed: a probe needs no details, and the port may be reachable by more people than the process's
operator). `auger serve` answers it at `GET /api/health`; `auger worker --health-port` at `GET /health`,
with its running tasks' count, from `serve_health`: a few lines of asyncio, not a web framework, so the
worker stays light.

    200 {"status": "ok", "version": "…", "store": "ok"}
    503 {"status": "unavailable", "version": "…", "store": "unreachable"}
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any, Awaitable, Callable

from auger._version import __version__

STORE_TIMEOUT_S = 3.0  # a store that takes longer to answer one round trip is unreachable for a probe
REQUEST_TIMEOUT_S = 5.0  # a client that has not sent its request head by then is hung up on
MAX_HEAD = 8192  # bytes of request line and headers read, at most
log = logging.getLogger("auger.health")


async def health(store: Any, **extra: Any) -> tuple[int, dict[str, Any]]:
    """(HTTP status, body): 200 when the store answers a round trip within STORE_TIMEOUT_S, else 503.
    `extra` joins the body (the worker's `running`)."""
    try:
        await asyncio.wait_for(store.ping(), STORE_TIMEOUT_S)
    except Exception as exc:  # unreachable, for whatever reason: the reason goes to the log, not the probe
        log.warning("health check: the store did not answer: %s", str(exc) or type(exc).__name__)
        return 503, {"status": "unavailable", "version": __version__, "store": "unreachable", **extra}
    return 200, {"status": "ok", "version": __version__, "store": "ok", **extra}


class HealthPortError(Exception):
    """The health port cannot be listened on; the message says which and why, in one line."""


async def serve_health(host: str, port: int, report: Callable[[], Awaitable[tuple[int, dict[str, Any]]]]
                       ) -> asyncio.Server:
    """An HTTP/1.1 responder on (host, port): `GET /health` (or `HEAD`) answers `report()`; any other path
    404, any other method 405. One request per connection; nothing it is sent is kept or echoed."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), REQUEST_TIMEOUT_S)
            method, target = _request_line(head)
            path = target.split("?", 1)[0]
            if path != "/health":
                status, body = 404, {"error": "not found: ask GET /health"}
            elif method not in ("GET", "HEAD"):
                status, body = 405, {"error": "only GET /health"}
            else:
                status, body = await report()
            writer.write(_response(status, body, with_body=method != "HEAD"))
            await writer.drain()
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError, ConnectionError):
            pass  # a hung, oversized or broken request: hung up on
        finally:
            writer.close()

    try:
        return await asyncio.start_server(answer, host, port, limit=MAX_HEAD)
    except OSError as exc:
        raise HealthPortError(f"cannot answer health checks on {host}:{port}: {exc.strerror or exc}") from None


def _request_line(head: bytes) -> tuple[str, str]:
    parts = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/"):
        raise ValueError("not an HTTP request line")
    return parts[0], parts[1]


def _response(status: int, body: dict[str, Any], *, with_body: bool) -> bytes:
    data = json.dumps(body).encode()
    reason = {200: "OK", 404: "Not Found", 405: "Method Not Allowed", 503: "Service Unavailable"}.get(status, "")
    head = (f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncontent-length: {len(data)}\r\n"
            "cache-control: no-store\r\nconnection: close\r\n\r\n")
    return head.encode() + (data if with_body else b"")
