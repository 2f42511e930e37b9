"""An MCP server as a toolset: its tools appear as `mcp__<server>__<tool>`.

The `mcp` SDK is imported here only, and this module only when a server is configured or added,
so a session without MCP servers never loads it. Each connection lives in its own task (the SDK's
anyio scopes must be entered and left by one task; a session opens and closes its tools from
different ones). The protocol is spoken in its handshake form (`initialize`), which every server
of the 2025 and 2026 revisions accepts, and which carries `notifications/tools/list_changed`.

Failures never take the session down: a server that does not start within `startup_timeout`, dies,
or does not answer a call within `tool_timeout` is reported (a warning, and an error output the
model reads), its tools stay in the catalog (the prompt prefix stays stable), and the next call
starts it again. A `tools/list_changed` notification marks the list stale; the router lists it
again before the next model call.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import re
import tempfile
from pathlib import Path
from typing import IO, Any, Awaitable, Callable, Sequence, TextIO, cast

from auger.policy.types import Classification
from auger.protocol.events import WarningEvent
from auger.tools.base import (
    DESTRUCTIVE, LOCAL_MUTATION, READ_ONLY, REMOTE_ACTION, CommandSandbox, ToolContext, ToolError, ToolResult,
    ToolSpec, subject_of,
)
from auger.tools.mcp_config import McpServerConfig
from auger.tools.toolset import Contribution

log = logging.getLogger("auger.mcp")

MAX_NAME = 64  # the longest tool name every provider accepts
MAX_INSTRUCTIONS = 8_000  # characters of a server's instructions put in the system prompt
MAX_DESCRIPTION = 2_000  # characters of one tool's description
MAX_IMAGES = 4  # images of one tool result sent to the model; more are described
# (server, message, schema) -> (accept | decline | cancel, the answer: a JSON object's text, or None)
Elicit = Callable[[str, str, dict], Awaitable[tuple[str, str | None]]]


def tool_name(server: str, tool: str) -> str:
    """`mcp__<server>__<tool>` in the characters every provider accepts; a longer name is cut and given
    a hash of the full one, so it stays the same from session to session and distinct from others."""
    name = re.sub(r"[^A-Za-z0-9_-]", "_", f"mcp__{server}__{tool}")
    if len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha256(f"{server}\0{tool}".encode("utf-8", "surrogatepass")).hexdigest()[:10]
    return f"{name[:MAX_NAME - 11]}_{digest}"


def effect_of(annotations: Any, *, believed: bool = True) -> str:
    """Trust-mode effect from the server's hints; only hints the server gave count (an unannotated
    tool is a local change, whatever the protocol's defaults say).

    `believed`: the server's word is taken, as the protocol reads it. Otherwise (a server the user has
    not trusted, which the sandbox does not hold read-only) a hint may only make a call stricter:
    `readOnlyHint` is not believed, and the strictest hint given decides."""
    if annotations is None:
        return LOCAL_MUTATION
    if believed and annotations.read_only_hint is True:
        return READ_ONLY
    if annotations.destructive_hint is True:
        return DESTRUCTIVE
    if annotations.open_world_hint is True:
        return REMOTE_ACTION
    return LOCAL_MUTATION


class ServerFailed(Exception):
    """The server could not be reached; the message says why, in one line."""


class McpToolset:
    """One MCP server: connect, list, call, listen for list changes, reconnect after a failure."""

    def __init__(self, server: McpServerConfig, *, root: Path, warn: Callable[[str], None],
                 elicit: Elicit | None = None, sandbox: CommandSandbox | None = None) -> None:
        self.server = server
        self.root = root
        self._warn = warn
        self._elicit = elicit  # None: nobody to ask (headless), so requests are declined
        self._sandbox = None if server.runs_trusted else sandbox
        self._held_read_only = False  # the running server is held read-only by the sandbox (mcp_stdio)
        self._client: Any = None
        self._runner: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None
        self._lock = asyncio.Lock()
        self._specs: dict[str, ToolSpec] = {}
        self._remote: dict[str, str] = {}  # our name -> the server's
        self._annotations: dict[str, Any] = {}  # our name -> the hints the server gave
        self._instructions = ""
        self._has_resources = False
        self._prompts: dict[str, Any] = {}  # slash-command name -> the server's Prompt (prompts/list)
        self._errlog: IO[str] | None = None  # a stdio server's stderr, for the reports
        self._scope: Any = None  # the connection task's anyio cancel scope
        self._closed = False  # removed from the session: never started again
        self._stale = False  # the server said its tools changed
        self._changed = False  # our tool list changed since the catalog last asked

    # -- Toolset ----------------------------------------------------------------------
    async def open(self) -> None:
        """Connect and list the tools; a failure is reported, not raised (the session goes on)."""
        if self.server.trusted and not self.server.runs_trusted:
            self._warn(f"MCP server {self.server.name!r}: `trusted = true` is honoured only in your user config; "
                       f"this {self.server.source} server runs as an untrusted one")
        try:
            await self._connect()
        except ServerFailed as exc:
            self._warn(str(exc))
        self._changed = False  # what open() found is part of the catalog from the start

    async def close(self) -> None:
        self._closed = True
        await self._disconnect()
        if self._errlog is not None:
            self._errlog.close()

    def list_tools(self) -> Sequence[ToolSpec]:
        return list(self._specs.values())

    def contributions(self) -> Sequence[Contribution]:
        if not self._instructions:
            return ()
        text = f"<mcp_server name={self.server.name!r}>\n{self._instructions.strip()}\n</mcp_server>"
        return (Contribution(text, slot="tools", priority=500, tools=frozenset(self._specs)),)

    async def call(self, name: str, args: dict, ctx: ToolContext) -> ToolResult:
        remote = self._remote.get(name)
        if remote is None:
            raise ToolError(f"there is no tool named {name!r}")
        result = await self._request(remote, lambda client: client.call_tool(remote, args), _tool_result)
        if not result.ok and self._held_read_only:  # a server's error need not say why a write failed
            result.output += (f"\n[MCP server {self.server.name!r} runs read-only in plan and safe mode: if this call "
                              "had to write, the sandbox stopped it; the user can switch to auto mode or mark the "
                              "server `trusted = true` in their user config]")
        return result

    def effect(self, name: str) -> str:
        """What a call of tool `name` may do, as the trust modes see it now: the server's hints, believed
        for a server the user trusted, or one the sandbox holds read-only (then its claim is enforced)."""
        believed = self.server.runs_trusted or self._holds_read_only()
        return effect_of(self._annotations.get(name), believed=believed)

    def _holds_read_only(self) -> bool:
        """Whether the sandbox holds this server read-only: the running one's confinement, or what the
        next start would get in the current mode."""
        if self._sandbox is None or not self.server.command:
            return False
        if self._alive():
            return self._held_read_only
        from auger.tools.mcp_stdio import SERVER_EFFECT

        return self._sandbox.writes_confined and self._sandbox.readonly_for(SERVER_EFFECT)

    async def reconfine(self) -> None:
        """The session's mode changed: a server whose confinement no longer fits the mode is stopped now
        (a writable one must not write on in plan mode), and started again, confined anew, at its next use."""
        if self._sandbox is None or not self.server.command:
            return
        from auger.tools.mcp_stdio import SERVER_EFFECT

        async with self._lock:  # a start under way finishes first: it may have started under the old mode
            wanted = self._sandbox.writes_confined and self._sandbox.readonly_for(SERVER_EFFECT)
            if self._alive() and wanted != self._held_read_only:
                await self._disconnect()

    @property
    def has_resources(self) -> bool:
        return self._has_resources

    async def list_resources(self) -> ToolResult:
        return await self._request("resources/list", lambda client: client.list_resources(), _resource_list)

    async def list_resource_templates(self) -> ToolResult:
        return await self._request("resources/templates/list", _all_templates, _template_list)

    async def read_resource(self, uri: str) -> ToolResult:
        return await self._request("resources/read", lambda client: client.read_resource(uri), _resource_text)

    @property
    def prompts(self) -> dict[str, Any]:
        """The server's prompts by slash-command name (`mcp__<server>__<prompt>`), as listed at connect."""
        return dict(self._prompts)

    async def get_prompt(self, name: str, arguments: dict[str, str]) -> ToolResult:
        """The text of one prompt with its arguments filled in by the server (`prompts/get`)."""
        return await self._request("prompts/get", lambda client: client.get_prompt(name, arguments), _prompt_text)

    async def _request(self, what: str, send: Callable[[Any], Awaitable[Any]],
                       render: Callable[[Any], ToolResult]) -> ToolResult:
        """One request to the server, (re)connecting first; every failure becomes an error the model reads."""
        try:
            client = await self._connected()
            return render(await self._timed(send(client)))
        except ServerFailed as exc:
            return ToolResult(f"{exc}", ok=False, events=[WarningEvent(str(exc))])
        except TimeoutError:
            await self._disconnect()
            message = (f"MCP server {self.server.name!r} did not answer {what} within "
                       f"{self.server.tool_timeout:g} s; it was stopped and will be started again at the next call")
            return ToolResult(message, ok=False, events=[WarningEvent(message)])
        except Exception as exc:  # the SDK reports a lost connection and protocol errors as exceptions
            if _connection_lost(exc) or not self._alive():
                await self._disconnect()
                message = (f"MCP server {self.server.name!r} failed during {what}: {_one_line(exc)}"
                           f"{self._stderr_tail()}; it will be started again at the next call")
                return ToolResult(message, ok=False, events=[WarningEvent(message)])
            return ToolResult(f"MCP server {self.server.name!r}: {_one_line(exc)}", ok=False)

    async def refresh(self) -> bool:
        """List the tools again if the server said they changed; True when our tools changed since the
        catalog last asked (a listing, or a reconnect that found other tools)."""
        if self._stale and self._alive():
            self._stale = False
            try:
                self._learn(await self._timed(_all_tools(self._client), self.server.startup_timeout))
            except Exception as exc:
                self._warn(f"MCP server {self.server.name!r}: could not list its changed tools: {_one_line(exc)}")
        changed, self._changed = self._changed, False
        return changed

    @property
    def connected(self) -> bool:
        return self._alive()

    # -- the connection -----------------------------------------------------------------
    def _alive(self) -> bool:
        return self._client is not None and self._runner is not None and not self._runner.done()

    async def _connected(self) -> Any:
        if self._alive():
            return self._client
        if self._closed:  # a call still in flight when the server was removed
            raise ServerFailed(f"MCP server {self.server.name!r} was removed from this session")
        async with self._lock:
            if not self._alive():
                await self._disconnect()
                await self._connect()
            return self._client

    async def _timed(self, awaitable: Awaitable[Any], timeout: float | None = None) -> Any:
        async with asyncio.timeout(timeout or self.server.tool_timeout):
            return await awaitable

    async def _connect(self) -> None:
        from auger.extras import MissingExtra, importing

        try:  # tools/mcp_servers.py starts no server without the SDK; one too old to import fails here
            with importing("mcp", "MCP"):
                import mcp.client.stdio  # noqa: F401  the SDK loads before the start-up clock runs: its import
                import mcp.client.streamable_http  # noqa: F401  is auger's cost, not the server's
        except MissingExtra as exc:
            raise ServerFailed(f"MCP server {self.server.name!r} could not be started: {exc}") from None

        loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = loop.create_future()
        self._stop = asyncio.Event()
        if self._errlog is not None:
            self._errlog.close()
        # the server's stderr, kept for the tail quoted in failure messages; closed on the next start or close
        self._errlog = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")  # noqa: SIM115
        self._runner = asyncio.create_task(self._run(ready, self._stop), name=f"mcp-{self.server.name}")
        try:
            async with asyncio.timeout(self.server.startup_timeout):
                await asyncio.shield(ready)
        except TimeoutError:
            ready.cancel()  # nobody will read what the handshake ends with
            await self._disconnect(wait=0)  # still in its handshake: nothing to close gracefully
            raise ServerFailed(f"MCP server {self.server.name!r} did not start within "
                               f"{self.server.startup_timeout:g} s{self._stderr_tail()}") from None
        except Exception as exc:
            await self._disconnect()
            raise ServerFailed(f"MCP server {self.server.name!r} ({self.server.describe()}) could not be started: "
                               f"{_one_line(exc)}{self._stderr_tail()}") from None

    async def _run(self, ready: asyncio.Future[None], stop: asyncio.Event) -> None:
        """The connection's own task: enter the client, list, wait to be stopped, leave."""
        import anyio
        from mcp import Client

        async def on_message(message: Any) -> None:
            if getattr(message, "method", "") == "notifications/tools/list_changed":
                self._stale = True

        self._scope = scope = anyio.CancelScope()
        try:
            with scope:
                async with Client(self._transport(), mode="legacy", message_handler=on_message,
                                  elicitation_callback=self._on_elicit) as client:
                    self._client = client
                    self._has_resources = False
                    if client.server_capabilities.resources is not None:
                        self._has_resources = await _offers_resources(client)
                    self._learn(await _all_tools(client))
                    self._prompts = {}
                    if client.server_capabilities.prompts is not None:
                        self._prompts = {tool_name(self.server.name, p.name): p for p in await _all_prompts(client)}
                    self._instructions = _capped(client.instructions or "", MAX_INSTRUCTIONS)
                    if not ready.done():
                        ready.set_result(None)
                    await stop.wait()
        except Exception as exc:
            if not ready.done():
                ready.set_exception(exc)
            elif not stop.is_set():
                log.debug("MCP server %s connection ended", self.server.name, exc_info=True)
        finally:
            self._client = None

    async def _disconnect(self, wait: float = 5) -> None:
        """Stop the connection: its task leaves the client (which stops a stdio server: end of input,
        then a kill after the SDK's grace period); after `wait` seconds it is cancelled through its anyio
        scope (a plain task.cancel() could cut the SDK's shielded shutdown short and leave the server)."""
        runner, self._runner = self._runner, None
        if self._stop is not None:
            self._stop.set()
        if runner is not None and not runner.done():
            try:
                async with asyncio.timeout(wait):
                    await asyncio.shield(runner)
            except TimeoutError:
                if self._scope is not None:
                    self._scope.cancel()
                await asyncio.gather(runner, return_exceptions=True)
        self._client = None

    def _transport(self) -> Any:
        server = self.server
        errlog = self._errlog
        assert errlog is not None, "opened by _start before connecting"
        if server.command:
            from mcp.client.stdio import StdioServerParameters, get_default_environment, stdio_client

            cwd = str((self.root / server.cwd).resolve()) if server.cwd else str(self.root)
            env = {**get_default_environment(), **server.env}
            self._held_read_only = False
            if self._sandbox is not None:
                from auger.tools.mcp_stdio import confined_stdio

                def started(read_only: bool) -> None:
                    self._held_read_only = read_only

                return confined_stdio(self._sandbox, [server.command, *server.args], Path(cwd), env, errlog,
                                      started)
            return stdio_client(StdioServerParameters(command=server.command, args=list(server.args), env=env,
                                                      cwd=cwd), errlog=cast(TextIO, errlog))
        if not server.url:
            raise ServerFailed("the server has neither a command nor a url")
        headers = dict(server.headers)
        if server.bearer_token_env:
            token = os.environ.get(server.bearer_token_env)
            if not token:
                raise ServerFailed(f"environment variable {server.bearer_token_env} (bearer_token_env) is not set")
            headers["Authorization"] = f"Bearer {token}"
        from mcp.shared._httpx_utils import create_mcp_http_client

        if server.transport == "sse":
            from mcp.client.sse import sse_client

            return sse_client(server.url, headers=headers)
        from mcp.client.streamable_http import streamable_http_client

        return streamable_http_client(server.url, http_client=create_mcp_http_client(headers=headers))

    def _stderr_tail(self) -> str:
        errlog = self._errlog
        if errlog is None or errlog.closed:
            return ""
        try:
            errlog.seek(0)
            lines = [line for line in errlog.read()[-2000:].splitlines() if line.strip()]
        except (OSError, ValueError):
            return ""
        return f" (its last output: {_one_line(lines[-1])})" if lines else ""

    async def _on_elicit(self, context: Any, params: Any) -> Any:
        """A server asks the user something: shown like an approval; with nobody to ask, declined."""
        from mcp.types import ElicitResult

        if self._elicit is None:
            return ElicitResult(action="decline")
        schema = getattr(params, "requested_schema", None) or {}
        action, answer = await self._elicit(self.server.name, getattr(params, "message", ""), dict(schema))
        if action == "cancel":
            return ElicitResult(action="cancel")
        if action != "accept":
            return ElicitResult(action="decline")
        return ElicitResult(action="accept", content=_answer_object(answer))

    # -- what the server offers -----------------------------------------------------------
    def _learn(self, tools: list[Any]) -> bool:
        """Rebuild our specs from a listing; True when they differ from before."""
        specs: dict[str, ToolSpec] = {}
        remote: dict[str, str] = {}
        annotations: dict[str, Any] = {}
        for tool in tools:
            name = tool_name(self.server.name, tool.name)
            if name in specs:  # two server names sanitised alike: keep the first, say so
                self._warn(f"MCP server {self.server.name!r}: tool {tool.name!r} clashes with another as {name!r}")
                continue
            claimed = effect_of(tool.annotations)  # what the server says; the calls are classified by effect()
            schema = tool.input_schema if isinstance(tool.input_schema, dict) else {"type": "object"}
            specs[name] = ToolSpec(name, _describe(self.server.name, tool), schema, self._handler(name),
                                   effect=claimed, parallel_safe=claimed == READ_ONLY,
                                   classifier=self._classifier(name))
            remote[name] = tool.name
            annotations[name] = tool.annotations
        changed = [(s.name, s.description, json.dumps(s.parameters, sort_keys=True), s.effect)
                   for s in specs.values()] != [(s.name, s.description, json.dumps(s.parameters, sort_keys=True),
                                                 s.effect) for s in self._specs.values()]
        self._specs, self._remote, self._annotations = specs, remote, annotations
        self._changed = self._changed or changed
        return changed

    def _classifier(self, name: str) -> Callable[[dict, Path], Classification]:
        def classify(args: dict, root: Path) -> Classification:
            return Classification(self.effect(name), subject_of(name, args))

        return classify

    def _handler(self, name: str) -> Callable[[dict, ToolContext], Awaitable[ToolResult]]:
        async def handler(args: dict, ctx: ToolContext) -> ToolResult:
            return await self.call(name, args, ctx)

        return handler


