"""The client side of ACP: what auger answers when an agent talks to it during a prompt.

Session updates are normalised into `BackendEvent`s; permission and file requests become events
carrying a future, answered by the turn that consumes the stream (engine/agents/backend_turn.py), which
applies auger's policy and path guard. Between prompts nobody is listening: updates are dropped,
permission is refused (cancelled) and file requests fail, so an agent acting on its own after a
turn ended can do nothing through auger. Terminals are not offered (`terminal: false` in the
client capabilities): an agent runs its commands itself, after asking permission here.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Callable

from auger.backends.base import (
    BackendEvent, FileEdit, PermissionAsked, PlanChanged, ReadRequested, TextChunk, ThoughtChunk, ToolFinished,
    ToolStarted, UsageReported, WriteRequested,
)

_FINAL = {"completed": True, "failed": False}


class RequestRefused(Exception):
    """A permission or file request auger refuses; the message is what the agent is told."""


class AcpClient:
    """One per agent connection; `begin`/`end` bracket a prompt."""

    def __init__(self) -> None:
        self.session_id: str | None = None
        self._sink: Callable[[BackendEvent], None] | None = None
        self._calls: dict[str, dict[str, Any]] = {}  # call id -> title, kind, arguments, ended
        self._waiting: set[asyncio.Future[Any]] = set()

    def begin(self, session_id: str, sink: Callable[[BackendEvent], None]) -> None:
        self.session_id, self._sink = session_id, sink
        self._calls = {}

    def end(self) -> None:
        """The prompt is over: requests still waiting are refused."""
        self._sink = None
        for future in self._waiting:
            if not future.done():
                future.set_exception(RequestRefused("the turn has ended"))
        self._waiting.clear()

    def _emit(self, session_id: str, event: BackendEvent) -> bool:
        if self._sink is None or session_id != self.session_id:
            return False
        self._sink(event)
        return True

    # -- session/update -------------------------------------------------------------
    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        for event in self._normalise(update):
            self._emit(session_id, event)

    def _normalise(self, update: Any) -> list[BackendEvent]:
        kind = getattr(update, "session_update", "")
        if kind in ("agent_message_chunk", "agent_thought_chunk"):
            text = getattr(update.content, "text", None)
            if not text:
                return []
            return [TextChunk(text) if kind == "agent_message_chunk" else ThoughtChunk(text)]
        if kind in ("tool_call", "tool_call_update"):
            return self._tool_update(update)
        if kind == "plan":
            return [PlanChanged([(entry.content, entry.status) for entry in update.entries])]
        if kind == "usage_update":
            return [UsageReported(context_used=update.used, context_window=update.size)]
        return []  # available commands, modes, session info: nothing auger shows

    def _tool_update(self, update: Any) -> list[BackendEvent]:
        events: list[BackendEvent] = []
        call = self._calls.get(update.tool_call_id)
        if call is None:  # a start, or an update for a call we never saw start: treat it as one
            call = self._calls[update.tool_call_id] = {
                "title": update.title or update.tool_call_id, "kind": update.kind or "other",
                "raw": update.raw_input, "arguments": _arguments(update.raw_input), "ended": False,
                "locations": _locations(update), "edits": _edits(update)}
            events.append(ToolStarted(update.tool_call_id, call["title"], call["kind"], call["arguments"]))
        else:
            if update.raw_input is not None:
                call["raw"], call["arguments"] = update.raw_input, _arguments(update.raw_input)
            call["title"] = update.title or call["title"]
            call["kind"] = update.kind or call["kind"]
            call["locations"] = _locations(update) or call["locations"]
            call["edits"] = _edits(update) or call["edits"]
        if update.status in _FINAL and not call["ended"]:
            call["ended"] = True
            events.append(ToolFinished(update.tool_call_id, _FINAL[update.status], _output(update)))
        return events

    # -- requests ---------------------------------------------------------------------
    async def request_permission(self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any) -> Any:
        from acp.schema import AllowedOutcome, DeniedOutcome, RequestPermissionResponse

        # What the request says wins over what the call said before; whatever it leaves out, the call's
        # earlier updates tell (a request naming only the call id is judged by the call it names).
        known = self._calls.get(tool_call.tool_call_id, {})
        raw = tool_call.raw_input if tool_call.raw_input is not None else known.get("raw")
        future: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        asked = PermissionAsked(tool_call.tool_call_id, tool_call.title or known.get("title") or tool_call.tool_call_id,
                                tool_call.kind or known.get("kind") or "other", _arguments(raw),
                                [(o.option_id, o.kind) for o in options], future, raw,
                                _unique([*_locations(tool_call), *known.get("locations", [])]),
                                _edits(tool_call) or known.get("edits", []))
        try:
            chosen = await self._await(session_id, asked, future)
        except RequestRefused:
            chosen = None
        if chosen is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=chosen))

    async def read_text_file(self, session_id: str, path: str, line: int | None = None, limit: int | None = None,
                             **kwargs: Any) -> Any:
        from acp.schema import ReadTextFileResponse

        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        text = await _told(self._await(session_id, ReadRequested(path, line, limit, future), future))
        return ReadTextFileResponse(content=text)

    async def write_text_file(self, session_id: str, path: str, content: str, **kwargs: Any) -> Any:
        from acp.schema import WriteTextFileResponse

        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        await _told(self._await(session_id, WriteRequested(path, content, future), future))
        return WriteTextFileResponse()

    async def _await(self, session_id: str, event: BackendEvent, future: asyncio.Future[Any]) -> Any:
        """Put the request in the stream and wait for the turn's answer."""
        if not self._emit(session_id, event):
            raise RequestRefused("no auger turn is running for this session")
        self._waiting.add(future)
        try:
            return await future
        finally:
            self._waiting.discard(future)


async def _told(request: Any) -> Any:
    """A refusal becomes the JSON-RPC error the agent reads (its message in `data.details`)."""
    from acp import RequestError

    try:
        return await request
    except RequestRefused as exc:
        raise RequestError.invalid_params({"details": str(exc)}) from None


def _locations(update: Any) -> list[str]:
    return [loc.path for loc in update.locations or [] if isinstance(getattr(loc, "path", None), str)]


def _edits(update: Any) -> list[FileEdit]:
    return [FileEdit(item.path, item.old_text, item.new_text) for item in update.content or []
            if getattr(item, "type", "") == "diff"]


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _arguments(raw: Any) -> dict[str, Any]:
    if raw is None:
        return {}
    return raw if isinstance(raw, dict) else {"input": raw}


def _output(update: Any) -> str:
    """A finished call's result as text: its text content, edits and terminals named, else its raw output."""
    parts: list[str] = []
    for item in update.content or []:
        kind = getattr(item, "type", "")
        if kind == "content":
            text = getattr(item.content, "text", None)
            parts.append(text if text is not None else f"[{getattr(item.content, 'type', 'content')}]")
        elif kind == "diff":
            parts.append(f"[edited {item.path}]")
        elif kind == "terminal":
            parts.append(f"[terminal {item.terminal_id}]")
    if not parts and update.raw_output is not None:
        raw = update.raw_output
        parts.append(raw if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False, default=str))
    return "\n".join(parts)
