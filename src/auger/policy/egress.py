"""The egress proxy: the only way out of a network-isolated sandbox, limited to allowlisted hosts.

Sandboxed commands run in a network namespace with nothing but a private loopback
(`bwrap --unshare-net`), so there is no route out. Each session runs one
`EgressProxy` on the host. It speaks two protocols, because clients differ in what
they support:

- an HTTP proxy: `CONNECT host:port` tunnels (HTTPS, git, anything over TCP) and
  absolute-form plain-HTTP requests (`GET http://host/path`), which it forwards in
  origin-form with `Connection: close`;
- a SOCKS5 proxy (RFC 1928, no authentication, CONNECT only).

Both decide with the same `Allowlist` of host names, and both are served on Unix
sockets in `socket_dir`, on loopback TCP ports, or on both (tests). The Unix sockets are
what a bubblewrap sandbox sees: its 127.0.0.1 is not the host's, so the session's
supervisor (policy/supervisor.py, its network bridge) listens on the sandbox's loopback
and forwards every connection to those sockets; such a session's proxy opens no port.
A command on the host's network (Landlock, which restricts TCP by port) reaches the
ports, and that session's proxy makes no socket directory. A session's proxy runs while
its sandbox does (policy/confinement.py).

The proxy resolves names itself (static `hosts` entries first, then DNS), so a
client cannot choose the address an allowed name connects to, and it checks the
name the client asked for, never an address it resolved. One check is on the
address: a port one of auger's own servers listens on, on this machine
(policy/listening.py), is never connected to, whatever name led there. What it cannot see:
the TLS SNI and the HTTP Host inside a CONNECT tunnel (domain fronting through an
allowed CDN host still works), and what an allowed host does with the bytes it is
sent (an allowlist limits reachability, it does not prevent exfiltration to, say,
github.com).

Relaying is done by protocols that write each received chunk straight to the peer
transport, with the transports' flow control pausing the faster side; there is no
task and no extra buffer per chunk.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import ipaddress
import logging
import os
import re
import socket
import struct
import time
from functools import partial
from pathlib import Path
from typing import Awaitable, Callable, Iterable, Mapping, cast

from auger.lazy_dataclass import Deferred, dataclass
from auger.lazy_regex import lazy_compile

log = logging.getLogger(__name__)

# A development allowlist: package registries, code hosts and OS package mirrors, so that installs,
# fetches and clones work in the sandbox. Everything else is refused; users add hosts with
# `egress_allow`. Keep entries specific: a wildcard allows every name one label below it.
DEFAULT_ALLOWLIST: tuple[str, ...] = (
    # Python: the index and its file CDN.
    "pypi.org",
    "files.pythonhosted.org",
    # JavaScript: npm, and yarn (classic registry and berry's repo).
    "registry.npmjs.org",
    "registry.yarnpkg.com",
    "repo.yarnpkg.com",
    # Code hosts. GitHub serves clones from github.com, archives from codeload, release assets and
    # raw files from *.githubusercontent.com (objects., raw., release-assets., ...).
    "github.com",
    "api.github.com",
    "codeload.github.com",
    "objects.githubusercontent.com",
    "raw.githubusercontent.com",
    "*.githubusercontent.com",
    "gitlab.com",
    "bitbucket.org",
    # Rust: crates.io API, its sparse index and crate downloads; rustup's toolchains.
    "crates.io",
    "index.crates.io",
    "static.crates.io",
    "static.rust-lang.org",
    # Go: the module proxy and checksum database (goproxy.io, a third-party mirror, is left out).
    "proxy.golang.org",
    "sum.golang.org",
    # Ruby: gems and bundler's compact index.
    "rubygems.org",
    "index.rubygems.org",
    # JVM: Maven Central and Gradle (plugins, and the wrapper's distribution downloads).
    "repo.maven.apache.org",
    "repo1.maven.org",
    "plugins.gradle.org",
    "services.gradle.org",
    "downloads.gradle.org",
    # PHP and .NET registries.
    "repo.packagist.org",
    "api.nuget.org",
    # Debian and Ubuntu package mirrors (apt inside a container-like sandbox).
    "deb.debian.org",
    "security.debian.org",
    "archive.ubuntu.com",
    "security.ubuntu.com",
)

HEAD_LIMIT = 64 * 1024  # bytes: largest request or response head we parse
HEAD_TIMEOUT = 30.0  # seconds a client gets to send its request head or SOCKS handshake
CONNECT_TIMEOUT = 30.0  # seconds to resolve and connect upstream
BUFFER_LIMIT = 256 * 1024  # bytes buffered from one side before its reading pauses
WRITE_HIGH_WATER = 256 * 1024  # transport write buffer size at which the other side pauses
LINGER = 2.0  # seconds an error reply's connection keeps draining input before it is closed

# ------------------------------------------------------------------------------------------------
# The allowlist

_LABEL = lazy_compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?\Z")
_NUMERIC_LABEL = lazy_compile(r"(?:[0-9]+|0x[0-9a-f]*)\Z")


def _host_error(name: str) -> str | None:
    """Why `name` (lowercase, no trailing dot) is not an acceptable host name; None if it is.

    Names are ASCII: internationalised names must be given in their `xn--` form, which is what
    clients put on the wire, so there is no IDNA mapping to disagree about. A name whose last label
    is numeric is refused because resolvers read `127.1` or `0x7f.1` as IP addresses: such a name
    could reach an address that was never listed.
    """
    if not name:
        return "empty host name"
    if len(name) > 253:
        return "host name longer than 253 characters"
    if not name.isascii():
        return "non-ASCII host name (write internationalised names in their xn-- form)"
    labels = name.split(".")
    for label in labels:
        if not _LABEL.match(label):
            return f"invalid label {label!r}"
    if _NUMERIC_LABEL.match(labels[-1]):
        return "looks like an IP address but is not one in standard form"
    return None


def _canonical(host: str) -> str:
    """Lowercase, one trailing dot removed, IPv6 brackets removed."""
    host = host.lower()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif host.endswith("."):
        host = host[:-1]
    return host


def _ip(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


class Allowlist:
    """Which hosts the proxy may connect to.

    Patterns are exact host names (case-insensitive, a trailing dot ignored), `*.example.com`
    wildcards that match exactly one label below the base (`a.example.com`, not `example.com`,
    not `a.b.example.com`: one level keeps a wildcard's reach visible), and IP literals, which
    match only the same address. A host name never matches an IP pattern or the reverse: what the
    user listed is what can be reached. Invalid patterns raise `ValueError` naming the pattern, so
    a typo in a configuration is reported rather than silently allowing nothing.
    """

    def __init__(self, patterns: Iterable[str]) -> None:
        self._exact: set[str] = set()
        self._wild: set[str] = set()
        self._ips: set[ipaddress.IPv4Address | ipaddress.IPv6Address] = set()
        kept: list[str] = []
        for pattern in patterns:
            if not isinstance(pattern, str):
                raise ValueError(f"invalid egress allowlist pattern {pattern!r}: not a string")
            text = _canonical(pattern.strip())
            address = _ip(text)
            if address is not None:
                self._ips.add(address)
            elif text.startswith("*."):
                problem = _host_error(text[2:])
                if problem:
                    raise ValueError(f"invalid egress allowlist pattern {pattern!r}: {problem}"
                                     " (wildcards are '*.' followed by a host name)")
                self._wild.add(text[2:])
            else:
                problem = _host_error(text)
                if problem:
                    raise ValueError(f"invalid egress allowlist pattern {pattern!r}: {problem}")
                self._exact.add(text)
            kept.append(text)
        self.patterns: tuple[str, ...] = tuple(kept)

    def allows(self, host: str) -> bool:
        """Whether a connection to `host` (a name or an IP literal, as a client sent it) is allowed."""
        return self._match(host) is not None

    def _match(self, host: str) -> str | None:
        """The canonical form of `host` if it is allowed, else None: the proxy connects to exactly
        the name it checked."""
        if not isinstance(host, str):
            return None
        name = _canonical(host)
        address = _ip(name)
        if address is not None:
            return name if address in self._ips else None
        if _host_error(name):
            return None
        if name in self._exact:
            return name
        _, dot, parent = name.partition(".")
        return name if dot and parent in self._wild else None

    def __repr__(self) -> str:
        return f"Allowlist({list(self.patterns)!r})"


# ------------------------------------------------------------------------------------------------
# Relaying


class _Refused(Exception):
    """The request is answered with an error and the connection closed; the message says why."""

    def __init__(self, status: int, reason: str, socks_reply: int = 0x01) -> None:
        super().__init__(reason)
        self.status = status
        self.socks_reply = socks_reply


class _Closed(Exception):
    """The other side closed (or reset) the connection before sending what was expected."""


class _OwnServer(Exception):
    """The destination is one of auger's own servers on this machine: never a sandboxed command's to reach."""


class _Pipe(asyncio.Protocol):
    """One side of a relayed connection (the client's or the upstream's socket).

    A pipe starts in buffering mode, where the handshake code reads from it (`read_head`,
    `read_exactly`), and switches to forwarding mode (`forward`), where every chunk it receives is
    written straight to its peer's transport. Flow control couples the two: when the peer's write
    buffer fills, this side stops reading until it drains. End of input is passed on as a half-close
    (`write_eof`) so request/response protocols that shut down their sending side keep working; the
    pair is closed when both directions have ended or either socket is lost.
    """

    def __init__(self, proxy: EgressProxy, serve: Callable[[_Pipe], Awaitable[None]] | None = None) -> None:
        self.proxy = proxy
        self.serve = serve  # a client pipe's handshake, started once connected
        self._transport: asyncio.Transport | None = None  # set by connection_made
        self.peer: _Pipe | None = None
        self.task: asyncio.Task | None = None  # the running handshake; cancelled if the client goes
        self.buffer = bytearray()
        self.forwarding = False
        self.eof = False  # received end of input
        self.lost = False
        self.write_paused = False
        self.close_on_eof = False  # plain HTTP: the upstream's end of response ends the exchange
        self.discarding = False  # an error reply was sent: input is drained and dropped until close
        self._waiter: asyncio.Future | None = None
        self._linger: asyncio.TimerHandle | None = None
        self._reading_paused = False

    @property
    def transport(self) -> asyncio.Transport:
        """The connection's transport. Nothing else runs on a pipe before `connection_made` set it:
        the pipe joins the proxy's set and starts its handshake only there."""
        if self._transport is None:
            raise RuntimeError("egress pipe used before it connected")
        return self._transport

    # -- asyncio callbacks -------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # a stream server (TCP or Unix) always hands its protocol a full Transport
        self._transport = connected = cast(asyncio.Transport, transport)
        if self.proxy._stopping:
            connected.abort()
            return
        connected.set_write_buffer_limits(high=WRITE_HIGH_WATER)
        self.proxy._pipes.add(self)
        if self.serve is not None:
            self.task = asyncio.get_running_loop().create_task(self.proxy._run(self.serve, self))

    def data_received(self, data: bytes) -> None:
        if self.discarding:
            return
        if self.forwarding:
            assert self.peer is not None  # forwarding starts only once a peer is connected
            peer = self.peer.transport
            if not peer.is_closing():
                peer.write(data)
            return
        self.buffer += data
        self._wake()
        self._update_reading()

    def eof_received(self) -> bool:
        self.eof = True
        self._wake()
        if self.discarding:
            self.transport.close()
        elif self.forwarding:
            self._pass_eof()
        return True  # keep the transport open: the other direction may still be running

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = self.eof = True
        self.proxy._pipes.discard(self)
        self._wake()
        if self._linger is not None:
            self._linger.cancel()
        if self.forwarding and self.peer is not None:
            self.peer.transport.close()  # flushes what is already queued, then closes
        if self.task is not None and not self.task.done():
            self.task.cancel()

    def pause_writing(self) -> None:
        self.write_paused = True
        if self.peer is not None:
            self.peer._update_reading()

    def resume_writing(self) -> None:
        self.write_paused = False
        if self.peer is not None:
            self.peer._update_reading()

    # -- modes ---------------------------------------------------------------------------------------

    def forward(self) -> None:
        """Switch to forwarding: send what is buffered to the peer, then relay as data arrives."""
        self.forwarding = True
        peer = self.peer
        assert peer is not None  # forwarding needs somewhere to forward to
        if self.buffer:
            if not peer.transport.is_closing():
                peer.transport.write(bytes(self.buffer))
            self.buffer.clear()
        if self.lost:
            peer.transport.close()
        elif self.eof:
            self._pass_eof()
        self._update_reading()

    def _pass_eof(self) -> None:
        """Our input ended: half-close the peer, or close both when the peer's input ended too.

        A peer still buffering (a plain-HTTP response head being read) is only half-closed even if
        its input ended: its own `forward()` finishes the pair once what it holds is delivered.
        """
        peer = self.peer
        assert peer is not None  # only a forwarding pipe passes its end of input on
        if self.close_on_eof or (peer.eof and peer.forwarding) or not peer.transport.can_write_eof():
            peer.transport.close()
            self.transport.close()
        elif not peer.transport.is_closing():
            peer.transport.write_eof()

    def _update_reading(self) -> None:
        """Pause reading while the buffer is full (handshake) or the peer cannot take more."""
        if self._transport is None or self._transport.is_closing():
            return
        if self.discarding:
            pause = False
        elif self.forwarding:
            pause = self.peer is not None and self.peer.write_paused
        else:
            pause = len(self.buffer) >= BUFFER_LIMIT
        if pause != self._reading_paused:
            self._reading_paused = pause
            (self.transport.pause_reading if pause else self.transport.resume_reading)()

    # -- handshake reads -----------------------------------------------------------------------------

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def _more(self) -> None:
        if self.eof:
            raise _Closed("connection closed")
        self._waiter = asyncio.get_running_loop().create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None

    async def read_head(self) -> bytes:
        """Bytes up to and including the blank line that ends an HTTP head (CRLF or bare LF)."""
        start = 0
        while True:
            match = _HEAD_END.search(self.buffer, max(0, start - 3))
            if match and match.end() <= HEAD_LIMIT:
                head = bytes(self.buffer[:match.end()])
                del self.buffer[:match.end()]
                self._update_reading()
                return head
            if match or len(self.buffer) > HEAD_LIMIT:
                raise _Refused(400, f"head larger than {HEAD_LIMIT} bytes")
            start = len(self.buffer)
            await self._more()

    async def read_exactly(self, n: int) -> bytes:
        while len(self.buffer) < n:
            await self._more()
        data = bytes(self.buffer[:n])
        del self.buffer[:n]
        self._update_reading()
        return data

    def send_and_close(self, data: bytes) -> None:
        """Send an error reply and end the connection without losing the reply.

        Closing a socket with unread input makes the kernel send a reset, which can destroy a reply
        the client has not read yet (think of a refused upload still sending its body). So the
        sending side is shut down, input is read and dropped until the client closes, and the
        connection is closed after `LINGER` seconds at the latest.
        """
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        transport.write(data)
        if self.eof or not transport.can_write_eof():
            transport.close()
            return
        transport.write_eof()
        self.discarding = True
        self.buffer.clear()
        self._update_reading()
        self._linger = asyncio.get_running_loop().call_later(LINGER, transport.close)


_HEAD_END = re.compile(rb"\r?\n\r?\n")

# ------------------------------------------------------------------------------------------------
# HTTP


NOT_ALLOWED = "not in the egress allowlist; the user can add hosts with egress_allow"
OWN_SERVER = "one of auger's own servers, which no sandboxed command may reach"


@dataclass
class Denial(Deferred):
    """One refused connection attempt: which host and port, through which protocol, when, and why."""

    host: str
    port: int
    via: str  # "http" | "socks"
    at: float  # time.time()
    why: str = NOT_ALLOWED


_TOKEN = lazy_compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+\Z")
_VERSION = lazy_compile(r"HTTP/1\.[01]\Z")
_HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "te", "upgrade"}
_REASONS = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway"}


