"""Who may reach `auger serve` and what they may ask of it: a token on every route (the SSE streams and
`/acp` included), never from the query string; the bound Host only; no cross-site Origin; one-use,
expiring pairing codes; projects inside the roots only; no client-chosen base URL or key; the server's
mode as a ceiling; no plain-HTTP listening beyond loopback. (That `auger exec` imports no web server is
tested with the ACP SDK in tests/test_acp.py.)"""

from __future__ import annotations

import asyncio
import os

import httpx
import pytest

from auger.frontends.http_guard import COOKIE, Pairing
from tests.support.harness import auger_cli
from tests.support.serve import TOKEN, in_process, served

TIMEOUT = 60
ROUTES = [("GET", "/"), ("GET", "/index.html"), ("GET", "/api/sessions"), ("POST", "/api/sessions"),
          ("GET", "/api/sessions/x"), ("POST", "/api/sessions/x/ops"), ("GET", "/api/sessions/x/events"),
          ("GET", "/api/sessions/x/items"), ("GET", "/api/sessions/x/diff"), ("GET", "/api/sessions/x/pending"),
          ("GET", "/api/events"), ("GET", "/api/providers"), ("POST", "/api/providers/openai/probe"),
          ("PATCH", "/api/providers/openai"), ("POST", "/api/pair"), ("GET", "/api/openapi.json"),
          ("GET", "/api/protocol.schema.json"), ("GET", "/api/fleet"), ("POST", f"/api/fleet/tasks/{'0' * 32}/cancel"),
          ("POST", f"/api/fleet/tasks/{'0' * 32}/retry"), ("GET", "/acp")]


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, TIMEOUT))


def test_every_route_without_the_token_is_401_and_a_token_in_the_query_string_is_ignored(project, server, tmp_path):
    async def main():
        async with in_process(project, server, tmp_path / "s.db") as (client, _):
            bare = httpx.AsyncClient(transport=client._transport, base_url="http://127.0.0.1:8765")
            codes = {}
            for method, path in ROUTES:
                codes[(method, path)] = (await bare.request(method, path)).status_code
                codes[(method, path + "?token")] = (await bare.request(method, path, params={
                    "token": TOKEN, "access_token": TOKEN})).status_code
            wrong = (await bare.get("/api/sessions", headers={"authorization": "Bearer " + TOKEN[:-1] + "x"}))
            right = (await client.get("/api/sessions"))
            await bare.aclose()
            return codes, wrong.status_code, right.status_code

    codes, wrong, right = run(main())
    assert set(codes.values()) == {401}, {k: v for k, v in codes.items() if v != 401}
    assert wrong == 401 and right == 200


def test_the_acp_websocket_and_the_sse_streams_refuse_a_client_without_the_token(project, server, tmp_path):
    import websockets

    async def main():
        async with served(project, server, tmp_path / "s.db") as srv:
            ws_url = srv.url.replace("http", "ws") + "/acp"
            with pytest.raises(websockets.InvalidStatus) as refused:
                await websockets.connect(ws_url)
            with pytest.raises(websockets.InvalidStatus) as foreign:
                await websockets.connect(ws_url, additional_headers={"authorization": f"Bearer {TOKEN}"},
                                         origin="http://evil.example")
            async with httpx.AsyncClient(base_url=srv.url) as bare:
                sse = await bare.get("/api/events")
            ok = await websockets.connect(ws_url, additional_headers={"authorization": f"Bearer {TOKEN}"})
            await ok.close()
            return refused.value.response.status_code, foreign.value.response.status_code, sse.status_code

    assert run(main()) == (401, 403, 401)


def test_a_foreign_origin_or_host_is_refused_even_with_the_token(project, server, tmp_path):
    async def main():
        async with in_process(project, server, tmp_path / "s.db") as (client, _):
            origin = await client.get("/api/sessions", headers={"origin": "https://evil.example"})
            fetch = await client.post("/api/sessions", headers={"sec-fetch-site": "cross-site"}, json={})
            host = await client.get("/api/sessions", headers={"host": "attacker.example:8765"})
            rebound = await client.get("/api/sessions", headers={"host": "127.0.0.1.nip.io:8765"})
            same = await client.get("/api/sessions", headers={"origin": "http://127.0.0.1:8765"})
            return origin.status_code, fetch.status_code, host.status_code, rebound.status_code, same.status_code

    assert run(main()) == (403, 403, 403, 403, 200)


