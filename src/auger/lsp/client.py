"""One running language server: started inside the session's sandbox, told the documents auger cares about,
asked for their diagnostics and for navigation.

The server runs through `CommandSandbox.spawn` like any command, but always held read-only (as plan mode
holds commands) and offline (its own network namespace under bubblewrap, no TCP under Landlock): it reads
the project, the machine's libraries and its own program, writes only the scratch dirs, and reaches
nothing. A session without a sandbox starts it as a plain process (the session's warning already says that
commands run unconfined there).

How a server says what it found differs, so each is asked its own way, chosen from what it announces:

    pull      `textDocument/diagnostic` per file (LSP 3.17; ruff, gopls, rust-analyzer, and pyright, which
              registers it once it learns the client can pull): the answer is computed for the text it has,
              so it is complete when it comes
    tsserver  typescript-language-server's `typescript.tsserverRequest` command, asking tsserver for a file's
              syntactic and semantic diagnostics at once (its own pushes come after a debounce, and not at
              all when nothing changed, so a push never says "nothing new")
    push      `textDocument/publishDiagnostics` (pyright): fresh once a publication for the file arrives after
              the change was sent (with the document's version when the server sends versions)

Every position on the wire is LSP's default UTF-16 code units; `utf16_column` and `char_column` convert.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from auger.lsp.jsonrpc import Connection, RpcError
from auger.lsp.servers import ServerSpec
from auger.tools.base import READ_ONLY, CommandSandbox

log = logging.getLogger("auger.lsp")

INITIALIZE_TIMEOUT = 60.0  # seconds a server may take to answer `initialize` (the caller's own wait is shorter)
STOP_TIMEOUT = 1.0  # seconds `shutdown` and the exit that follows get before the process group is killed
MAX_DOCUMENT = 2 * 1024 * 1024  # bytes: a larger file is not sent to a server
TSSERVER_REQUEST = "typescript.tsserverRequest"
PUSH_SETTLE = 0.3  # seconds a pushing server gets to republish the files that use a changed one
CAPABILITIES: dict[str, Any] = {
    "general": {"positionEncodings": ["utf-16"]},
    "workspace": {"configuration": True, "workspaceFolders": True, "symbol": {"dynamicRegistration": False}},
    "textDocument": {
        "synchronization": {"dynamicRegistration": False, "didSave": False},
        "publishDiagnostics": {"versionSupport": True, "relatedInformation": False},
        "diagnostic": {"dynamicRegistration": True},
        "definition": {"linkSupport": False},
        "references": {},
        "hover": {"contentFormat": ["plaintext", "markdown"]},
        "documentSymbol": {"hierarchicalDocumentSymbolSupport": True},
        "rename": {"prepareSupport": False},
    },
    "window": {"workDoneProgress": False},
}


class ServerFailed(Exception):
    """A server that could not start, or stopped; the message says why in one line."""


@dataclass
class Document:
    """A file as the server was last told it."""

    uri: str
    language: str
    version: int
    text: str


@dataclass
class Published:
    """The server's last `publishDiagnostics` for one file."""

    seq: int
    version: int | None
    diagnostics: list[dict[str, Any]]


