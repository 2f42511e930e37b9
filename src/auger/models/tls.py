"""The TLS context HTTPS providers are spoken to with: built once per process, ahead of need.

Loading the CA certificates takes 25–45 ms, most of it in OpenSSL with the GIL released. A front end
that knows it will call an HTTPS provider calls `prepare` first thing, and the context is built on a
thread while the engine's modules are imported; `context` waits for it (or builds it, if nobody did).
A process that exits early (a bad argument, a config error) waits for that thread first: OpenSSL frees
its tables at exit, and a thread still loading certificates then crashes the process.
The certificates are those httpx would use: SSL_CERT_FILE, else SSL_CERT_DIR, else certifi's bundle.
"""

from __future__ import annotations

import atexit
import os
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import ssl

_lock = threading.Lock()
_builder: threading.Thread | None = None
_context: ssl.SSLContext | None = None


class TlsError(Exception):
    """The certificates cannot be loaded; the message names where they were looked for."""


def prepare(base_url: str | None) -> None:
    """Start building the context on a thread, when `base_url` is an HTTPS one."""
    global _builder
    if not (base_url or "").startswith("https:"):
        return
    with _lock:
        if _builder is None and _context is None:
            _builder = threading.Thread(target=_build_ahead, name="auger-tls", daemon=True)
            _builder.start()
            atexit.register(_builder.join)


def context() -> ssl.SSLContext:
    """The process's TLS context: the one `prepare` started, else built now."""
    builder = _builder
    if builder is not None:
        builder.join()
    return _build_once()


def _build_ahead() -> None:
    try:
        _build_once()
    except TlsError:
        pass  # `context` builds again and raises it where it can be reported


def _build_once() -> ssl.SSLContext:
    global _context
    with _lock:
        if _context is None:
            _context = _build()
        return _context


def _build() -> ssl.SSLContext:
    import ssl

    cafile = capath = None
    if os.environ.get("SSL_CERT_FILE"):
        cafile, source = os.environ["SSL_CERT_FILE"], "SSL_CERT_FILE"
    elif os.environ.get("SSL_CERT_DIR"):
        capath, source = os.environ["SSL_CERT_DIR"], "SSL_CERT_DIR"
    else:
        import certifi

        cafile, source = certifi.where(), "certifi's bundle"
    try:
        return ssl.create_default_context(cafile=cafile, capath=capath)
    except (OSError, ssl.SSLError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise TlsError(f"cannot load the TLS certificates HTTPS providers are checked against from {source} "
                       f"({cafile or capath}): {why}") from None