def resource_tools(servers: Callable[[], list[McpToolset]]) -> list[ToolSpec]:
    """`list_mcp_resources {server?}`, `list_mcp_resource_templates {server?}` and `read_mcp_resource
    {server, uri}` across the servers that `servers()` gives (tools/mcp_servers.py offers them only while
    one has resources or resource templates)."""

    def find(name: str) -> McpToolset:
        for server in servers():
            if server.server.name == name:
                return server
        raise ToolError(f"no MCP server named {name!r} has resources; "
                        f"those that do: {', '.join(s.server.name for s in servers()) or 'none'}")

    async def each(args: dict, listing: Callable[[McpToolset], Awaitable[ToolResult]]) -> ToolResult:
        """One listing per server (the one named, or all, by name: the order servers came up in is chance),
        each under a `# server` heading."""
        chosen = [find(args["server"])] if args.get("server") else sorted(servers(), key=lambda s: s.server.name)
        results = [(s.server.name, await listing(s)) for s in chosen]
        text = "\n\n".join(f"# {name}\n{result.output}" for name, result in results)
        return ToolResult(text, ok=all(r.ok for _, r in results),
                          events=[e for _, r in results for e in r.events])

    async def list_all(args: dict, ctx: ToolContext) -> ToolResult:
        return await each(args, lambda server: server.list_resources())

    async def list_templates(args: dict, ctx: ToolContext) -> ToolResult:
        return await each(args, lambda server: server.list_resource_templates())

    async def read(args: dict, ctx: ToolContext) -> ToolResult:
        return await find(args["server"]).read_resource(args["uri"])

    return [
        ToolSpec("list_mcp_resources", "List the resources the MCP servers offer (uri, name, type, description), "
                 "of one server or all.", {"type": "object", "properties": {"server": {"type": "string"}}},
                 list_all, effect=READ_ONLY, parallel_safe=True),
        ToolSpec("list_mcp_resource_templates", "List the resource templates the MCP servers offer (uriTemplate, "
                 "name, type, description), of one server or all; read one by filling in its uriTemplate "
                 "(RFC 6570) and passing the uri to read_mcp_resource.",
                 {"type": "object", "properties": {"server": {"type": "string"}}},
                 list_templates, effect=READ_ONLY, parallel_safe=True),
        ToolSpec("read_mcp_resource", "Read one resource of an MCP server by its uri.",
                 {"type": "object", "properties": {"server": {"type": "string"}, "uri": {"type": "string"}},
                  "required": ["server", "uri"]}, read, effect=READ_ONLY, parallel_safe=True),
    ]


