"""`auger serve` checks what a client sends before it works on it: a body within its limit before it is
read, a number in digits before it is converted, a query parameter the route declares before the route runs.

Judged by effect: the real `auger serve` process's peak RSS (VmHWM) does not grow by more than a few MiB
while a client uploads 200 MiB, with and without Content-Length (the answer: 413); a malformed cursor or
number in a query or header is 400, never 500; every route of the app — enumerated, so a route added later
is covered too — refuses a query parameter it does not declare, or one given twice (400 naming it, where
before a POST went ahead); and hostile bodies and ids (fields given twice, NaN, deep nesting, a lone
surrogate, a 100,000-character or NUL-bearing id, an op's number past 64 bits, a 10,000-character model name,
a provider name that is not ASCII) are 400/404 with a message, on SQLite and PostgreSQL alike.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from pathlib import Path

import httpx
import pytest

from auger.frontends.server.app import create_app
from tests.support.mock_openai import MockChatServer, Reply
from tests.support.serve import TOKEN, in_process, options, served
from tests.support.serve import start_process as start
from tests.support.serve import stop_process as stop
from auger.store.factory import open_store

TIMEOUT = 120
MIB = 1024 * 1024
UPLOAD = 200 * MIB
HEADERS = {"authorization": f"Bearer {TOKEN}"}


def _peak_rss(pid: int) -> int:
    """The process's peak resident set (VmHWM), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM in /proc/PID/status")


