"""HTTPS providers: the real `auger exec` against the mock model server behind TLS with a certificate
made for the test. The TLS context is built once, ahead of need (models/tls.py), from the certificates
httpx would use: SSL_CERT_FILE when set, else certifi's bundle, which does not know the test's."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from tests.support.harness import FAST, auger_cli
from tests.support.mock_openai import MockChatServer, Reply


def https_server(certificate: tuple[Path, Path], *replies: Reply) -> MockChatServer:
    server = MockChatServer(list(replies)).start()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*map(str, certificate))
    httpd = server._httpd
    assert httpd is not None
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    return server


def exec_against(server: MockChatServer, project: Path, home: Path, env: dict[str, str]):
    url = server.base_url.replace("http://", "https://")
    overrides = [arg for o in FAST for arg in ("-c", o)]
    return auger_cli("exec", "--base-url", url, "-m", "mock-model", *overrides, "say hi", home=home, cwd=project,
                     env=env)


def test_an_https_provider_is_spoken_to_with_the_certificates_the_user_trusts(certificate, project, isolated_home):
    server = https_server(certificate, Reply(text="hello over TLS"))
    try:
        result = exec_against(server, project, isolated_home, {"SSL_CERT_FILE": str(certificate[0])})
    finally:
        server.stop()
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "hello over TLS"
    assert len(server.chat_requests) == 1


def test_an_untrusted_certificate_is_refused_with_a_clear_error(certificate, project, isolated_home):
    server = https_server(certificate, Reply(text="never sent"), Reply(text="never sent"))
    url = server.base_url.replace("http:", "https:")
    try:
        result = exec_against(server, project, isolated_home, {"SSL_CERT_FILE": "", "SSL_CERT_DIR": ""})
    finally:
        server.stop()
    assert result.returncode != 0
    assert "certificate is not trusted" in result.stderr and url in result.stderr, result.stderr
    assert "SSL_CERT_FILE" in result.stderr and "after 5 attempts" not in result.stderr  # no retry: it cannot help
    assert server.chat_requests == []  # nothing was sent over the connection it refused


def test_the_context_is_built_once_and_only_for_https(monkeypatch):
    from auger.models import tls

    monkeypatch.setattr(tls, "_context", None)
    monkeypatch.setattr(tls, "_builder", None)
    tls.prepare("http://localhost:11434/v1")
    assert tls._builder is None  # a plain-HTTP provider costs nothing
    tls.prepare("https://api.example.test/v1")
    tls.prepare("https://api.example.test/v1")
    first = tls.context()
    assert first is tls.context() and isinstance(first, ssl.SSLContext)
    assert first.verify_mode == ssl.CERT_REQUIRED and first.check_hostname


@pytest.mark.parametrize("where", ["missing", "not-a-certificate"])
def test_a_broken_ssl_cert_file_is_one_clear_line(project, isolated_home, where):
    path = project / "notes.txt" if where == "not-a-certificate" else project / "missing.pem"
    if where == "not-a-certificate":
        path.write_text("just words\n")
    result = auger_cli("exec", "--base-url", "https://127.0.0.1:9/v1", "-m", "mock-model", "hi", home=isolated_home,
                       cwd=project, env={"SSL_CERT_FILE": str(path)})
    assert result.returncode == 2
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert f"from SSL_CERT_FILE ({path})" in result.stderr


def test_a_process_that_exits_while_the_context_is_being_built_exits_cleanly():
    """An early error (a bad `-C`, a broken config) ends the process while the certificates may still be
    loading on their thread; OpenSSL frees its tables at exit, so the thread must be waited for first.
    The exit is tried at several moments of the build; every one must be the process's own code."""
    import subprocess
    import sys

    script = ("import sys, time\nfrom auger.models import tls\ntls.prepare('https://example.invalid')\n"
              "time.sleep(float(sys.argv[1]))\nraise SystemExit(2)\n")
    codes = [subprocess.run([sys.executable, "-c", script, str(delay / 1000)], capture_output=True).returncode
             for delay in range(0, 40, 2)]
    assert codes == [2] * len(codes), codes
