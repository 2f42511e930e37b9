"""Turns session events into lines for the scrollback (ANSI text) and a small live area.

Finished things — paragraphs of the answer, a tool call's one-line result, a diff, the plan — are
printed once into the terminal's normal scrollback, so they can be scrolled and copied after exit.
What is still changing — the paragraph being streamed, a running command's last lines, reasoning —
lives in the live area above the prompt and is redrawn in place.

Colours are the terminal's own 16 (plus dim and bold), so a light or a dark background both read
well; NO_COLOR turns them off.
"""

from __future__ import annotations

import io
import os
import re
import time
from dataclasses import dataclass, field
from typing import Any

from auger.protocol import events as ev

LIVE_TAIL = 4  # lines of a running command's output kept in view
DETAIL_TAIL = 20  # ...with details shown (ctrl-o)
DETAIL_OUTPUT = 40  # lines of a finished call's output printed under it with details shown
# Calls whose own output is the point (an interactive process's screen): its last lines stay under the call.
SCREEN_TOOLS = ("exec_command", "write_stdin")
DIAGNOSTICS_SHOWN = 8  # problems a change introduced, listed under its call (the model reads them all)
_FENCE = re.compile(r"^\s*(```|~~~)", re.M)
# whole escape sequences first (CSI, OSC, two-byte), then any other control character but tab and newline
_CONTROL = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|.?)"
                      r"|[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def clean(text: str) -> str:
    """Text from the model or a command, with terminal control sequences removed: they could move the
    cursor, retitle the window or hide lines."""
    return _CONTROL.sub("", text.replace("\r\n", "\n"))


def no_color() -> bool:
    return bool(os.environ.get("NO_COLOR"))


class Ansi:
    """Renders rich objects to ANSI text at the terminal's current width."""

    def __init__(self, width: int) -> None:
        self.width = width
        self.light = os.environ.get("AUGER_THEME", "").lower() == "light"

    def render(self, *objects: Any) -> str:
        from rich.console import Console

        buf = io.StringIO()
        console = Console(file=buf, width=max(20, self.width), force_terminal=not no_color(),
                          no_color=no_color(), color_system=None if no_color() else "standard",
                          highlight=False, emoji=False, legacy_windows=False)
        for obj in objects:
            console.print(obj)
        return buf.getvalue()

    def markdown(self, text: str) -> str:
        from rich.markdown import Markdown

        return self.render(Markdown(clean(text), code_theme="ansi_light" if self.light else "ansi_dark",
                                    hyperlinks=False))

    def styled(self, text: str, style: str = "") -> str:
        from rich.text import Text

        return self.render(Text(clean(text), style=style, overflow="fold"))

    def diff(self, diff: str, limit: int = 80) -> str:
        from rich.text import Text

        out = Text()
        lines = clean(diff).splitlines()
        for line in lines[:limit]:
            style = ("green" if line.startswith("+") and not line.startswith("+++") else
                     "red" if line.startswith("-") and not line.startswith("---") else
                     "cyan" if line.startswith("@@") else "dim" if line.startswith(("+++", "---")) else "")
            out.append("    " + line + "\n", style=style)
        if len(lines) > limit:
            out.append(f"    … {len(lines) - limit} more lines\n", style="dim")
        return self.render(out) if lines else ""


def summarize_args(name: str, args: Any) -> str:
    """The one detail that identifies a call: its command, path or pattern."""
    if not isinstance(args, dict):
        return clean(str(args))[:200]
    if name == "spawn_agent" and isinstance(args.get("prompt"), str):
        agent = args.get("agent") if isinstance(args.get("agent"), str) else "task"
        mode = " (background)" if args.get("background") is True else ""
        return clean(f"{agent}{mode}: {args['prompt']}").replace("\n", " ⏎ ")[:200]
    if name == "write_stdin":
        chars = args.get("chars") or ""
        return clean(f"session {args.get('session_id')}" + (f": {chars!r}" if chars else " (poll)"))[:200]
    for key in ("command", "cmd", "code", "path", "pattern", "query", "url", "name"):
        if isinstance(args.get(key), str):
            return clean(args[key]).replace("\n", " ⏎ ")[:200]
    return ""


