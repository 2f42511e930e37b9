"""`auger serve`: run sessions for browsers, phones, scripts and editors over HTTP.

Starlette, uvicorn and websockets (the `server` extra) are imported here, inside the command: no other
command pays for them. The server binds its socket first, so it can print the real URL (`--port 0`
picks a free one), then prints the pairing link for a browser and where the API token is kept.

Shutdown is graceful: on SIGINT/SIGTERM the running turns are interrupted and recorded, every session
shuts down, each event stream gets a final `closing` event — and only then does uvicorn close the
connections (a second signal quits at once).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, Callable, Iterator

from auger import start_gc
from auger.frontends.cli_support import CliError

DEFAULT_PORT = 8765


def add_commands(sub: Any, store_opts: Callable[[argparse.ArgumentParser], None]) -> dict[str, argparse.ArgumentParser]:
    p = sub.add_parser("serve", help="serve sessions over HTTP: an API, event streams and ACP over WebSocket, "
                                     "for browsers, scripts and editors")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1; another one "
                                                       "needs --tls-cert/--tls-key or --insecure-remote)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0: a free one)")
    p.add_argument("--root", action="append", default=[], metavar="DIR",
                   help="a directory sessions may work in, and below (repeatable; default: the current directory)")
    p.add_argument("-m", "--model", help="model name")
    p.add_argument("-p", "--provider", help="provider name; `auger providers` lists them")
    p.add_argument("--base-url", help="base URL of an OpenAI-compatible API")
    p.add_argument("--mode", choices=("plan", "safe", "auto"), default="safe",
                   help="trust mode of new sessions, and the most permissive one a client may choose (default safe)")
    p.add_argument("--tls-cert", metavar="FILE", help="serve HTTPS with this certificate (PEM)")
    p.add_argument("--tls-key", metavar="FILE", help="...and this private key (PEM)")
    p.add_argument("--insecure-remote", action="store_true",
                   help="allow a non-loopback --host without TLS (the token then crosses the network in clear)")
    p.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                   help="another Host name clients may use to reach this server (repeatable)")
    p.add_argument("--cors-origin", action="append", default=[], metavar="ORIGIN",
                   help="a web origin allowed to call the API from its pages (repeatable; none by default)")
    store_opts(p)
    p.set_defaults(run=_cmd_serve)
    return {"serve": p}


def _cmd_serve(args: argparse.Namespace) -> int:
    import logging

    from auger.config import home_dirs, load_config, valid_base_url
    from auger.extras import require
    from auger.frontends.cli_support import open_store
    from auger.frontends.http_guard import TokenError, is_loopback, load_token

    logging.basicConfig(stream=sys.stderr, level=logging.WARNING,
                        format="auger serve: %(levelname)s %(name)s: %(message)s")
    if args.base_url and not valid_base_url(args.base_url):
        raise CliError(f"--base-url {args.base_url!r} is not an http:// or https:// URL")
    tls = bool(args.tls_cert or args.tls_key)
    if tls and not (args.tls_cert and args.tls_key):
        raise CliError("HTTPS needs both --tls-cert and --tls-key")
    if not is_loopback(args.host) and not tls and not args.insecure_remote:
        raise CliError(f"--host {args.host} is reachable from other machines: serve it over HTTPS "
                       "(--tls-cert/--tls-key), or pass --insecure-remote to send the token in clear")
    roots = [os.path.realpath(r) for r in (args.root or [os.getcwd()])]
    for root in roots:
        if not os.path.isdir(root):
            raise CliError(f"--root {root} is not a directory")
    flags = {"db_path": args.db, "model": args.model, "provider": args.provider or (
        "openai-compatible" if args.base_url else None), "base_url": args.base_url, "mode": args.mode}

    def config_for(project: str) -> Any:
        return load_config(args.overrides, flags, project_dir=Path(project) if os.path.isdir(project) else None)

    for line in config_for(roots[0]).warnings:
        print(f"auger: warning: {line}", file=sys.stderr)
    require("server", "`auger serve`")
    try:
        token, token_source = load_token(os.environ, home_dirs()["data"])
    except TokenError as exc:
        raise CliError(str(exc)) from None
    sock = _bind(args.host, args.port)
    import asyncio

    asyncio.run(_serve(args, sock, config_for, open_store(config_for(roots[0])), roots, token, token_source, tls))
    return 0


def _bind(host: str, port: int) -> Any:
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    from auger.policy.listening import DevPort, refuse_dev_port

    try:
        refuse_dev_port(port)
        sock.bind((host, port))
        refuse_dev_port(sock.getsockname()[1])  # the one port 0 picked
    except (OSError, DevPort) as exc:
        sock.close()
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise CliError(f"cannot listen on {host}:{port}: {reason}") from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


async def _serve(args: argparse.Namespace, sock: Any, config_for: Callable[[str], Any], store: Any,
                 roots: list[str], token: str, token_source: str, tls: bool) -> None:
    import uvicorn

    from auger.frontends.server.app import ServerOptions, create_app
    from auger.frontends.http_guard import exposure, token_whereabouts

    port = sock.getsockname()[1]
    exposed = exposure(args.host, port, tls=tls, allowed_hosts=tuple(args.allow_host),
                       cors_origins=tuple(args.cors_origin))
    app, server = create_app(ServerOptions(store=store, config_for=config_for, roots=roots, mode=args.mode,
                                           token=token, exposure=exposed, secure_cookie=tls))
    shown = f"[{args.host}]" if ":" in args.host else args.host
    url = f"{exposed.scheme}://{'127.0.0.1' if shown in ('0.0.0.0', '[::]') else shown}:{port}"
    from auger.config import home_dirs
    from auger.frontends.servers import announce, store_name

    where = announce(home_dirs()["data"], url, store_name(config_for(roots[0]).db_path))  # for /handoff, attach
    print(f"auger serve: listening on {url}/ (sessions in {', '.join(roots)}; mode at most {args.mode})", flush=True)
    print(f"auger serve: pair a browser: {url}/pair?code={server.pairing.new_code()} "
          f"(works once, for {int(server.pairing.ttl // 60)} minutes)", flush=True)
    print(f"auger serve: API clients send 'Authorization: Bearer <token>' (the token is in "
          f"{token_whereabouts(token_source)})", flush=True)
    config = uvicorn.Config(app, lifespan="on", log_level="warning", ws="websockets-sansio", server_header=False,
                            proxy_headers=False, ssl_certfile=args.tls_cert, ssl_keyfile=args.tls_key,
                            timeout_graceful_shutdown=30)
    from auger.policy.listening import announced

    from auger import dataclass_methods

    dataclass_methods.release()  # the compiled-code cache served start-up; a server would hold it for nothing
    start_gc.serving()  # what exists now lives as long as the server: no full collection walks it again
    try:
        with announced(port):  # no session's sandbox may reach this port through its egress proxy
            await _draining_server(config, server.drain).serve(sockets=[sock])
    finally:
        where.unlink(missing_ok=True)
        await store.aclose()


def _draining_server(config: Any, drain: Callable[[], Any]) -> Any:
    """uvicorn's Server, draining the sessions and streams before it closes the connections (otherwise it
    would wait for event streams that never end on their own), and exiting 0 after a graceful shutdown
    (uvicorn would raise the signal again once done)."""
    import asyncio
    import contextlib
    import signal

    import uvicorn

    class Draining(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, self.handle_exit, sig, None)
            try:
                yield
            finally:
                for sig in (signal.SIGINT, signal.SIGTERM):
                    loop.remove_signal_handler(sig)

        def handle_exit(self, sig: int, frame: Any) -> None:
            if self.should_exit:  # a second signal while draining: quit at once
                os._exit(128 + sig)
            super().handle_exit(sig, frame)

        async def shutdown(self, sockets: list[Any] | None = None) -> None:
            await drain()
            await super().shutdown(sockets)

    return Draining(config)
