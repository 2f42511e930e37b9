"""Fixtures: an isolated AUGER_HOME, a temp project, a scripted mock model server, a local upstream.
The helpers that drive the engine live in tests/support/harness.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.mock_openai import MockChatServer
from tests.support.plain_venv import plain_python  # noqa: F401  (session-scoped: a venv without the extras)
from tests.support.schema_check import events_match_schema, pytest_terminal_summary  # noqa: F401


def pytest_configure(config) -> None:
    """The suite starts hundreds of `auger` processes. Where PYTHONDONTWRITEBYTECODE is set (CI images set
    it), each would compile every module it imports from the sources again (about 0.2 s apiece): compile
    them once here, so every process reads the bytecode."""
    import compileall
    import os

    if os.environ.get("PYTHONDONTWRITEBYTECODE"):
        compileall.compile_dir(str(Path(__file__).resolve().parent.parent / "src" / "auger"), quiet=1)


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch) -> Path:
    """No test reads or writes the real user config/data dirs (rules, config.toml, sessions)."""
    home = tmp_path / "auger-home"
    home.mkdir()
    # No language servers after edits unless a test asks for them (tests/support/harness.py FAST says why);
    # a test that writes its own config.toml replaces this one.
    (home / "config.toml").write_text("diagnostics = false\n")
    monkeypatch.setenv("AUGER_HOME", str(home))
    return home


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    return root


@pytest.fixture
def server():
    with MockChatServer() as srv:
        yield srv


@pytest.fixture
def upstream():
    """A local HTTP server standing in for a remote host; yields its port. Answers GET with a fixed body."""
    import http.server
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = UPSTREAM_BODY
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield httpd.server_port
    httpd.shutdown()
    httpd.server_close()


UPSTREAM_BODY = b"hello from upstream\n"


@pytest.fixture
def certificate(tmp_path: Path) -> tuple[Path, Path]:
    """A self-signed certificate and key for 127.0.0.1 (PEM files)."""
    import shutil
    import subprocess

    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed: the TLS tests make their certificate with it "
                    "(scripts/install-system-deps installs it)")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True, timeout=60)
    return cert, key


@pytest.fixture
def auger_home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    return home


@pytest.fixture(scope="session")
def postgres_server():
    """One real PostgreSQL server for the whole run (tests/support/postgres.py), started on first use."""
    from tests.support.postgres import PostgresServer, pg_bindir

    if pg_bindir() is None:
        pytest.skip("PostgreSQL is not installed: the PostgreSQL store and fleet tests need its server "
                    "(scripts/install-system-deps installs it)")
    server = PostgresServer()
    yield server
    server.close()


@pytest.fixture
def postgres_url(postgres_server) -> str:
    """A fresh empty database on the shared server."""
    return postgres_server.fresh_database()


@pytest.fixture(params=["sqlite", "postgres"])
def db_target(request, tmp_path: Path) -> str:
    """Where a store test's database is: a SQLite file, or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return str(tmp_path / "sessions.db")
    return request.getfixturevalue("postgres_url")