async def _all_tools(client: Any) -> list[Any]:
    return await _all_pages(client.list_tools, "tools")


async def _all_prompts(client: Any) -> list[Any]:
    return await _all_pages(client.list_prompts, "prompts")


async def _all_templates(client: Any) -> list[Any]:
    return await _all_pages(client.list_resource_templates, "resource_templates")


async def _offers_resources(client: Any) -> bool:
    """Whether a server with the resources capability lists any resource or resource template; a server
    that does not answer `resources/templates/list` (an older one) has none."""
    from mcp import MCPError

    if (await client.list_resources()).resources:
        return True
    try:
        return bool((await client.list_resource_templates()).resource_templates)
    except MCPError:
        return False


async def _all_pages(list_page: Callable[..., Awaitable[Any]], field: str) -> list[Any]:
    """Every entry of a paged MCP list (`tools/list`, `prompts/list`), following `nextCursor`."""
    found: list[Any] = []
    cursor = None
    for _ in range(100):  # a server that pages forever is not followed forever
        page = await list_page(cursor=cursor)
        found.extend(getattr(page, field))
        cursor = page.next_cursor
        if not cursor:
            break
    return found


def _prompt_text(result: Any) -> ToolResult:
    """A prompt's messages as the text of one user message: text as it is, embedded text resources
    inlined, anything else a one-line note; a message in the assistant's role is marked as such."""
    parts = []
    for message in result.messages:
        content = message.content
        kind = getattr(content, "type", "")
        if kind == "text":
            text = content.text
        elif kind == "resource" and getattr(content.resource, "text", None) is not None:
            text = content.resource.text
        else:
            text = f"[{kind or 'content'} not included: prompts are sent as text]"
        parts.append(text if message.role == "user" else f"[{message.role}] {text}")
    return ToolResult("\n\n".join(parts))