class LanguageServer:
    """One server process for one project root, shared by everything of a session that needs it."""

    def __init__(self, spec: ServerSpec, program: str, root: Path, *, sandbox: CommandSandbox | None,
                 env: dict[str, str], scratch: Path) -> None:
        self.spec = spec
        self.program = program
        self.root = root
        self._sandbox = sandbox
        self._env = env
        self._scratch = scratch
        self.lock = asyncio.Lock()  # one sequence of syncs and questions at a time
        self.capabilities: dict[str, Any] = {}
        self.documents: dict[str, Document] = {}  # relative path -> what the server was told
        self.published: dict[str, Published] = {}  # uri -> its last publication
        self.seq = 0  # publications received, for "after the change" questions
        self.known: dict[str, list[Any]] = {}  # relative path -> the problems last found in it (lsp/diagnostics.py)
        self._published = asyncio.Event()  # a publication came, a registration changed, or the server ended
        self._registered: dict[str, str] = {}  # the server's dynamic registrations: id -> method
        self._conn: Connection | None = None
        self._proc: Any = None
        self._transports: list[asyncio.BaseTransport] = []
        self._log: Path | None = None
        self._exited: asyncio.Task[None] | None = None
        self.confined = sandbox is not None and sandbox.writes_confined

    # --- life ------------------------------------------------------------------------------------

    @property
    def alive(self) -> bool:
        return (self._conn is not None and not self._conn.closed.is_set() and self._proc is not None
                and self._proc.returncode is None)

    @property
    def strategy(self) -> str:
        """How diagnostics are asked for: pull, tsserver or push (the module docstring)."""
        if self.capabilities.get("diagnosticProvider") or "textDocument/diagnostic" in self._registered.values():
            return "pull"
        commands = (self.capabilities.get("executeCommandProvider") or {}).get("commands") or []
        return "tsserver" if TSSERVER_REQUEST in commands else "push"

    async def start(self) -> None:
        """Spawn the server and initialize it; ServerFailed saying why when it cannot."""
        loop = asyncio.get_running_loop()
        stdin_r, stdin_w = os.pipe()
        stdout_r, stdout_w = os.pipe()
        log_fd, self._log = self._open_log()
        cache = self._scratch / "lsp-cache"
        cache.mkdir(parents=True, exist_ok=True)
        env = {**self._env, "XDG_CACHE_HOME": str(cache), "NO_COLOR": "1"}
        argv = [self.program, *self.spec.command[1:]]
        try:
            if self._sandbox is not None:  # read-only whatever the session's mode (as plan mode holds commands)
                self._proc = await self._sandbox.spawn(argv, self.root, env, (stdin_r, stdout_w, log_fd), READ_ONLY,
                                                       mode="plan", offline=True)
            else:
                from auger.policy.supervised import spawn_local

                self._proc = await spawn_local(argv, self.root, env, (stdin_r, stdout_w, log_fd))
        except OSError as exc:
            for fd in (stdin_w, stdout_r):
                os.close(fd)
            raise ServerFailed(f"{self.spec.name} could not be started ({exc.strerror or exc})") from None
        finally:
            for fd in (stdin_r, stdout_w, log_fd):
                os.close(fd)
        reader = asyncio.StreamReader(limit=1 << 20, loop=loop)
        read_transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader, loop=loop),
                                                         os.fdopen(stdout_r, "rb", 0))
        write_transport, _ = await loop.connect_write_pipe(asyncio.Protocol, os.fdopen(stdin_w, "wb", 0))
        self._transports = [read_transport, write_transport]
        self._conn = Connection(reader, write_transport.write, on_notify=self._notified, on_request=self._asked)
        self._conn.start()
        self._exited = asyncio.create_task(self._watch(), name=f"lsp-{self.spec.name}")
        try:
            async with asyncio.timeout(INITIALIZE_TIMEOUT):
                result = await self._conn.request("initialize", {
                    # a sandboxed server cannot see auger's pid (its own PID namespace) and would take auger
                    # for dead; the sandbox ends it with the session anyway
                    "processId": None if self._sandbox is not None else os.getpid(),
                    "rootUri": self.root.as_uri(), "rootPath": str(self.root),
                    "workspaceFolders": [{"uri": self.root.as_uri(), "name": self.root.name}],
                    "capabilities": CAPABILITIES, "clientInfo": {"name": "auger"},
                    **({"initializationOptions": dict(self.spec.init_options)} if self.spec.init_options else {})})
        except (RpcError, TimeoutError) as exc:
            why = self.failure() or (str(exc) if isinstance(exc, RpcError) else "no answer to initialize")
            await self.stop()
            raise ServerFailed(f"{self.spec.name} did not start: {why}") from None
        capabilities = result.get("capabilities") if isinstance(result, dict) else None
        self.capabilities = capabilities if isinstance(capabilities, dict) else {}
        self._conn.notify("initialized", {})
        if self.spec.settings:
            self._conn.notify("workspace/didChangeConfiguration", {"settings": dict(self.spec.settings)})

    def _open_log(self) -> tuple[int, Path]:
        """Where the server's stderr goes: a log the sandbox's commands cannot write (its own private dir),
        else a temp file of auger's own."""
        if self._sandbox is not None:
            return self._sandbox.open_log()
        fd, name = tempfile.mkstemp(prefix=f"auger-lsp-{self.spec.name}-", suffix=".log")
        return fd, Path(name)

    async def _watch(self) -> None:
        """The process's end: its connection closes with it."""
        try:
            await self._proc.wait()
        finally:
            self._published.set()  # a wait for publications wakes up to find the server gone

    def failure(self) -> str:
        """Why the server stopped, from the end of its stderr (one line), or ''."""
        if self._log is None:
            return ""
        try:
            with open(self._log, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - 2000))
                tail = f.read().decode("utf-8", "replace")
        except OSError:
            return ""
        lines = [line.strip() for line in tail.splitlines() if line.strip()]
        status = self._proc.returncode if self._proc is not None else None
        said = lines[-1][:300] if lines else ""
        if status is not None:
            return f"it exited with status {status}" + (f": {said}" if said else "")
        return said

    async def stop(self) -> None:
        """Ask the server to shut down, then end its process group whatever it does."""
        conn, self._conn = self._conn, None
        if conn is not None and not conn.closed.is_set() and self._proc is not None and self._proc.returncode is None:
            try:
                async with asyncio.timeout(STOP_TIMEOUT):
                    await conn.request("shutdown", None)
                conn.notify("exit", None)
            except (RpcError, TimeoutError):
                pass
        for transport in self._transports:
            transport.close()
        self._transports = []
        if self._proc is not None:
            try:
                async with asyncio.timeout(STOP_TIMEOUT):
                    await self._proc.wait()
            except TimeoutError:
                pass
            self._proc.signal_group(signal.SIGKILL)  # it, or what it left behind in its group
            await self._proc.wait()
        if conn is not None:
            await conn.close()
        if self._exited is not None:
            await asyncio.gather(self._exited, return_exceptions=True)
        if self._log is not None and self._sandbox is None:
            self._log.unlink(missing_ok=True)

    # --- what the server says and asks -----------------------------------------------------------

    def _notified(self, method: str, params: Any) -> None:
        if method != "textDocument/publishDiagnostics" or not isinstance(params, dict):
            return
        uri, items = params.get("uri"), params.get("diagnostics")
        if not isinstance(uri, str) or not isinstance(items, list):
            return
        uri = next((d.uri for d in self.documents.values() if _same_file(d.uri, uri)), None)
        if uri is None:
            return  # only what auger opened is kept: a server cannot fill memory with made-up files
        version = params.get("version")
        self.seq += 1
        self.published[uri] = Published(self.seq, version if isinstance(version, int) else None,
                                        [d for d in items[:1000] if isinstance(d, dict)])
        self._published.set()

    async def _asked(self, method: str, params: Any) -> Any:
        """The server's requests: its settings, the workspace, and nothing that changes a file."""
        if method == "workspace/configuration":
            items = params.get("items", []) if isinstance(params, dict) else []
            return [self._setting(item.get("section") if isinstance(item, dict) else None) for item in items]
        if method == "workspace/workspaceFolders":
            return [{"uri": self.root.as_uri(), "name": self.root.name}]
        if method in ("client/registerCapability", "client/unregisterCapability") and isinstance(params, dict):
            for entry in params.get("registrations") or params.get("unregisterations") or []:
                if isinstance(entry, dict) and isinstance(entry.get("id"), str):
                    if method == "client/registerCapability":
                        self._registered[entry["id"]] = str(entry.get("method"))
                    else:
                        self._registered.pop(entry["id"], None)
            self._published.set()  # a wait for pushes may now pull
            return None
        if method in ("window/workDoneProgress/create", "window/showMessageRequest", "window/showDocument",
                      "workspace/diagnostic/refresh"):
            return None
        if method == "workspace/applyEdit":
            return {"applied": False, "failureReason": "auger applies no edit a language server asks for"}
        raise RpcError(f"auger does not answer {method}", -32601)

    def _setting(self, section: Any) -> Any:
        value: Any = dict(self.spec.settings)
        for part in str(section or "").split(".") if section else ():
            if not isinstance(value, dict) or part not in value:
                return None
            value = value[part]
        return value

    # --- documents ------------------------------------------------------------------------------

    def uri(self, rel: str) -> str:
        return (self.root / rel).as_uri()

    def sync(self, rel: str, text: str, language: str) -> bool:
        """Tell the server the file's text (opened the first time); True when that changed what it had."""
        assert self._conn is not None
        known = self.documents.get(rel)
        if known is None:
            document = Document(self.uri(rel), language, 1, text)
            self.documents[rel] = document
            self._conn.notify("textDocument/didOpen", {"textDocument": {
                "uri": document.uri, "languageId": language, "version": 1, "text": text}})
            return True
        if known.text == text:
            return False
        known.version += 1
        known.text = text
        self._conn.notify("textDocument/didChange", {"textDocument": {"uri": known.uri, "version": known.version},
                                                     "contentChanges": [{"text": text}]})
        return True

    def forget(self, rel: str) -> None:
        """Close a document (the file is gone, or no longer needed)."""
        document = self.documents.pop(rel, None)
        if document is not None and self._conn is not None:
            self._conn.notify("textDocument/didClose", {"textDocument": {"uri": document.uri}})

    async def request(self, method: str, params: Any) -> Any:
        if self._conn is None or not self.alive:
            raise ServerFailed(f"{self.spec.name} is not running ({self.failure() or 'stopped'})")
        try:
            return await self._conn.request(method, params)
        except RpcError as exc:
            if self._conn is None or self._conn.closed.is_set():
                raise ServerFailed(f"{self.spec.name} stopped ({self.failure() or exc})") from None
            raise

    # --- diagnostics ------------------------------------------------------------------------------

    async def diagnostics(self, rels: list[str], since: int, found: dict[str, list[dict[str, Any]]],
                          fresh: set[str] | None = None) -> None:
        """Put into `found` the server's diagnostics (LSP objects) of each open document in `rels` as it has
        them now, each as soon as it answers for it: when the caller's deadline cancels the wait, what is
        missing was not answered. `since`: `seq` before the changes were sent; `fresh`: the documents sent
        since (all of `rels` by default) — the push strategy waits for their publications."""
        wanted = [rel for rel in rels if rel in self.documents]
        while self.strategy == "push":
            if await self._pushed(wanted, since, set(wanted) if fresh is None else fresh, found):
                return
        strategy = self.strategy  # it may have become pull while we waited (a dynamic registration)
        await asyncio.gather(*(self._pull(rel, strategy, found) for rel in wanted if rel not in found))

    async def _pull(self, rel: str, strategy: str, found: dict[str, list[dict[str, Any]]]) -> None:
        document = self.documents[rel]
        if strategy == "pull":
            try:
                report = await self.request("textDocument/diagnostic", {"textDocument": {"uri": document.uri}})
            except RpcError as exc:  # cancelled by the server (the text moved on), or not for this file
                log.debug("%s: no diagnostics for %s: %s", self.spec.name, rel, exc)
                return
            items = report.get("items") if isinstance(report, dict) else None
            found[rel] = [d for d in items or [] if isinstance(d, dict)]
            return
        told: list[dict[str, Any]] = []
        for command in ("syntacticDiagnosticsSync", "semanticDiagnosticsSync"):
            answer = await self.request("workspace/executeCommand", {
                "command": TSSERVER_REQUEST, "arguments": [command, {"file": str(self.root / rel)}]})
            body = answer.get("body") if isinstance(answer, dict) else None
            syntax = command.startswith("syntactic")
            told += [_from_tsserver(d, syntax=syntax) for d in body or [] if isinstance(d, dict)]
        found[rel] = told

    async def _pushed(self, rels: list[str], since: int, fresh: set[str],
                      found: dict[str, list[dict[str, Any]]]) -> bool:
        """Wait for publications: True once every file in `fresh` (sent since) has one of its version, and
        the others had PUSH_SETTLE seconds for one more (a server may republish a file that uses a changed
        one, or not: then its last publication stands); False when the server turned to pull."""
        loop = asyncio.get_running_loop()
        settled_at: float | None = None
        while self.strategy == "push":
            for rel in rels:
                document = self.documents[rel]
                got = self.published.get(document.uri)
                if got is not None and got.seq > since and (got.version is None or got.version >= document.version):
                    found[rel] = got.diagnostics
            if all(rel in found for rel in rels):
                return True
            if all(rel in found for rel in rels if rel in fresh):
                settled_at = settled_at or loop.time() + PUSH_SETTLE
                if loop.time() >= settled_at:
                    for rel in rels:
                        if rel not in found:
                            last = self.published.get(self.documents[rel].uri)
                            found[rel] = last.diagnostics if last is not None else []
                    return True
            if not self.alive:
                raise ServerFailed(f"{self.spec.name} stopped ({self.failure() or 'no reason given'})")
            self._published.clear()
            try:
                async with asyncio.timeout(None if settled_at is None else max(0.0, settled_at - loop.time())):
                    await self._published.wait()
            except TimeoutError:
                pass
        return False