def edit_diff(name: str, args: Any) -> str:
    """A diff of what a file tool call changed, from its arguments (the event carries no diff)."""
    if not isinstance(args, dict):
        return ""
    if name == "edit_file" and isinstance(args.get("old_string"), str) and isinstance(args.get("new_string"), str):
        old, new = args["old_string"].splitlines(), args["new_string"].splitlines()
        return "\n".join([f"--- {args.get('path', '')}", f"+++ {args.get('path', '')}",
                          *("-" + line for line in old), *("+" + line for line in new)])
    if name == "write_file" and isinstance(args.get("content"), str):
        return "\n".join([f"+++ {args.get('path', '')} (written)",
                          *("+" + line for line in args["content"].splitlines())])
    return ""


@dataclass
class Running:
    name: str
    detail: str
    started: float
    tail: list[str] = field(default_factory=list)
    partial: str = ""

    def add(self, text: str) -> None:
        lines = (self.partial + clean(text)).split("\n")
        self.partial = lines.pop()
        self.tail = (self.tail + lines)[-DETAIL_TAIL:]

    def shown(self, count: int = LIVE_TAIL) -> list[str]:
        return (self.tail + ([self.partial] if self.partial else []))[-count:]


class Renderer:
    """The state of the transcript: what is printed, what is live. `handle` returns the ANSI text to
    print into the scrollback for an event (possibly empty); `live_lines` is what the live area shows."""

    def __init__(self, width: int) -> None:
        self.ansi = Ansi(width)
        self.pending = ""  # streamed answer text not yet printed
        self.streamed = False  # some of the current answer was already printed
        self.reasoning = ""
        self.running: dict[str, Running] = {}
        self.model = self.mode = self.sandbox = ""
        self.effort = ""  # the reasoning effort a set_turn_context chose, for the status line
        self.context_left: float | None = None
        self.tokens = 0
        self.cost: float | None = 0.0
        self.turn_started: float | None = None
        self.details = False  # ctrl-o: reasoning in full, more live output, each call's output printed
        self.diffs: dict[str, str] = {}  # call id -> the diff its arguments describe, shown when it succeeds
        self.last_turn_diff = ""  # everything the last changing turn changed, for /diff
        self.limits = ""  # the provider's rate limits as its last response stated them, for the status line
        self.spawned: dict[str, str] = {}  # spawn_agent (run_code) call id -> what labels its children's lines
        self.child_calls: dict[str, str] = {}  # a sub-agent's running call id -> what it is doing

    def resize(self, width: int) -> None:
        self.ansi.width = width

    def handle(self, event: ev.Event) -> str:
        a = self.ansi
        if isinstance(event, ev.SessionConfigured):
            self.model, self.mode, self.sandbox = event.model, event.mode, event.sandbox
            what = "resumed" if event.resumed else "new session"
            return a.styled(f"auger · {what} {event.session_id[:8]} · {event.model} · {event.mode} mode · "
                            f"sandbox {event.sandbox} · {event.cwd}", "dim")
        if isinstance(event, ev.TurnStarted):
            self.turn_started = time.monotonic()
            return ""
        if isinstance(event, ev.ReasoningDelta):
            self.reasoning += event.delta
            return ""
        if isinstance(event, ev.MessageDelta):
            out = self._flush_reasoning()
            self.pending += event.delta
            return out + self._flush_paragraphs()
        if isinstance(event, ev.AgentMessage):
            out = self._flush_reasoning()
            if self.streamed or self.pending:
                out += a.markdown(self.pending) if self.pending.strip() else ""
            else:
                out += a.markdown(event.text) if event.text.strip() else ""
            self.pending, self.streamed = "", False
            return out
        if isinstance(event, ev.UserInputInjected):
            return a.styled(f"› {event.text}", "bold")
        if isinstance(event, ev.ToolCallStarted):
            out = self._flush_reasoning() + self._flush_all()
            self.running[event.call_id] = Running(event.name, summarize_args(event.name, event.arguments),
                                                  time.monotonic())
            diff = edit_diff(event.name, event.arguments)
            if diff:
                self.diffs[event.call_id] = diff
            if event.name == "run_code":
                self.spawned[event.call_id] = "code"
            if event.name == "spawn_agent" and isinstance(event.arguments, dict):
                agent = event.arguments.get("agent")
                self.spawned[event.call_id] = agent if isinstance(agent, str) else "task"
                return out + a.render(_line([("▸ ", "cyan"), ("spawn_agent ", "bold"),
                                             (summarize_args(event.name, event.arguments), "")]))
            return out
        if isinstance(event, ev.ToolOutputDelta):
            if event.call_id in self.running:
                self.running[event.call_id].add(event.text)
            return ""
        if isinstance(event, ev.ToolCallEnded):
            run = self.running.pop(event.call_id, None)
            detail = run.detail if run else ""
            seconds = f" {event.duration_ms / 1000:.1f}s" if event.duration_ms else ""
            mark, style = ("✓", "green") if event.ok else ("✗", "red")
            line = a.render(_line([(f"{mark} ", style), (f"{event.name} ", "bold"), (detail, ""),
                                   (seconds, "dim")]))
            output = event.plain_output()  # the diagnostics are shown apart, below, whatever is shown of it
            if self.details:  # the output as the model got it, head kept
                lines = clean(output).rstrip().splitlines()
                shown = lines[:DETAIL_OUTPUT] + ([f"… {len(lines) - DETAIL_OUTPUT} more lines"]
                                                 if len(lines) > DETAIL_OUTPUT else [])
                line += a.styled("\n".join("    " + x for x in shown), "dim") if shown else ""
            elif not event.ok:
                first = clean(output).strip().splitlines()[-3:]
                line += a.styled("\n".join("    " + x for x in first), "dim") if first else ""
            elif run is not None and run.name in SCREEN_TOOLS:  # what the process printed during the call
                screen = [x for x in run.shown() if x.strip()]
                line += a.styled("\n".join("    " + x for x in screen), "dim") if screen else ""
            diff = self.diffs.pop(event.call_id, "")
            return line + (a.diff(diff) if diff and event.ok else "") + self._diagnostics(event.diagnostics)
        if isinstance(event, ev.Retrying):
            # the reply is asked again: what was streamed of it is superseded
            self.pending = ""
            return a.styled(f"↻ retrying {event.attempt}/{event.max_attempts} in {event.delay_s:.1f}s: "
                            f"{event.reason}", "yellow")
        if isinstance(event, ev.WarningEvent):
            return a.styled(f"! {event.message}", "yellow")
        if isinstance(event, ev.SecretRedacted):
            return a.styled(f"⊘ {event.describe()}", "magenta")
        if isinstance(event, ev.LoopDetected):
            return a.styled(f"! {event.tool} repeated {event.repeats} times", "yellow")
        if isinstance(event, ev.PlanUpdated):
            return self._plan(event)
        if isinstance(event, ev.TokenUsage):
            self.context_left = event.context_left_percent
            self.tokens = event.session.total_tokens
            self.cost = event.session_cost
            return ""
        if isinstance(event, ev.RateLimits):
            self.limits = limits_text(event)
            return ""
        if isinstance(event, ev.TurnDiff):
            self.last_turn_diff = event.diff
            names = ", ".join(f.path for f in event.files[:5]) + (" …" if len(event.files) > 5 else "")
            return a.styled(f"Δ this turn changed {len(event.files)} file(s): {names}  (/diff shows it, "
                            "/undo takes it back)", "cyan") if event.files else ""
        if isinstance(event, ev.TurnUndone):
            what = "redid" if event.redo else "undid"
            failed = f"; could not restore: {', '.join(event.failed)}" if event.failed else ""
            return a.styled(f"↶ {what} turn {event.turn_id}: {len(event.files)} file(s){failed}", "cyan")
        if isinstance(event, ev.ContextCompacted):
            return a.styled(f"≡ context compacted ({event.reason}): {event.tokens_before:,} → "
                            f"{event.tokens_after:,} tokens", "cyan")
        if isinstance(event, ev.RolledBack):
            return a.styled(f"↶ rolled back {event.turns} turn(s); {event.user_messages_left} user messages left",
                            "cyan")
        if isinstance(event, ev.ModelChanged):
            self.model = event.model
            return a.styled(f"model: {event.previous_model} → {event.model} ({event.provider})", "cyan")
        if isinstance(event, ev.PendingChanged):
            names = ", ".join(event.paths[:5]) + (" …" if len(event.paths) > 5 else "")
            return a.styled(f"◌ {event.action} {names}; {event.count} file(s) pending (/pending lists them)", "cyan")
        if isinstance(event, ev.BackendChanged):
            return a.styled(f"backend: {event.previous or 'auger'} → {event.label or event.backend or 'auger'}", "cyan")
        if isinstance(event, ev.ModeChanged):
            self.mode = event.mode
            return a.styled(f"mode: {event.previous} → {event.mode}", "cyan")
        if isinstance(event, (ev.EnteredReviewMode, ev.ExitedReviewMode)):
            return a.styled(review_line(event), "cyan")
        if isinstance(event, ev.TurnContextChanged):
            self.effort = event.effort or ""
            return a.styled(f"next turns: reasoning effort {event.effort or 'default'} · summary "
                            f"{event.summary or 'off'} · working directory {event.cwd}", "cyan")
        if isinstance(event, ev.TurnEnded):
            out = self._flush_reasoning() + self._flush_all()
            for run in self.running.values():  # calls the turn's end cut short
                out += a.render(_line([("■ ", "yellow"), (f"{run.name} ", "bold"), (run.detail, ""),
                                       (" (stopped)", "dim")]))
            self.running.clear()
            self.diffs.clear()
            elapsed = f" after {time.monotonic() - self.turn_started:.1f}s" if self.turn_started else ""
            self.turn_started = None
            if event.reason == "cancelled":
                return out + a.styled(f"■ interrupted{elapsed}: {event.message or 'by the user'}", "yellow")
            if event.reason == "error":
                return out + a.styled(f"✗ error: {event.message or 'the turn failed'}", "red")
            return out
        return ""

    def _diagnostics(self, found: list[ev.Diagnostic]) -> str:
        """What the language servers found the call's change broke, one line each, under the call."""
        if not found:
            return ""
        shown = found[:DIAGNOSTICS_SHOWN]
        lines = [clean(f"    ⚠ {d.path}:{d.line}:{d.column} {d.message}" + (f" ({d.source})" if d.source else ""))
                 [: self.ansi.width - 1] for d in shown]
        if len(found) > len(shown):
            lines.append(f"    … {len(found) - len(shown)} more")
        return "\n" + self.ansi.styled("\n".join(lines), "red" if found[0].severity == "error" else "yellow")

    def handle_child(self, parent_call_id: str, event: ev.Event) -> str:
        """A sub-agent's event, as one dimmed line indented under the call that started it (labelled with the
        agent, since children run in parallel); its text stream and turn bookkeeping are left out."""
        line = self._child_line(event)
        if not line:
            return ""
        label = self.spawned.get(parent_call_id, "agent")
        return self.ansi.styled(f"  ↳ [{label}] {line}"[: self.ansi.width - 1], "dim")

    def _child_line(self, event: ev.Event) -> str:
        if isinstance(event, ev.ToolCallStarted):
            self.child_calls[event.call_id] = summarize_args(event.name, event.arguments)
            return ""
        if isinstance(event, ev.ToolCallEnded):
            detail = self.child_calls.pop(event.call_id, "")
            return clean(f"{'✓' if event.ok else '✗'} {event.name} {detail}")[: self.ansi.width - 8]
        if isinstance(event, ev.AgentMessage) and event.text.strip():
            first = clean(event.text).strip().splitlines()[0]
            return f"answer: {first}"[: self.ansi.width - 8]
        if isinstance(event, ev.WarningEvent):
            return clean(f"! {event.message}")[: self.ansi.width - 8]
        if isinstance(event, ev.SecretRedacted):
            return clean(f"⊘ {event.describe()}")[: self.ansi.width - 8]
        if isinstance(event, ev.TurnEnded) and event.reason != "complete":
            return clean(f"■ {event.reason}: {event.message or 'no reason given'}")[: self.ansi.width - 8]
        return ""

    # -- live area ---------------------------------------------------------------------
    def live_lines(self) -> list[tuple[str, str]]:
        """(style, text) lines for the live area."""
        lines: list[tuple[str, str]] = []
        if self.reasoning.strip():
            last = clean(self.reasoning).strip().splitlines()[-1]
            lines.append(("class:dim", f"thinking: {last[-(self.ansi.width - 12):]}"))
        if self.pending.strip():
            tail = clean(self.pending).rstrip().splitlines()[-6:]
            lines.extend(("", line) for line in tail)
        for run in self.running.values():
            secs = time.monotonic() - run.started
            lines.append(("class:running", f"⋯ {run.name} {run.detail[: self.ansi.width - 20]} ({secs:.0f}s)"))
            lines.extend(("class:dim", "    " + line[: self.ansi.width - 6])
                         for line in run.shown(DETAIL_TAIL if self.details else LIVE_TAIL))
        return lines

    # -- helpers -------------------------------------------------------------------------
    def _flush_reasoning(self) -> str:
        """Reasoning, once the answer or a tool call follows it: collapsed to its first lines, dimmed."""
        text = clean(self.reasoning).strip()
        self.reasoning = ""
        if not text:
            return ""
        lines = text.splitlines()
        if self.details:
            return self.ansi.styled("thinking: " + text, "dim italic")
        more = f"\n… {len(lines) - 3} more lines (ctrl-o shows it all)" if len(lines) > 3 else ""
        shown = "\n".join(lines[:3]) + more
        return self.ansi.styled("thinking: " + shown, "dim italic")

    def _flush_paragraphs(self) -> str:
        """Print the streamed answer up to its last paragraph break outside a code block."""
        cut = self.pending.rfind("\n\n")
        while cut > 0 and len(_FENCE.findall(self.pending[:cut])) % 2:
            cut = self.pending.rfind("\n\n", 0, cut)
        if cut <= 0:
            return ""
        done, self.pending = self.pending[:cut], self.pending[cut + 2:]
        self.streamed = True
        return self.ansi.markdown(done) if done.strip() else ""

    def _flush_all(self) -> str:
        text, self.pending = self.pending, ""
        self.streamed = False
        return self.ansi.markdown(text) if text.strip() else ""

    def _plan(self, event: ev.PlanUpdated) -> str:
        from rich.text import Text

        out = Text("plan\n", style="bold")
        for step in event.plan:
            status = step.get("status", "") if isinstance(step, dict) else ""
            box, style = {"completed": ("☑", "green strike"), "in_progress": ("▶", "bold")}.get(status, ("☐", ""))
            out.append(f"  {box} {clean(str(step.get('step', '') if isinstance(step, dict) else step))}\n", style=style)
        if event.explanation:
            out.append(f"  {clean(event.explanation)}\n", style="dim")
        return self.ansi.render(out)