def test_the_health_route_answers_without_a_token_with_its_status_alone_and_only_to_the_bound_host(
        project, server, tmp_path):
    from auger._version import __version__

    async def main():
        async with in_process(project, server, tmp_path / "s.db") as (client, _):
            bare = httpx.AsyncClient(transport=client._transport, base_url="http://127.0.0.1:8765")
            ok = await bare.get("/api/health")
            head = await bare.head("/api/health")
            foreign = await bare.get("/api/health", headers={"host": "attacker.example:8765"})
            cross = await bare.get("/api/health", headers={"origin": "https://evil.example"})
            others = [(await bare.request(method, path)).status_code for method, path in (
                ("POST", "/api/health"), ("GET", "/api/health/"), ("GET", "/api/healthz"),
                ("GET", "/api/health/../sessions"), ("GET", "/api/sessions"))]
            await bare.aclose()
            return ok, head, foreign, cross, others

    ok, head, foreign, cross, others = run(main())
    assert ok.status_code == 200 and ok.json() == {"status": "ok", "version": __version__, "store": "ok"}
    assert ok.headers["content-type"] == "application/json" and str(tmp_path) not in ok.text
    assert head.status_code == 200 and head.content == b""
    assert foreign.status_code == 403 and cross.status_code == 403  # still behind the Host and Origin checks
    assert others == [401] * 5  # the one path, read only: everything else still needs the token


def test_the_health_route_answers_503_while_the_database_is_down_and_names_no_url(project, server, tmp_path,
                                                                                  postgres_server, postgres_url):
    async def main():
        async with served(project, server, postgres_url) as srv:
            async with httpx.AsyncClient(base_url=srv.url, timeout=30) as bare:
                up = await bare.get("/api/health")
                postgres_server.stop()
                try:
                    down = await bare.get("/api/health")
                finally:
                    postgres_server.start()
                # the pool reconnects on its own backoff (longer after a slow restart): back within seconds
                deadline = asyncio.get_running_loop().time() + 20
                while (back := await bare.get("/api/health")).status_code != 200:
                    if asyncio.get_running_loop().time() > deadline:
                        break
                    await asyncio.sleep(0.2)
            return up, down, back

    up, down, back = run(main())
    assert up.status_code == 200 and up.json()["store"] == "ok"
    assert down.status_code == 503 and set(down.json()) == {"status", "version", "store"}
    assert down.json()["status"] == "unavailable" and down.json()["store"] == "unreachable"
    assert "postgres" not in down.text and str(postgres_server.dir) not in down.text
    assert back.status_code == 200 and back.json()["store"] == "ok"


def test_a_pairing_code_signs_a_browser_in_once_and_expires(project, server, tmp_path):
    now = [1000.0]
    pairing = Pairing(ttl=60, clock=lambda: now[0])

    async def main():
        async with in_process(project, server, tmp_path / "s.db", pairing=pairing) as (client, _):
            browser = httpx.AsyncClient(transport=client._transport, base_url="http://127.0.0.1:8765")
            code, late = pairing.new_code(), pairing.new_code()
            paired = await browser.get("/pair", params={"code": code})
            cookie = paired.cookies.get(COOKIE)
            browser.cookies.clear()  # each request below says which cookie it sends
            again = await browser.get("/pair", params={"code": code})
            now[0] += 61
            expired = await browser.get("/pair", params={"code": late})
            listed = await browser.get("/api/sessions", headers={"cookie": f"{COOKIE}={cookie}"})
            forged = await browser.get("/api/sessions", headers={"cookie": f"{COOKIE}={cookie.split('.')[0]}.00"})
            no_origin = await browser.post("/api/pair", headers={"cookie": f"{COOKIE}={cookie}"})
            with_origin = await browser.post("/api/pair", headers={"cookie": f"{COOKIE}={cookie}",
                                                                   "origin": "http://127.0.0.1:8765"})
            await browser.aclose()
            return paired, again, expired, listed, forged, no_origin, with_origin

    paired, again, expired, listed, forged, no_origin, with_origin = run(main())
    assert paired.status_code == 303 and paired.headers["location"] == "/"
    set_cookie = paired.headers["set-cookie"]
    assert "HttpOnly" in set_cookie and "SameSite=Strict" in set_cookie
    assert again.status_code == 403 and expired.status_code == 403
    assert listed.status_code == 200 and forged.status_code == 401
    assert no_origin.status_code == 403  # a cookie alone does not change state: same-origin pages only
    assert with_origin.status_code == 201 and "/pair?code=" in with_origin.json()["url"]


