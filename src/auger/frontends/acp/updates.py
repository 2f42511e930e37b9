"""auger's events and stored items → ACP `session/update` notifications.

One `UpdateMapper` per session: it remembers each tool call's name and arguments from its start,
so the call's end can carry the right kind, diff and terminal. Tool calls get an ACP kind, a title,
the locations they touch (paths resolved beneath the project root; a path that escapes it is
simply not shown) and, for file edits, diff content (old and new text). The same mapping replays a
stored conversation for `session/load`.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Sequence

from acp import helpers
from acp.schema import AvailableCommand, AvailableCommandInput, ToolCallLocation, UnstructuredCommandInput

from auger.protocol import events as ev
from auger.protocol import items as it

MAX_SHOWN_OUTPUT = 20_000  # characters of a tool's output shown in the editor (the model's text is already capped)
LIVE_INTERVAL = 0.25  # seconds between updates showing a running call's output (its end shows the rest)

KINDS = {
    "read_file": "read", "recall": "read", "skill": "read",
    "write_file": "edit", "edit_file": "edit", "apply_patch": "edit",
    "grep": "search", "glob": "search", "list_dir": "search",
    "shell": "execute", "update_plan": "think", "web_fetch": "fetch", "web_search": "search",
    "exec_command": "execute", "write_stdin": "execute", "run_code": "execute",
}
# Phrases of the turn's warnings that say why a reply stopped (engine/turn/turn.py, models/*).
MAX_TOKENS_WARNING = "cut off at its output token limit"
REFUSAL_WARNING = "refused the request"
CALL_CAP_ERROR = "max_model_calls_per_turn"


def tool_kind(name: str) -> str:
    return KINDS.get(name, "other")


def tool_title(name: str, args: Any) -> str:
    """A one-line title: what the call does, with its subject."""
    if not isinstance(args, dict):
        return name
    if name == "write_stdin":
        chars = args.get("chars") or ""
        return f"Type into session {args.get('session_id')}" + (f": {_one_line(repr(chars))}" if chars else " (poll)")
    subject = (args.get("command") or args.get("cmd") or args.get("path") or args.get("pattern") or args.get("query")
               or args.get("url"))
    if name in ("shell", "exec_command") and subject:
        return f"`{_one_line(str(subject))}`"
    verb = {"read_file": "Read", "write_file": "Write", "edit_file": "Edit", "list_dir": "List", "web_fetch": "Fetch",
            "web_search": "Search the web for"}.get(name, name)
    return f"{verb} {_one_line(str(subject))}" if subject else verb




def _one_line(text: str, limit: int = 120) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[:limit - 1] + "…"


def inside(root: Path, raw: Any) -> str | None:
    """The absolute path `raw` names beneath `root`, lexically (the tools resolve links themselves);
    None when it is not a string or leaves the root."""
    if not isinstance(raw, str) or not raw or "\x00" in raw:
        return None
    path = os.path.normpath(os.path.join(root, raw))
    return path if path == str(root) or path.startswith(str(root) + os.sep) else None


class UpdateMapper:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.calls: dict[str, tuple[str, Any]] = {}  # call id -> (tool name, arguments)
        self.terminals: dict[str, str] = {}  # call id -> the editor terminal it ran in
        self.live: dict[str, tuple[str, float]] = {}  # running call id -> (its output so far, when last shown)
        self.held: set[str] = set()  # running calls with output not shown yet (it came too soon after the last)
        self.stop_hint: str | None = None  # why the running turn's reply stopped, from its warnings

    # -- live events ------------------------------------------------------------------
    def updates(self, event: ev.Event) -> list[Any]:
        if isinstance(event, ev.MessageDelta):
            return [helpers.update_agent_message_text(event.delta)]
        if isinstance(event, ev.ReasoningDelta):
            return [helpers.update_agent_thought_text(event.delta)]
        if isinstance(event, ev.ToolCallStarted):
            return [self.start(event.call_id, event.name, event.arguments)]
        if isinstance(event, ev.ToolOutputDelta):
            return self.output(event.call_id, event.text)
        if isinstance(event, ev.ToolCallEnded):
            return [self.end(event.call_id, event.name, event.ok, event.plain_output(), event.diagnostics)]
        if isinstance(event, ev.PlanUpdated):
            return [plan_update([{"step": s.step, "status": s.status} for s in event.plan])]
        if isinstance(event, ev.ModeChanged):
            return [helpers.update_current_mode(str(event.mode))]
        if isinstance(event, (ev.EnteredReviewMode, ev.ExitedReviewMode)):
            return []  # a review runs in a session of its own (`auger review`), never one an editor drives
        if isinstance(event, ev.SecretRedacted):
            return []  # the markers in the call's output say it where the editor shows it; no text is added
        if isinstance(event, ev.TurnStarted):
            self.stop_hint = None
        if isinstance(event, ev.WarningEvent):
            if MAX_TOKENS_WARNING in event.message:
                self.stop_hint = "max_tokens"
            elif REFUSAL_WARNING in event.message:
                self.stop_hint = "refusal"
            return [helpers.update_agent_message_text(f"\n\n> auger: {event.message}\n\n")]
        return []

    def start(self, call_id: str, name: str, args: Any) -> Any:
        self.calls[call_id] = (name, args)
        return helpers.start_tool_call(call_id, tool_title(name, args), kind=tool_kind(name), status="pending",  # type: ignore[arg-type]  # a ToolKind literal
                                       content=self._diff(name, args), locations=self._locations(args),
                                       raw_input=args)

    def output(self, call_id: str, text: str) -> list[Any]:
        """A running call's output so far (its tail), as in-progress content: at most every LIVE_INTERVAL, so a
        chatty command does not flood the editor. What comes sooner is held (`held`) until `due` gives it,
        or the call's end shows it."""
        shown, last = self.live.get(call_id, ("", 0.0))
        shown = (shown + text)[-MAX_SHOWN_OUTPUT:]
        now = time.monotonic()
        if now - last < LIVE_INTERVAL:
            self.live[call_id] = (shown, last)
            self.held.add(call_id)
            return []
        self.live[call_id] = (shown, now)
        self.held.discard(call_id)
        return [self._running(call_id, shown)]

    def due(self) -> list[Any]:
        """The held output of running calls last shown LIVE_INTERVAL ago or more."""
        now = time.monotonic()
        updates = []
        for call_id in sorted(self.held):
            shown, last = self.live.get(call_id, ("", now))
            if now - last >= LIVE_INTERVAL:
                self.live[call_id] = (shown, now)
                self.held.discard(call_id)
                updates.append(self._running(call_id, shown))
        return updates

    @staticmethod
    def _running(call_id: str, shown: str) -> Any:
        return helpers.update_tool_call(call_id, status="in_progress",
                                        content=[helpers.tool_content(helpers.text_block(shown))])

    def end(self, call_id: str, name: str, ok: bool, output: str, diagnostics: Sequence[ev.Diagnostic] = ()) -> Any:
        """The call's end: its diff, terminal and output; what a language server found its change broke as
        content of its own (the caller takes it out of the output: ToolCallEnded.plain_output), with a location
        for each."""
        self.live.pop(call_id, None)
        self.held.discard(call_id)
        _, args = self.calls.pop(call_id, (name, None))
        content: list[Any] = list(self._diff(name, args) or [])
        terminal = self.terminals.pop(call_id, None)
        if terminal is not None:
            content.append(helpers.tool_terminal_ref(terminal))
        shown = output if len(output) <= MAX_SHOWN_OUTPUT else output[:MAX_SHOWN_OUTPUT] + "\n[… cut]"
        content.append(helpers.tool_content(helpers.text_block(shown)))
        if not diagnostics:
            return helpers.update_tool_call(call_id, status="completed" if ok else "failed", content=content)
        problems = "\n".join(f"{d.path}:{d.line}:{d.column}: {d.severity}: {d.message}"
                             + (f" ({d.source})" if d.source else "") for d in diagnostics)
        content.append(helpers.tool_content(helpers.text_block(f"Problems this change introduced:\n{problems}")))
        places = [ToolCallLocation(path=path, line=d.line) for d in diagnostics
                  if (path := inside(self.root, d.path)) is not None]
        return helpers.update_tool_call(call_id, status="completed" if ok else "failed", content=content,
                                        locations=places or None)

    @staticmethod
    def has_diff(name: str) -> bool:
        """Whether the call's start already showed its change as diff content (so an approval need not)."""
        return name in ("edit_file", "write_file")

    def _diff(self, name: str, args: Any) -> list[Any] | None:
        """The change an edit makes, as the editor shows diffs: for `edit_file` the replaced text and its
        replacement, for `write_file` the new content (no old text: the editor has the file)."""
        if not isinstance(args, dict):
            return None
        path = inside(self.root, args.get("path"))
        if path is None:
            return None
        if name == "edit_file" and isinstance(args.get("old_string"), str) and isinstance(args.get("new_string"), str):
            return [helpers.tool_diff_content(path, args["new_string"], args["old_string"])]
        if name == "write_file" and isinstance(args.get("content"), str):
            return [helpers.tool_diff_content(path, args["content"])]
        return None

    def _locations(self, args: Any) -> list[ToolCallLocation] | None:
        if not isinstance(args, dict):
            return None
        path = inside(self.root, args.get("path") or args.get("workdir"))
        if path is None:
            return None
        line = args.get("offset")
        return [ToolCallLocation(path=path, line=line if isinstance(line, int) and line > 0 else None)]

    # -- a stored conversation ------------------------------------------------------------
    def replay(self, items: list[it.Item]) -> list[Any]:
        """The conversation as the user saw it: their messages, the agent's replies and thoughts, each
        tool call with its result; engine context (instructions, environment) is not shown."""
        out: list[Any] = []
        for item in items:
            if isinstance(item, it.UserMessage):
                out.append(helpers.update_user_message_text(item.text))
            elif isinstance(item, it.AssistantMessage):
                out.append(helpers.update_agent_message_text(item.text))
            elif isinstance(item, it.Reasoning) and item.text:
                out.append(helpers.update_agent_thought_text(item.text))
            elif isinstance(item, it.ToolCall):
                out.append(self.start(item.call_id, item.name, _arguments(item.arguments)))
            elif isinstance(item, it.ToolOutput):
                name = self.calls.get(item.call_id, ("", None))[0]
                out.append(self.end(item.call_id, name, item.ok, item.output))
            elif isinstance(item, it.Compaction):
                out.append(helpers.update_agent_thought_text(f"(earlier conversation summarised)\n{item.summary}"))
        return out


def _arguments(raw: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def plan_update(steps: list[dict]) -> Any:
    """auger's plan (update_plan) as ACP plan entries; auger has no priorities, so all are medium."""
    statuses = {"pending", "in_progress", "completed"}
    return helpers.update_plan([
        helpers.plan_entry(str(s.get("step", "")), priority="medium",
                           status=s.get("status") if s.get("status") in statuses else "pending")  # type: ignore[arg-type]
        for s in steps if isinstance(s, dict)])


def available_commands(prompts: dict[str, Any], skills: list[Any]) -> Any:
    """auger's custom slash prompts and skills, offered as the editor's `/` commands."""
    commands = [AvailableCommand(name=p.name, description=p.description or f"custom prompt ({p.source})",
                                 input=AvailableCommandInput(root=UnstructuredCommandInput(hint=p.argument_hint))
                                 if p.argument_hint else None)
                for p in prompts.values()]
    commands += [AvailableCommand(name=s.name, description=f"skill: {s.description}"[:200]) for s in skills
                 if s.name not in prompts]
    return helpers.update_available_commands(commands)