def _upload(url: str, size: int, *, declared: bool) -> bytes:
    """POST `size` bytes to /api/sessions on a raw socket — with Content-Length, or chunked — while reading
    the answer on another thread; the answer's status line."""
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=60)
    framing = f"Content-Length: {size}" if declared else "Transfer-Encoding: chunked"
    sock.sendall(f"POST /api/sessions HTTP/1.1\r\nHost: {host}:{port}\r\nAuthorization: Bearer {TOKEN}\r\n"
                 f"Content-Type: application/json\r\n{framing}\r\n\r\n".encode())
    answer: list[bytes] = []

    def read() -> None:
        data = b""
        try:
            while b"\r\n" not in data:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                data += chunk
        except OSError:
            pass
        answer.append(data)

    reader = threading.Thread(target=read)
    reader.start()
    block = b"[" + b" " * (MIB - 1)
    try:
        for _ in range(size // MIB):
            if answer:
                break
            sock.sendall(block if declared else b"%x\r\n%s\r\n" % (len(block), block))
        if not declared:
            sock.sendall(b"0\r\n\r\n")
    except OSError:  # the server stopped listening to the rest: fine
        pass
    reader.join(60)
    sock.close()
    return answer[0].split(b"\r\n")[0] if answer else b""


def test_a_200_mib_upload_is_refused_before_it_is_held_with_and_without_content_length(
        project, server, isolated_home, tmp_path):
    proc, url, _ = start(project, isolated_home, server, tmp_path / "s.db")
    try:
        with httpx.Client(base_url=url, headers=HEADERS, timeout=30) as client:  # warm: the first request's imports
            assert client.post("/api/sessions", json={"cwd": "relative"}).status_code == 400
            assert client.post("/api/sessions", content=b"{}" * 1000).status_code == 400
        before = _peak_rss(proc.pid)
        declared = _upload(url, UPLOAD, declared=True)
        after_declared = _peak_rss(proc.pid)
        chunked = _upload(url, UPLOAD, declared=False)
        after_chunked = _peak_rss(proc.pid)
        with httpx.Client(base_url=url, headers=HEADERS, timeout=30) as client:
            alive = client.get("/api/sessions").status_code
    finally:
        stop(proc)
    assert declared.startswith(b"HTTP/1.1 413"), declared
    assert chunked.startswith(b"HTTP/1.1 413"), chunked
    assert after_declared - before < 8 * MIB, f"{(after_declared - before) / MIB:.1f} MiB more for a declared upload"
    assert after_chunked - after_declared < 8 * MIB, f"{(after_chunked - after_declared) / MIB:.1f} MiB more chunked"
    assert alive == 200


MALFORMED = [  # (where, name, value): a cursor or number a hostile client might send
    ("header", "Last-Event-ID", "9" * 5000), ("header", "Last-Event-ID", "²"), ("header", "Last-Event-ID", "-1"),
    ("events", "after_seq", "²"), ("events", "after_seq", "1e3"), ("events", "after_seq", "99999999999999999999"),
    ("events", "after_seq", ""), ("items", "before", "٣"), ("items", "before", "0"), ("items", "limit", "0"),
    ("items", "limit", "9" * 5000), ("items", "limit", "+5"), ("list", "limit", "²"), ("list", "limit", "501"),
    ("list", "cursor", "1.0/\x00"), ("list", "cursor", "nan/x"), ("list", "cursor", "1e999/x"),
    ("fleet", "limit", "²"), ("diff", "turn", "\x00"), ("diff", "turn", "t" * 500)]


def test_a_malformed_cursor_or_number_is_400_never_500(project, server, tmp_path):
    async def main():
        async with served(project, server, tmp_path / "s.db") as srv:
            sid = (await srv.client.post("/api/sessions", json={"cwd": str(project)})).json()["id"]
            paths = {"events": f"/api/sessions/{sid}/events", "header": f"/api/sessions/{sid}/events",
                     "items": f"/api/sessions/{sid}/items", "list": "/api/sessions", "fleet": "/api/fleet",
                     "diff": f"/api/sessions/{sid}/diff"}
            answers = []
            for where, name, value in MALFORMED:
                if where == "header":
                    answer = await srv.client.get(paths[where], headers={name: value.encode()})  # raw UTF-8 bytes
                else:
                    answer = await srv.client.get(paths[where], params={name: value})
                answers.append((name, value[:12], answer.status_code, answer.text[:200]))
            return answers

    answers = asyncio.run(asyncio.wait_for(main(), TIMEOUT))
    assert [a for a in answers if a[2] != 400] == []
    assert all(name in text or "cursor" in text or "turn" in text for name, _, _, text in answers), answers


_BODIES = {  # a body each route would otherwise accept, so only the query parameter can be why it is refused
    ("POST", "/api/sessions"): lambda project: {"cwd": str(project)},
    ("POST", "/api/sessions/{id}/ops"): lambda project: {"submission_id": "q-1", "op": {"type": "interrupt"}},
    ("PATCH", "/api/providers/{name}"): lambda project: {"enabled": True},
}
_PARAMS = {"id": None, "name": "openai-compatible"}  # {id}: the session's (a task's is 32 hex digits)


def test_every_route_refuses_a_query_parameter_it_does_not_declare_or_one_given_twice(project, server, tmp_path):
    from starlette.routing import Mount, Route, WebSocketRoute

    async def main():
        store = open_store(tmp_path / "s.db")
        app, srv = create_app(options(server, store, [project], 8765))
        client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8765",
                                   headers=HEADERS)
        try:
            sid = (await client.post("/api/sessions", json={"cwd": str(project)})).json()["id"]
            routes, others, answers = [], [], {}
            for route in app.app.routes:  # the Starlette app inside the Guard
                if isinstance(route, Route):
                    routes += [(method, route.path) for method in sorted(route.methods or ()) if method != "HEAD"]
                else:
                    others.append((type(route).__name__, route.path))
            for method, path in routes:
                url = path.replace("{name}", "openai-compatible").replace(
                    "{id}", "0" * 32 if "/tasks/" in path else sid)
                body = _BODIES.get((method, path), lambda project: {} if method != "GET" else None)(project)
                unknown = await client.request(method, url, params={"zz_unknown": "1"},
                                               **({"json": body} if body is not None else {}))
                answers[(method, path)] = (unknown.status_code, unknown.text[:200])
            twice = [await client.get(url, params=[(name, "1"), (name, "2")]) for url, name in (
                ("/api/sessions", "limit"), (f"/api/sessions/{sid}/items", "before"), ("/api/fleet", "limit"))]
            return routes, others, answers, twice
        finally:
            await srv.drain()
            await client.aclose()
            await store.aclose()

    routes, others, answers, twice = asyncio.run(asyncio.wait_for(main(), TIMEOUT))
    assert len(routes) >= 19 and sorted(others) == [("Mount", ""), ("WebSocketRoute", "/acp")], others
    refused = {key: text for key, (status, text) in answers.items() if status != 400 or "zz_unknown" not in text}
    assert refused == {}, refused
    assert [(t.status_code, "more than once" in t.text) for t in twice] == [(400, True)] * 3


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


