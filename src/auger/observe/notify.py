"""`notify = ["program", "args"…]`: the user's program is told when a turn ends, an approval waits, or a
session has shut down.

The program gets the event as one JSON argument, after its own arguments: the envelope as `auger exec
--json` prints it, plus `cwd` (the session's project) and, for `turn_ended`, `last_agent_message` (the
turn's last reply, "" when it wrote none). A sub-agent's turns are not the session's and are not told; a
sub-agent's approval request is (someone must answer it).

Why it is built this way: the program may be slow, broken or missing, and none of that may reach the
session. It is started detached (its own session and process group, stdin/stdout/stderr on /dev/null)
and never waited for; a program that cannot be started is one warning, then the notifier is quiet.
Only the user's own config may name the program (a project's config never runs commands this way):
`notify` is not a key a project's `.auger/config.toml` may set (config.py).
"""

from __future__ import annotations

import logging
import shutil
import subprocess
from typing import Any, AsyncIterator, Callable

from auger.protocol import events as ev
from auger.protocol.envelope import Envelope

log = logging.getLogger("auger.notify")

TOLD = (ev.TurnEnded, ev.ApprovalRequest, ev.ShutdownComplete)


def notify_problem(argv: list[str]) -> str | None:
    """Why `argv` cannot be run (said once, when a session opens), or None."""
    if not argv or not argv[0].strip():
        return "notify is empty: set it to a program and its arguments, e.g. notify = [\"notify-send\", \"auger\"]"
    if shutil.which(argv[0]) is None:
        return f"notify: program {argv[0]!r} not found; notifications are off"
    return None


class Notifier:
    """Follows one session's envelopes and starts the user's program for the events it is told of."""

    def __init__(self, argv: list[str], warn: Callable[[str], None]) -> None:
        self.argv = list(argv)
        self.warn = warn
        self.broken = False
        self.cwd = ""
        self._last_reply: dict[str, str] = {}  # turn id -> its last agent message

    async def follow(self, envelopes: AsyncIterator[Envelope]) -> None:
        async for envelope in envelopes:
            try:
                self.see(envelope)
            except Exception:  # a notification must never end the session's follower
                log.exception("notify: handling %s failed", envelope.event.TYPE)

    def see(self, envelope: Envelope) -> None:
        event = envelope.event
        if isinstance(event, ev.SessionConfigured):
            self.cwd = event.cwd
        elif isinstance(event, ev.AgentMessage):
            self._last_reply[event.turn_id] = event.text
        if not isinstance(event, TOLD) or self.broken:
            return
        if isinstance(event, ev.TurnEnded) and envelope.parent_call_id is not None:
            return  # a sub-agent's turn, not the session's
        payload: dict[str, Any] = {**envelope.to_json(), "cwd": self.cwd}
        if isinstance(event, ev.TurnEnded):
            payload["last_agent_message"] = self._last_reply.pop(event.turn_id, "")
        # nothing may follow shutdown_complete in the session's stream: a problem then goes to the log
        self.start(payload, self.warn if not isinstance(event, ev.ShutdownComplete) else log.warning)

    def start(self, payload: dict[str, Any], warn: Callable[[str], None]) -> None:
        from auger.protocol.jsontext import dumps

        try:
            subprocess.Popen([*self.argv, dumps(payload)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)
        except (OSError, ValueError) as exc:  # gone since the session opened, not executable, a NUL in an arg
            self.broken = True
            warn(f"notify: cannot start {self.argv[0]!r} ({getattr(exc, 'strerror', None) or exc}); "
                      "notifications are off for this session")