def _this_machine(family: int, sockaddr: tuple) -> bool:
    """Whether an address is this machine's own (loopback, unspecified, or one of its interfaces'):
    binding a socket to it succeeds only then."""
    address = _ip(str(sockaddr[0]).split("%")[0])
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if address is not None and (address.is_loopback or address.is_unspecified):
        return True
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.bind((sockaddr[0], 0, *sockaddr[2:]))
    except OSError:
        return False
    return True


def _split_authority(authority: str, default_port: int | None) -> tuple[str, int]:
    """`host:port`, `[v6]:port` or (with a default) a bare host, as (host, port)."""
    if authority.startswith("["):
        end = authority.find("]")
        if end < 0:
            raise _Refused(400, f"bad authority {authority!r}")
        host, rest = authority[1:end], authority[end + 1:]
        if rest and not rest.startswith(":"):
            raise _Refused(400, f"bad authority {authority!r}")
        port_text = rest[1:] if rest else None
    else:
        host, sep, port_text = authority.rpartition(":")
        if not sep:
            host, port_text = authority, None
        if ":" in host:
            raise _Refused(400, f"bad authority {authority!r} (IPv6 addresses go in brackets)")
    if port_text is None:
        if default_port is None:
            raise _Refused(400, f"bad authority {authority!r} (a port is required)")
        port = default_port
    elif port_text.isascii() and port_text.isdigit() and 0 < int(port_text) < 65536:
        port = int(port_text)
    else:
        raise _Refused(400, f"bad port in {authority!r}")
    if not host:
        raise _Refused(400, f"bad authority {authority!r} (no host)")
    return host, port