def _from_tsserver(d: dict[str, Any], *, syntax: bool) -> dict[str, Any]:
    """A tsserver diagnostic (1-based line and offset) in LSP's shape; `syntax`: from its syntactic pass."""
    start = d.get("start")
    start = start if isinstance(start, dict) else {}
    severity = {"error": 1, "warning": 2, "suggestion": 4, "message": 3}.get(str(d.get("category")), 1)
    line, offset = start.get("line", 1), start.get("offset", 1)
    return {"range": {"start": {"line": int(line) - 1 if isinstance(line, int) else 0,
                                "character": int(offset) - 1 if isinstance(offset, int) else 0}},
            "severity": severity, "message": str(d.get("text", "")), "code": d.get("code"), "source": "typescript",
            "syntax": syntax}


def _same_file(ours: str, theirs: str) -> bool:
    """Whether two file URIs name one path (servers spell them their own way: %-escapes, case of hex)."""
    if ours == theirs:
        return True
    return unquote(urlparse(ours).path) == unquote(urlparse(theirs).path)


def utf16_column(line_text: str, chars: int) -> int:
    """The UTF-16 offset of the `chars`-th character of a line (0-based both)."""
    return len(line_text[:chars].encode("utf-16-le", "surrogatepass")) // 2


def char_column(line_text: str, units: int) -> int:
    """The character index of a UTF-16 offset in a line (0-based both)."""
    encoded = line_text.encode("utf-16-le", "surrogatepass")
    return len(encoded[:units * 2].decode("utf-16-le", "ignore"))
