"""A real loopback web server for the web tools' tests: serves scripted pages and records every request,
so a test can say what reached a host (and that nothing reached another)."""

from __future__ import annotations

import http.server
import threading
from dataclasses import dataclass, field


@dataclass
class Page:
    body: bytes | str = b""
    content_type: str = "text/html; charset=utf-8"
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)  # e.g. {"Location": "..."} for a redirect


@dataclass(frozen=True)
class Seen:
    method: str
    path: str  # with its query string
    headers: dict[str, str]


class WebServer:
    """`with WebServer({"/": Page("<h1>hi</h1>")}) as site:` — `site.port`, `site.url("/x")`, `site.requests`.
    An unknown path answers 404."""

    def __init__(self, pages: dict[str, Page] | None = None, *, certificate: tuple[str, str] | None = None) -> None:
        """`certificate`: (cert file, key file) to serve HTTPS with."""
        self.pages = dict(pages or {})
        self.scheme = "https" if certificate else "http"
        self.requests: list[Seen] = []
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                owner.requests.append(Seen("GET", self.path, {k.lower(): v for k, v in self.headers.items()}))
                page = owner.pages.get(self.path) or owner.pages.get(self.path.split("?", 1)[0]) \
                    or Page("not found", "text/plain", 404)
                body = page.body.encode() if isinstance(page.body, str) else page.body
                self.send_response(page.status)
                self.send_header("Content-Type", page.content_type)
                self.send_header("Content-Length", str(len(body)))
                for name, value in page.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self._httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self._httpd.server_address[1]
        if certificate:
            import ssl

            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*certificate)
            self._httpd.socket = context.wrap_socket(self._httpd.socket, server_side=True)

    def url(self, path: str = "/", host: str = "127.0.0.1") -> str:
        return f"{self.scheme}://{host}:{self.port}{path}"

    def __enter__(self) -> WebServer:
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