def limits_text(event: ev.RateLimits) -> str:
    """The rate limits for the status line: what is left of each window, and when a used-up one refills."""
    parts = []
    for window in event.windows:
        if window.remaining is None:
            continue
        label = {"requests": "req", "tokens": "tok", "input_tokens": "in tok", "output_tokens": "out tok"}.get(
            window.name, window.name)
        text = f"{_short(window.remaining)}"
        if window.limit:
            text += f"/{_short(window.limit)}"
        if window.remaining == 0 and window.reset_s is not None:
            text += f" (reset {window.reset_s:.0f}s)"
        parts.append(f"{text} {label}")
    return "limits " + " · ".join(parts) if parts else ""


def _short(count: int) -> str:
    if count >= 1_000_000:
        return f"{count / 1_000_000:.1f}M"
    return f"{count / 1000:.0f}k" if count >= 10_000 else str(count)


def _line(parts: list[tuple[str, str]]):
    from rich.text import Text

    text = Text(overflow="ellipsis", no_wrap=True)
    for chunk, style in parts:
        text.append(clean(chunk), style=style)
    return text


def review_line(event: ev.EnteredReviewMode | ev.ExitedReviewMode) -> str:
    """One line for a review session's start or end (the terminal UI's transcript and its /review)."""
    if isinstance(event, ev.EnteredReviewMode):
        return clean(f"review mode: reviewing {event.target} with {event.model}")
    if event.verdict is None:
        return clean(f"review mode over: no review of {event.target} ({event.error or 'no reason given'})")
    return clean(f"review mode over: {event.target}: {event.verdict}, {event.findings} finding(s)")