HOSTILE = [  # (what, method, path, body as raw JSON text or None, expected status, words in the error)
    ("a field twice", "POST", "/api/sessions", '{"cwd": "/", "cwd": "{project}"}', 400, "more than once"),
    ("NaN", "POST", "/api/sessions/{sid}/ops",
     '{"submission_id": "n", "op": {"type": "rollback", "turns": NaN}}', 400, "not a JSON number"),
    ("1e999", "POST", "/api/sessions", '{"cwd": "{project}", "before_seq": 1e999}', 400, "out of range"),
    ("nested 100 deep", "POST", "/api/sessions/{sid}/ops",
     '{"submission_id": "d", "op": {"type": "add_mcp_server", "name": "x", "config": {"a": ' + _deep(100) + '}}}',
     400, "nested"),
    ("a lone surrogate", "POST", "/api/sessions", '{"cwd": "/\\ud800"}', 400, "surrogate"),
    ("not UTF-8", "POST", "/api/sessions", b'{"cwd": "/\xff"}', 400, "not JSON"),
    ("a 100,000-character id", "POST", "/api/sessions", '{"resume": "' + "a" * 100_000 + '"}', 404, "no session"),
    ("a NUL id", "POST", "/api/sessions", '{"fork": "\\u0000"}', 404, "no session"),
    ("a NUL id in the path", "GET", "/api/sessions/%00", None, 404, "no session"),
    ("a % id", "GET", "/api/sessions/%25%25%25%25", None, 404, "no session"),
    ("a NUL cursor", "GET", "/api/sessions?cursor=1.5/%00", None, 400, "cursor"),
    ("a number past 64 bits", "POST", "/api/sessions/{sid}/ops",
     '{"submission_id": "b", "op": {"type": "pending_rewind", "seq": 100000000000000000000000000000}}', 400,
     "wrong type or value"),
    ("a model name of 10,000 characters", "POST", "/api/sessions/{sid}/ops",
     '{"submission_id": "m", "op": {"type": "set_model", "model": "' + "m" * 10_000 + '"}}', 400, "at most 200"),
    ("a provider name not ASCII", "POST", "/api/providers/a%C2%B2/probe", "{}", 400, "ASCII"),
    ("a NUL provider name", "PATCH", "/api/providers/a%00", '{"enabled": false}', 400, "ASCII"),
]


def test_hostile_bodies_and_ids_are_refused_with_a_message_on_either_store(project, server, tmp_path, db_target):
    async def main():
        async with in_process(project, server, db_target) as (client, _):
            sid = (await client.post("/api/sessions", json={"cwd": str(project)})).json()["id"]
            answers = {}
            for what, method, path, body, _, _ in HOSTILE:
                if isinstance(body, str):
                    body = body.replace("{project}", str(project)).encode()
                try:
                    answer = await client.request(method, path.replace("{sid}", sid), content=body)
                    answers[what] = (answer.status_code, answer.json().get("error", ""))
                except Exception as exc:  # the in-process transport re-raises what the app did not handle
                    answers[what] = (500, f"{type(exc).__name__}: {exc}"[:200])
            listed = (await client.get("/api/sessions")).status_code
            return answers, listed

    answers, listed = asyncio.run(asyncio.wait_for(main(), TIMEOUT))
    wrong = {what: answers[what] for what, _, _, _, status, words in HOSTILE
             if answers[what][0] != status or words not in answers[what][1]}
    assert wrong == {}, wrong
    assert listed == 200
