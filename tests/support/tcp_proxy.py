"""A loopback TCP proxy in front of a real server, for tests of what a client does when the network fails.

    with TcpProxy(server_port) as proxy:
        client = connect(proxy.url)
        ...
        proxy.cut()                                   # every open connection drops, mid-stream too
        proxy.drop_response_to(b"POST /api/sessions/")  # that request reaches the server; its answer never
                                                       # reaches the client (the connection drops instead)

It forwards bytes as they come, looking only at the head of each request it carries: its first line is
kept (`requests`), so the requests a test makes are counted where they really go, and its Host header
names the server (as a reverse proxy sends it), so a server that checks Host answers.
"""

from __future__ import annotations

import socket
import threading

_METHODS = (b"GET ", b"POST ", b"PUT ", b"PATCH ", b"DELETE ", b"HEAD ", b"OPTIONS ")


class TcpProxy:
    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.requests: list[bytes] = []  # the request line of every request forwarded, in order
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._own_host = f"127.0.0.1:{self.port}".encode()
        self._target_host = f"127.0.0.1:{target_port}".encode()
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._drop: bytes | None = None
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def cut(self) -> int:
        """Drop every connection open now; how many there were."""
        with self._lock:
            doomed, self._open = self._open, set()
        for sock in doomed:
            _close(sock)
        return len(doomed) // 2

    def drop_response_to(self, prefix: bytes) -> None:
        """The next request whose request line starts with `prefix` is delivered; when the server answers it,
        the connection drops instead of carrying the answer."""
        with self._lock:
            self._drop = prefix

    def close(self) -> None:
        self._listener.close()
        self.cut()

    def __enter__(self) -> TcpProxy:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:  # closed: the test is over
                return
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            with self._lock:
                self._open |= {client, upstream}
            last: list[bytes] = [b""]  # the request line this connection carried last
            threading.Thread(target=self._pump, args=(client, upstream, last, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, last, False), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, last: list[bytes], requests: bool) -> None:
        try:
            while data := source.recv(65536):
                if requests and data.startswith(_METHODS):
                    last[0] = data.split(b"\r\n", 1)[0]
                    with self._lock:
                        self.requests.append(last[0])
                    head, sep, body = data.partition(b"\r\n\r\n")  # the Host the server answers to, as a
                    data = head.replace(self._own_host, self._target_host) + sep + body  # reverse proxy sends
                elif not requests and self._dropping(last[0]):
                    break
                sink.sendall(data)
        except OSError:
            pass
        for sock in (source, sink):
            _close(sock)
            with self._lock:
                self._open.discard(sock)

    def _dropping(self, request: bytes) -> bool:
        with self._lock:
            if self._drop is not None and request.startswith(self._drop):
                self._drop = None
                return True
        return False


def _close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()