def _parse_head(head: bytes) -> tuple[str, list[tuple[str, str]]]:
    """The first line and the header fields of an HTTP head; 400 for anything malformed."""
    text = head.decode("latin-1")
    lines = text.replace("\r\n", "\n").split("\n")
    while lines and not lines[-1]:
        lines.pop()
    if not lines:
        raise _Refused(400, "empty request")
    fields = []
    for line in lines[1:]:
        name, colon, value = line.partition(":")
        if not colon or not _TOKEN.match(name):
            raise _Refused(400, f"malformed header line {line[:80]!r}")
        if any(c in value for c in "\r\0"):
            raise _Refused(400, f"malformed header {name!r}")
        fields.append((name, value.strip(" \t")))
    return lines[0], fields


def _end_to_end(fields: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The fields a proxy passes on: without hop-by-hop ones, `Proxy-*`, and those `Connection` names."""
    named = {token.strip().lower() for name, value in fields if name.lower() == "connection"
             for token in value.split(",")}
    return [(name, value) for name, value in fields
            if (low := name.lower()) not in _HOP_BY_HOP and low not in named and not low.startswith("proxy-")]


def _response(status: int, text: str) -> bytes:
    body = (text + "\n").encode("utf-8", "replace")
    return (f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\n"
            "Content-Type: text/plain; charset=utf-8\r\n"
            f"Content-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n").encode("latin-1") + body


def _printable(text: str) -> str:
    """A client-supplied string made safe to show: control characters escaped, length capped."""
    shown = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text[:300])
    return shown + ("..." if len(text) > 300 else "")


# ------------------------------------------------------------------------------------------------
# SOCKS5 (RFC 1928)

_SOCKS_OK = 0x00
_SOCKS_FAILURE = 0x01
_SOCKS_NOT_ALLOWED = 0x02
_SOCKS_NET_UNREACHABLE = 0x03
_SOCKS_HOST_UNREACHABLE = 0x04
_SOCKS_REFUSED = 0x05
_SOCKS_BAD_COMMAND = 0x07
_SOCKS_BAD_ADDRESS = 0x08


def _socks_reply(code: int, bound: tuple | None = None) -> bytes:
    """A reply with the bound address (IPv4 0.0.0.0:0 when there is none)."""
    if bound is not None:
        address = ipaddress.ip_address(bound[0].split("%")[0])
        atyp = 0x01 if address.version == 4 else 0x04
        return bytes((5, code, 0, atyp)) + address.packed + struct.pack("!H", bound[1])
    return bytes((5, code, 0, 1, 0, 0, 0, 0, 0, 0))


def _socks_code(exc: BaseException) -> int:
    if isinstance(exc, socket.gaierror):
        return _SOCKS_HOST_UNREACHABLE
    if isinstance(exc, ConnectionRefusedError):
        return _SOCKS_REFUSED
    if isinstance(exc, TimeoutError):
        return _SOCKS_HOST_UNREACHABLE
    if isinstance(exc, OSError) and exc.errno == errno.ENETUNREACH:
        return _SOCKS_NET_UNREACHABLE
    if isinstance(exc, OSError) and exc.errno == errno.EHOSTUNREACH:
        return _SOCKS_HOST_UNREACHABLE
    return _SOCKS_FAILURE


# ------------------------------------------------------------------------------------------------
# The proxy




def check_hosts(hosts: Mapping[str, str]) -> dict[str, str]:
    """Static name -> IP entries, canonical; ValueError naming an entry whose address is not an IP address."""
    checked = {}
    for name, address in hosts.items():
        if _ip(_canonical(address)) is None:
            raise ValueError(f"invalid egress hosts entry {name!r}: {address!r} is not an IP address")
        checked[_canonical(name)] = _canonical(address)
    return checked


def make_socket_dir(parent: Path | None = None) -> Path:
    """A new private directory for a proxy's Unix sockets (`auger-egress-<pid>-XXXX`); those that
    killed processes left behind are removed first."""
    from auger.process import owned_temp_dir

    return owned_temp_dir("egress", parent)


class EgressProxy:
    """A per-session HTTP + SOCKS5 proxy that only connects to allowlisted hosts.

    It listens on Unix sockets in `socket_dir` (what a bubblewrap sandbox, with a network of its own,
    reaches through its bridge), on two ephemeral 127.0.0.1 ports with `tcp` (what a command on the
    host's network reaches), or both: each session's proxy opens only what its sandbox uses, so a
    thousand sandboxed sessions hold no loopback ports.

    `hosts` holds static name -> IP entries consulted before DNS (like /etc/hosts). Every refused
    attempt is appended to `denials`, so the engine can tell the model why a command's download
    failed (`denials_since` the command started).
    """

    def __init__(self, allowlist: Allowlist, *, socket_dir: Path | None = None, tcp: bool = True,
                 hosts: Mapping[str, str] | None = None, denials: list[Denial] | None = None) -> None:
        """`denials`: where refusals are appended (a list that outlives this proxy, say)."""
        if socket_dir is None and not tcp:
            raise ValueError("an egress proxy listens on Unix sockets, on loopback ports, or on both")
        self.allowlist = allowlist
        self.socket_dir = Path(socket_dir) if socket_dir is not None else None
        self.tcp = tcp
        self.hosts = check_hosts(hosts or {})
        self.http_port = 0  # with `tcp`
        self.socks_port = 0
        self.http_socket = self.socket_dir / "http.sock" if self.socket_dir is not None else None
        self.socks_socket = self.socket_dir / "socks.sock" if self.socket_dir is not None else None
        self.denials: list[Denial] = [] if denials is None else denials
        self._servers: list[asyncio.Server] = []
        self._pipes: set[_Pipe] = set()
        self._tasks: set[asyncio.Task] = set()
        self._stopping = False

    async def start(self) -> None:
        """Listen on `http.sock`/`socks.sock` in `socket_dir` and, with `tcp`, on two ephemeral 127.0.0.1
        ports (`http_port`, `socks_port`)."""
        if self._servers:
            raise RuntimeError("EgressProxy.start() called twice")
        loop = asyncio.get_running_loop()
        for sock in (self.http_socket, self.socks_socket):
            if sock is not None and len(os.fsencode(sock)) > 107:
                raise OSError(errno.ENAMETOOLONG, f"Unix socket path longer than 107 bytes: {sock}")
        if self.socket_dir is not None:
            self.socket_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        ports: list[int] = []
        try:
            for serve, path in ((self._serve_http, self.http_socket), (self._serve_socks, self.socks_socket)):
                if self.tcp:
                    tcp = await loop.create_server(partial(_Pipe, self, serve), "127.0.0.1", 0)
                    self._servers.append(tcp)
                    ports.append(tcp.sockets[0].getsockname()[1])
                if path is not None:
                    unix = await loop.create_unix_server(partial(_Pipe, self, serve), os.fspath(path))
                    self._servers.append(unix)
                    os.chmod(path, 0o600)  # only this user (and its sandboxes) may use the proxy
        except BaseException:
            await self.stop()
            raise
        if ports:
            self.http_port, self.socks_port = ports
        log.debug("egress proxy: http on 127.0.0.1:%d and %s, socks on 127.0.0.1:%d and %s",
                  self.http_port, self.http_socket, self.socks_port, self.socks_socket)

    async def stop(self) -> None:
        """Stop listening and drop every connection, tunnels included, at once."""
        self._stopping = True
        for server in self._servers:
            server.close()
        for task in list(self._tasks):
            task.cancel()
        for pipe in list(self._pipes):
            pipe.transport.abort()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        for server in self._servers:
            await server.wait_closed()
        self._servers.clear()
        for path in (self.http_socket, self.socks_socket):
            if path is not None:
                with contextlib.suppress(OSError):
                    path.unlink()

    def denials_since(self, t: float) -> list[Denial]:
        return [d for d in self.denials if d.at >= t]

    # -- connection plumbing -----------------------------------------------------------------------

    async def _run(self, serve: Callable[[_Pipe], Awaitable[None]], client: _Pipe) -> None:
        """Run a handshake; nothing it raises reaches the loop's exception handler.

        An upstream connection the handshake opened but did not start relaying (the client went
        away, the response was unusable) is dropped here, so no path leaves one behind.
        """
        task = asyncio.current_task()
        assert task is not None  # connection_made started this coroutine as a task
        self._tasks.add(task)
        try:
            await serve(client)
        except asyncio.CancelledError:
            client.transport.abort()
        except Exception:  # an engine bug: log it, drop the connection, keep serving
            log.exception("egress proxy: unexpected error")
            client.transport.abort()
        finally:
            self._tasks.discard(task)
            upstream = client.peer
            if upstream is not None and not upstream.forwarding:
                upstream.transport.abort()

    def _refuse(self, host: str, port: int, via: str, why: str = NOT_ALLOWED) -> None:
        host = _printable(host)  # it is shown to the model and stored: no control characters
        self.denials.append(Denial(host, port, via, time.time(), why))
        log.info("egress proxy: refused %s:%d (%s)", host, port, via)

    async def _resolve(self, host: str, port: int) -> list[tuple]:
        """Addresses to try for an allowed host: a static entry, an IP literal, or DNS."""
        address = self.hosts.get(host, host)
        ip = _ip(address)
        if ip is not None:
            family = socket.AF_INET if ip.version == 4 else socket.AF_INET6
            return [(family, (address, port))]
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
        seen, result = set(), []
        for family, _, _, _, sockaddr in infos:
            if family in (socket.AF_INET, socket.AF_INET6) and sockaddr not in seen:
                seen.add(sockaddr)
                result.append((family, sockaddr))
        if not result:
            raise socket.gaierror(socket.EAI_NONAME, "no IPv4 or IPv6 address")
        return result

    async def _connect(self, client: _Pipe, host: str, port: int) -> _Pipe:
        """Connect to an allowed host and pair the new upstream pipe with `client`.

        Addresses are tried in order; the last error is raised if none accepts.
        """
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(CONNECT_TIMEOUT):
            last: BaseException | None = None
            addresses = await self._resolve(host, port)
            if any(_this_machine(family, sockaddr) for family, sockaddr in addresses):
                from auger.policy.listening import own_ports  # read only for this machine's addresses

                if port in own_ports():
                    raise _OwnServer(port)
            for family, sockaddr in addresses:
                sock = socket.socket(family, socket.SOCK_STREAM)
                sock.setblocking(False)
                try:
                    await loop.sock_connect(sock, sockaddr)
                    _, upstream = await loop.create_connection(lambda: _Pipe(self), sock=sock)
                except OSError as exc:
                    sock.close()
                    last = exc
                    continue
                except BaseException:
                    sock.close()
                    raise
                upstream.peer, client.peer = client, upstream
                return upstream
            raise last or OSError("no address to connect to")

    # -- HTTP ----------------------------------------------------------------------------------------

    async def _serve_http(self, client: _Pipe) -> None:
        try:
            async with asyncio.timeout(HEAD_TIMEOUT):
                head = await client.read_head()
            request_line, fields = _parse_head(head)
            parts = request_line.split(" ")
            if len(parts) != 3 or not _TOKEN.match(parts[0]) or not _VERSION.match(parts[2]):
                raise _Refused(400, f"malformed request line {_printable(request_line)!r}")
            method, target, version = parts
            if method == "CONNECT":
                await self._http_connect(client, target)
            else:
                await self._http_forward(client, method, target, version, fields)
        except _Refused as exc:
            client.send_and_close(_response(exc.status, f"auger egress proxy: {exc}"))
        except (_Closed, TimeoutError):
            client.transport.abort()

    async def _open(self, client: _Pipe, host: str, port: int, via: str) -> _Pipe:
        """The allowlist check and the upstream connection, shared by both protocols."""
        name = self.allowlist._match(host)
        if name is None:
            self._refuse(host, port, via)
            raise _Refused(403, f"host '{_printable(host)}' is not in the allowlist", _SOCKS_NOT_ALLOWED)
        try:
            return await self._connect(client, name, port)
        except _OwnServer:
            self._refuse(host, port, via, OWN_SERVER)
            raise _Refused(403, f"port {port} of this machine is {OWN_SERVER}", _SOCKS_NOT_ALLOWED) from None
        except (OSError, TimeoutError) as exc:
            reason = ("connection timed out" if isinstance(exc, TimeoutError)
                      else os.strerror(exc.errno) if exc.errno and not isinstance(exc, socket.gaierror)
                      else exc.strerror or str(exc))
            raise _Refused(502, f"cannot connect to {name}:{port}: {reason}", _socks_code(exc)) from None

    async def _http_connect(self, client: _Pipe, target: str) -> None:
        host, port = _split_authority(target, None)
        upstream = await self._open(client, host, port, "http")
        if client.lost:
            return
        client.transport.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
        client.forward()  # bytes the client sent after its head are the tunnel's first bytes
        upstream.forward()

    async def _http_forward(self, client: _Pipe, method: str, target: str, version: str,
                            fields: list[tuple[str, str]]) -> None:
        """Forward one absolute-form request in origin-form, then relay the response.

        The origin is asked for `Connection: close` and the client is told the same, so one
        connection carries one exchange and the upstream's close ends it. There is no timeout on
        the response: an origin may legitimately take long, and the client can give up by closing.
        """
        scheme, sep, rest = target.partition("://")
        if not sep or scheme.lower() != "http":
            if target.startswith("/"):
                raise _Refused(400, "this is a proxy: requests must use an absolute http:// URL or CONNECT")
            raise _Refused(400, f"unsupported request target {_printable(target)!r} (https goes through CONNECT)")
        cut = min((i for i in (rest.find("/"), rest.find("?"), rest.find("#")) if i >= 0), default=len(rest))
        authority, path = rest[:cut].rpartition("@")[2], rest[cut:].partition("#")[0]
        host, port = _split_authority(authority, 80)
        if not path.startswith("/"):
            path = "/" + path
        upstream = await self._open(client, host, port, "http")
        if client.lost:
            return
        checked = _canonical(host)  # the Host the origin sees is the name that was checked
        host_field = (f"[{checked}]" if ":" in checked else checked) + ("" if port == 80 else f":{port}")
        lines = [f"{method} {path} {version}", f"Host: {host_field}"]
        lines += [f"{name}: {value}" for name, value in _end_to_end(fields) if name.lower() != "host"]
        lines.append("Connection: close")
        upstream.transport.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        client.forward()  # the request body, if any, streams on while the response head is read

        while True:  # interim responses (100 Continue, 103) pass through; the final one is rewritten
            try:
                head = await upstream.read_head()
                status_line, response_fields = _parse_head(head)
                status = status_line.split(" ", 2)
                if len(status) < 2 or not status[0].startswith("HTTP/") or not status[1].isdigit():
                    raise _Refused(502, "upstream sent a malformed response")
            except _Closed:
                raise _Refused(502, "upstream closed the connection without a response") from None
            except _Refused as exc:
                raise _Refused(502, f"upstream response: {exc}") from None
            if not status[1].startswith("1") or status[1] == "101":  # (101 is not expected: Upgrade was removed)
                break
            client.transport.write(head)
        lines = [status_line, *(f"{name}: {value}" for name, value in _end_to_end(response_fields)),
                 "Connection: close"]
        client.transport.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        upstream.close_on_eof = True  # the response ends when the upstream closes: end the exchange
        upstream.forward()

    # -- SOCKS5 --------------------------------------------------------------------------------------

    async def _serve_socks(self, client: _Pipe) -> None:
        try:
            async with asyncio.timeout(HEAD_TIMEOUT):
                version, count = await client.read_exactly(2)
                if version != 5:  # SOCKS4 or not SOCKS at all: nothing sensible to answer
                    client.transport.abort()
                    return
                methods = await client.read_exactly(count)
                if 0x00 not in methods:
                    client.send_and_close(b"\x05\xff")
                    return
                client.transport.write(b"\x05\x00")
                version, command, _, atyp = await client.read_exactly(4)
                if version != 5:
                    client.transport.abort()
                    return
                if atyp == 0x01:
                    host = str(ipaddress.IPv4Address(await client.read_exactly(4)))
                elif atyp == 0x04:
                    host = str(ipaddress.IPv6Address(await client.read_exactly(16)))
                elif atyp == 0x03:
                    (length,) = await client.read_exactly(1)
                    host = (await client.read_exactly(length)).decode("utf-8", "replace")
                else:
                    client.send_and_close(_socks_reply(_SOCKS_BAD_ADDRESS))
                    return
                (port,) = struct.unpack("!H", await client.read_exactly(2))
        except (_Closed, TimeoutError):
            client.transport.abort()
            return
        if command != 0x01:  # only CONNECT: BIND and UDP ASSOCIATE would open other paths out
            client.send_and_close(_socks_reply(_SOCKS_BAD_COMMAND))
            return
        try:
            upstream = await self._open(client, host, port, "socks")
        except _Refused as exc:
            client.send_and_close(_socks_reply(exc.socks_reply))
            return
        if client.lost:
            return
        client.transport.write(_socks_reply(_SOCKS_OK, upstream.transport.get_extra_info("sockname")))
        client.forward()
        upstream.forward()
