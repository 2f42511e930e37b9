"""A language server of a few lines, standard library only, for the tests of what auger does with a server
that is dead, slow or misbehaves. Run as `python fake_lsp.py BEHAVIOUR [ARG]`:

    dead       exits at once with status 3, saying why on stderr
    mute       never answers `initialize`
    slow       initializes, then never answers a diagnostics request
    late       like `pull`, but each diagnostics answer takes 1.5 s
    push       offers no pull: publishes each document's errors (with its version) when it opens or changes
    quote      like `pull`, its message quoting the line ("this line is BROKEN: <line>")
    pull       initializes, offers pull diagnostics, and reports every line containing "BROKEN" as an error
    escape ARG initializes like `pull`, and first tries to break out: writes the file ARG/escaped.txt (ARG:
               the project), and asks the HTTP proxy at 127.0.0.1:PROXY for http://HOST/from-the-server, as
               the file ARG/.proxy ("PROXY HOST") says (the sandbox's egress proxy, which its commands reach);
               it reports what happened as an error on line 1 of each file once it changed
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time


def read() -> dict | None:
    length = None
    while True:
        line = sys.stdin.buffer.readline()
        if not line:
            return None
        if line in (b"\r\n", b"\n"):
            break
        name, _, value = line.decode().partition(":")
        if name.lower() == "content-length":
            length = int(value)
    return json.loads(sys.stdin.buffer.read(length or 0))


def send(message: dict) -> None:
    body = json.dumps(message).encode()
    sys.stdout.buffer.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    sys.stdout.buffer.flush()


def escape(project: str) -> str:
    """Try to write into the project and to reach the network; what happened, in one line."""
    said = []
    try:
        with open(os.path.join(project, "escaped.txt"), "w") as f:
            f.write("written by a language server\n")
        said.append("wrote the project")
    except OSError as exc:
        said.append(f"write refused: {exc.strerror}")
    try:
        with open(os.path.join(project, ".proxy")) as f:
            proxy, host = f.read().split()
        with socket.create_connection(("127.0.0.1", int(proxy)), timeout=5) as s:
            s.sendall(f"GET http://{host}/from-the-server HTTP/1.1\r\nHost: {host}\r\n"
                      "Connection: close\r\n\r\n".encode())
            status = s.recv(4096).split(b"\r\n", 1)[0].decode(errors="replace")
        said.append(f"reached the network ({status})")
    except OSError as exc:
        said.append(f"network refused: {exc.strerror or exc}")
    return "; ".join(said)


def broken(text: str, quote: bool = False) -> list[dict]:
    return [{"range": {"start": {"line": n, "character": 0}, "end": {"line": n, "character": 1}},
             "severity": 1, "message": f"this line is BROKEN: {line}" if quote else "this line is BROKEN",
             "source": "fake"}
            for n, line in enumerate(text.splitlines()) if "BROKEN" in line]


def publish(uri: str, version: int, text: str) -> None:
    send({"jsonrpc": "2.0", "method": "textDocument/publishDiagnostics",
          "params": {"uri": uri, "version": version, "diagnostics": broken(text)}})


def main() -> None:
    behaviour = sys.argv[1]
    if behaviour == "dead":
        print("fake_lsp: this server always fails", file=sys.stderr)
        sys.exit(3)
    documents: dict[str, str] = {}
    changed: set[str] = set()  # documents changed since they were opened
    escaped = escape(sys.argv[2]) if behaviour == "escape" else ""
    while (message := read()) is not None:
        method, ident = message.get("method"), message.get("id")
        if method == "initialize":
            if behaviour == "mute":
                time.sleep(3600)
            capabilities: dict = {"textDocumentSync": 1}
            if behaviour != "push":
                capabilities["diagnosticProvider"] = {"interFileDependencies": False, "workspaceDiagnostics": False}
            send({"jsonrpc": "2.0", "id": ident, "result": {"capabilities": capabilities}})
        elif method == "textDocument/didOpen":
            doc = message["params"]["textDocument"]
            documents[doc["uri"]] = doc["text"]
            if behaviour == "push":
                publish(doc["uri"].replace("/", "%2F").replace("%2F", "/"), doc["version"], doc["text"])
        elif method == "textDocument/didChange":
            doc = message["params"]["textDocument"]
            documents[doc["uri"]] = message["params"]["contentChanges"][-1]["text"]
            changed.add(doc["uri"])
            if behaviour == "push":
                publish(doc["uri"], doc["version"], documents[doc["uri"]])
        elif method == "textDocument/diagnostic":
            if behaviour == "slow":
                continue  # never answered
            if behaviour == "late":
                time.sleep(1.5)
            items = broken(documents.get(message["params"]["textDocument"]["uri"], ""), quote=behaviour == "quote")
            if escaped and message["params"]["textDocument"]["uri"] in changed:
                items.append({"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 1}},
                              "severity": 1, "message": f"escape: {escaped}", "source": "fake"})
            send({"jsonrpc": "2.0", "id": ident, "result": {"kind": "full", "items": items}})
        elif method == "shutdown":
            send({"jsonrpc": "2.0", "id": ident, "result": None})
        elif method == "exit":
            return
        elif ident is not None:
            send({"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": "not here"}})


if __name__ == "__main__":
    main()
