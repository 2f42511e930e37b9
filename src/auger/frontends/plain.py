"""What `auger exec` says on stderr, and what a headless run's refusals mean for how it exits.

stdout carries only the final answer (or, with `--json`, the events). On stderr, progress — each tool
call as it starts, each retry (a failure that stays one ends the run with its own error line) — is for
a person watching a terminal, and stays quiet otherwise. What changes how the run must be read is
written wherever stderr goes, a terminal or a CI log: warnings, loops, secret values hidden from the
model (never the values), and every call that was refused (a headless run has nobody to approve what
would be asked).
Colours only on a terminal; elsewhere each line starts with `auger:` like the command's other
messages.

`RunTally` follows a run's events (plain or `--json`) for its ending: which calls were refused, and
whether anything was changed. A run whose calls went unapproved (nobody to ask) and that changed
nothing most likely could not do its task here: it says so in one line with the way out, and the
command exits 3 instead of 0.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any

from auger.protocol import events as ev
from auger.protocol.jsontext import printable
from auger.protocol.vocab import Refusal

SHOWN = 100  # characters of a call's subject or a refusal's reason on one line
UNAPPROVED_HINT = ("a headless run has nobody to approve what would be asked: pass --approve-all, or run `auger` in "
                   "a terminal to answer yourself; `auger policy check -- CMD` explains a command's verdict")


def call_subject(arguments: Any) -> str:
    """What a call is about, in a few words: its command, path or pattern."""
    if not isinstance(arguments, dict):
        return ""
    return str(arguments.get("command") or arguments.get("path") or arguments.get("pattern") or "")[:SHOWN]


def first_sentence(text: str) -> str:
    """The gist of a refusal: its output's first sentence (the rest tells the model what to do next)."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    cut = line.find(". ")
    line = line[:cut + 1] if cut > 0 else line
    return line if len(line) <= 2 * SHOWN else line[:2 * SHOWN - 1] + "…"


class PlainRenderer:
    """Renders envelopes on stderr: progress only on a terminal, warnings and refusals always."""

    def __init__(self, live: bool | None = None) -> None:
        self.live = sys.stderr.isatty() if live is None else live
        self._subjects: dict[str, str] = {}  # call id -> subject, for a refusal's line

    def __call__(self, envelope: Any) -> None:
        event = envelope.event
        if isinstance(event, ev.ToolCallStarted):
            subject = call_subject(event.arguments)
            self._subjects[event.call_id] = subject
            if self.live:
                self._say(f"▸ {event.name} {subject}", "2")
        elif isinstance(event, ev.ToolCallEnded):
            subject = self._subjects.pop(event.call_id, "")
            if event.denied:
                self._tell("refused", f"{event.name} {subject}".rstrip() + f": {first_sentence(event.output)}")
            if self.live:  # what a language server found the change broke (`--json` has them typed)
                for d in event.diagnostics[:8]:
                    self._say(f"  ⚠ {d.path}:{d.line}:{d.column} {d.message}", "31")
        elif isinstance(event, ev.Retrying):  # progress: a failure that stays one is told at the end, once
            if self.live:
                self._say(f"↻ retrying {event.attempt}/{event.max_attempts} in {event.delay_s:.1f}s: {event.reason}",
                          "33")
        elif isinstance(event, ev.WarningEvent):
            self._tell("warning", event.message)
        elif isinstance(event, ev.SecretRedacted):
            self._tell("redacted", event.describe())
        elif isinstance(event, ev.LoopDetected):
            self._tell("warning", f"{event.tool} repeated {event.repeats}x")

    def _tell(self, kind: str, text: str) -> None:
        """A line that must be seen: marked and coloured on a terminal, `auger: KIND: …` elsewhere."""
        if self.live:
            self._say(f"! {text}" if kind == "warning" else f"! {kind}: {text}", "33")
        else:
            print(printable(f"auger: {kind}: {text}"), file=sys.stderr, flush=True)

    @staticmethod
    def _say(text: str, colour: str) -> None:
        print(printable(f"\x1b[{colour}m{text}\x1b[0m"), file=sys.stderr, flush=True)


@dataclass
class RunTally:
    """What a run's events say about how it ended: the calls refused (and why), and whether it changed
    anything (the turn's diff, or changes queued in pending mode)."""

    refused: list[Refusal] = field(default_factory=list)
    changed: bool = False
    mode: str = ""

    def see(self, event: ev.Event) -> None:
        if isinstance(event, ev.SessionConfigured):
            self.mode = str(event.mode)
        elif isinstance(event, ev.ToolCallEnded) and event.denied is not None:
            self.refused.append(event.denied)
        elif isinstance(event, (ev.TurnDiff, ev.PendingChanged)):
            self.changed = self.changed or bool(event.files if isinstance(event, ev.TurnDiff) else event.paths)

    def blocked(self, *, changes_known: bool) -> bool:
        """Whether missing approvals most likely kept the task from being done: calls that needed one
        were refused and nothing changed. A rule or a hook refusing is the user's policy at work, not
        a reason to fail; plan mode asked for no change; without snapshots nobody knows what changed."""
        return (Refusal.UNAPPROVED in self.refused and not self.changed and changes_known
                and self.mode != "plan")

    def summary(self, *, changes_known: bool) -> str | None:
        """One line for the end of a run that refused calls, or None."""
        if not self.refused:
            return None
        count = len(self.refused)
        line = f"auger: {count} tool call{'s' if count > 1 else ''} {'were' if count > 1 else 'was'} refused"
        if self.blocked(changes_known=changes_known):
            line += " and nothing was changed"
        if Refusal.UNAPPROVED in self.refused:
            return f"{line}: {UNAPPROVED_HINT}"
        return f"{line} by your rules or hooks"