def _describe(server: str, tool: Any) -> str:
    text = _capped((tool.description or tool.title or tool.name).strip(), MAX_DESCRIPTION)
    return f"{text}\n(from MCP server {server!r})"


def _capped(text: str, limit: int) -> str:
    """A server decides how much it says; the prompt it lands in is ours, so it is cut with a note."""
    return text if len(text) <= limit else text[:limit] + f"\n[cut: {len(text) - limit} more characters]"


def _tool_result(result: Any) -> ToolResult:
    """Text for the model from an MCP result: its content blocks, its structured content when no text
    block carries it (kept whole in the metadata), and `isError` as a failed call."""
    from auger.models.images import SUPPORTED

    parts: list[str] = []
    images = 0  # left out
    shown: list[str] = []  # data URLs, sent to models that take images
    for block in result.content or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind == "image" and len(shown) < MAX_IMAGES and (url := _image_url(block)):
            shown.append(url)
            parts.append(f"[image {block.mime_type}, about {len(block.data) * 3 // 4} bytes]")
        elif kind in ("image", "audio"):
            images += kind == "image"
            size = len(block.data) * 3 // 4
            parts.append(f"[{kind} {block.mime_type}, about {size} bytes: not shown; only images of the types "
                         f"{', '.join(SUPPORTED)}, at most {MAX_IMAGES} per result, reach the model]")
        elif kind == "resource":
            resource = block.resource
            parts.append(getattr(resource, "text", None) or f"[resource {resource.uri} ({resource.mime_type})]")
        elif kind == "resource_link":
            parts.append(f"[resource {block.uri}]")
    structured = result.structured_content
    texts = [block for block in result.content or [] if getattr(block, "type", "") == "text"]
    if structured is not None and not texts:  # servers SHOULD also send it as text; shown once either way
        parts.append(json.dumps(structured, ensure_ascii=False, sort_keys=True))
    metadata = {"structured_content": structured} if structured is not None else {}
    if images:
        metadata["images_left_out"] = images
    return ToolResult("\n".join(parts) or "(no content)", ok=not result.is_error, metadata=metadata, images=shown)