def test_cwd_outside_the_roots_is_refused_also_through_dotdot_and_symlinks(project, server, tmp_path):
    root = project / "root"
    (root / "inside").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink(outside, root / "link")

    async def main():
        async with in_process(project, server, tmp_path / "s.db", roots=[root]) as (client, _):
            async def post(cwd):
                return (await client.post("/api/sessions", json={"cwd": cwd})).status_code

            return {"outside": await post(str(outside)), "dotdot": await post(f"{root}/inside/../../outside"),
                    "symlink": await post(str(root / "link")), "relative": await post("inside"),
                    "nul": await post(f"{root}/in\x00side"), "etc": await post("/etc")}

    assert run(main()) == {"outside": 403, "dotdot": 403, "symlink": 403, "relative": 400, "nul": 400, "etc": 403}


def test_a_client_can_never_set_a_base_url_or_key_nor_a_mode_beyond_the_servers(project, server, tmp_path):
    async def main():
        async with in_process(project, server, tmp_path / "s.db") as (client, _):
            cwd = str(project)
            base = await client.post("/api/sessions", json={"cwd": cwd, "base_url": "http://evil.example/v1"})
            key = await client.post("/api/sessions", json={"cwd": cwd, "api_key": "sk-stolen"})
            provider = await client.post("/api/sessions", json={"cwd": cwd, "provider": "http://evil.example"})
            auto = await client.post("/api/sessions", json={"cwd": cwd, "mode": "auto"})
            plan = await client.post("/api/sessions", json={"cwd": cwd, "mode": "plan"})
            sid = plan.json()["id"]

            async def op(submission, body):
                return (await client.post(f"/api/sessions/{sid}/ops",
                                          json={"submission_id": submission, "op": body})).status_code

            ops = {"set_model+base_url": await op("a", {"type": "set_model", "model": "m", "base_url": "http://x"}),
                   "unknown provider": await op("b", {"type": "set_model", "model": "m", "provider": "nope"}),
                   "set_mode auto": await op("c", {"type": "set_mode", "mode": "auto"}),
                   "set_mode safe": await op("d", {"type": "set_mode", "mode": "safe"}),
                   "extra key": await op("e", {"type": "interrupt", "api_key": "k"}),
                   "by": await op("f", {"type": "approval_decision", "request_id": "r", "decision": "approve",
                                        "by": "someone else"}),
                   "bad type": await op("g", {"type": "user_turn", "text": 5}),
                   "newline in id": await op("i\n", {"type": "compact"})}
            top = await client.post(f"/api/sessions/{sid}/ops", json={"submission_id": "h", "op": {"type": "compact"},
                                                                      "base_url": "http://x"})
            return base, key, provider, auto, plan, ops, top

    base, key, provider, auto, plan, ops, top = run(main())
    assert base.status_code == 400 and "base_url" in base.json()["error"]
    assert key.status_code == 400 and provider.status_code == 400
    assert auto.status_code == 403 and plan.status_code == 201 and plan.json()["state"]["mode"] == "plan"
    assert ops == {"set_model+base_url": 400, "unknown provider": 400, "set_mode auto": 403, "set_mode safe": 202,
                   "extra key": 400, "by": 400, "bad type": 400, "newline in id": 400}
    assert top.status_code == 400
    assert all(r.headers.get("host") != "evil.example" for r in server.requests)


def test_serve_refuses_a_non_loopback_host_without_tls(auger_home, project):
    result = auger_cli("serve", "--host", "0.0.0.0", "--port", "0", home=auger_home, cwd=project, timeout=30)
    assert result.returncode == 2
    assert "--tls-cert" in result.stderr and "--insecure-remote" in result.stderr
