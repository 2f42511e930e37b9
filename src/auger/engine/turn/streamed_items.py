"""Ids for the pieces of a reply that stream: each message and each reasoning gets one.

A client that draws deltas as they come must know where one reply's text ends and the next begins
(two model calls in a turn, a backend agent's text before and after a tool call, a retry that throws
an attempt away). So the first delta of a piece is preceded by `item_started`, every delta carries the
piece's `item_id`, and `item_ended` closes it — `discarded` when what was shown will not be kept.
"""

from __future__ import annotations

from typing import Callable

from auger.ids import new_hex
from auger.protocol import events as ev

MESSAGE, REASONING = "message", "reasoning"


class StreamedItems:
    """The open message and reasoning of one reply (at most one of each), announced as they start and end."""

    def __init__(self, emit: Callable[[ev.Event], None], turn_id: str) -> None:
        self._emit = emit
        self._turn_id = turn_id
        self._open: dict[str, str] = {}  # kind -> item id

    def text(self, delta: str) -> None:
        self._emit(ev.MessageDelta(self._turn_id, delta, self._item(MESSAGE)))

    def reasoning(self, delta: str) -> None:
        self._emit(ev.ReasoningDelta(self._turn_id, delta, self._item(REASONING)))

    def end(self, kind: str | None = None, *, discarded: bool = False) -> str:
        """Close the open item of `kind` (None: both); returns the message's id ("" when none was open)."""
        message = self._open.get(MESSAGE, "") if kind in (None, MESSAGE) else ""
        for open_kind in [k for k in (REASONING, MESSAGE) if kind in (None, k) and k in self._open]:
            self._emit(ev.ItemEnded(self._turn_id, self._open.pop(open_kind), open_kind, discarded))
        return message

    def _item(self, kind: str) -> str:
        item_id = self._open.get(kind)
        if item_id is None:
            item_id = self._open[kind] = new_hex(12)
            self._emit(ev.ItemStarted(self._turn_id, item_id, kind))
        return item_id
