"""The TLS context HTTPS providers are spoken to with: built once per process, ahead of need.

Loading the CA certificates takes 25–45 ms, most of it in OpenSSL with the GIL released. A front end
that knows it will call an HTTPS provider calls `prepare` first thing, and the context is built on a
thread while the engine's modules are imported; `context` waits for it (or builds it, if nobody did).
The certificates are those httpx would use: SSL_CERT_FILE, else SSL_CERT_DIR, else certifi's bundle.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import ssl

_lock = threading.Lock()
_builder: threading.Thread | None = None
_context: ssl.SSLContext | None = None


def prepare(base_url: str | None) -> None:
    """Start building the context on a thread, when `base_url` is an HTTPS one."""
    global _builder
    if not (base_url or "").startswith("https:"):
        return
    with _lock:
        if _builder is None and _context is None:
            _builder = threading.Thread(target=_build_once, name="auger-tls", daemon=True)
            _builder.start()


def context() -> ssl.SSLContext:
    """The process's TLS context: the one `prepare` started, else built now."""
    builder = _builder
    if builder is not None:
        builder.join()
    return _build_once()


def _build_once() -> ssl.SSLContext:
    global _context
    with _lock:
        if _context is None:
            _context = _build()
        return _context


def _build() -> ssl.SSLContext:
    import ssl

    if os.environ.get("SSL_CERT_FILE"):
        return ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"])
    if os.environ.get("SSL_CERT_DIR"):
        return ssl.create_default_context(capath=os.environ["SSL_CERT_DIR"])
    import certifi

    return ssl.create_default_context(cafile=certifi.where())