def _image_url(block: Any) -> str | None:
    """A data URL for an image block a model can be sent: a supported type, valid base64 whose bytes are an
    image of that type, within the size limit of user images (models/images.py); None otherwise."""
    from auger.models.images import ImageError, checked_data_url

    data = block.data if isinstance(block.data, str) else ""
    try:
        return checked_data_url(f"data:{block.mime_type};base64,{data}") if data else None
    except ImageError:
        return None


def _resource_list(result: Any) -> ToolResult:
    lines = [f"{r.uri}\t{r.name}\t{r.mime_type or ''}\t{(r.description or '').strip()}" for r in result.resources]
    return ToolResult("\n".join(lines) or "(no resources)")


def _template_list(templates: list[Any]) -> ToolResult:
    lines = [f"{t.uri_template}\t{t.name}\t{t.mime_type or ''}\t{(t.description or '').strip()}" for t in templates]
    return ToolResult("\n".join(lines) or "(no resource templates)")


def _resource_text(result: Any) -> ToolResult:
    parts = []
    for content in result.contents:
        text = getattr(content, "text", None)
        parts.append(text if text is not None else f"[binary resource {content.uri} ({content.mime_type})]")
    return ToolResult("\n".join(parts) or "(empty resource)")


def _answer_object(answer: str | None) -> dict:
    """The user's answer to an elicitation form: a JSON object; anything else answers nothing."""
    try:
        value = json.loads(answer) if answer else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _connection_lost(exc: Exception) -> bool:
    """A transport failure or the SDK's "connection closed", as opposed to an error the server answered."""
    from mcp import MCPError
    from mcp.types import CONNECTION_CLOSED

    return not isinstance(exc, MCPError) or exc.code == CONNECTION_CLOSED


def _one_line(exc: BaseException | str) -> str:
    text = str(exc) or type(exc).__name__
    return " ".join(text.split())[:300]
