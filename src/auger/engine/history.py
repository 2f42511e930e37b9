"""The in-memory conversation of one session and its normalised prompt form.

Normalisation is what makes any recorded history sendable: every tool call gets
an output (a synthetic "interrupted" one if the process died mid-call), outputs
sit right after their calls in call order (parallel calls may finish in any
order), orphan outputs are dropped, and an aborted turn becomes a note the model reads.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from auger.protocol.items import Item, ToolCall, ToolOutput, TurnAborted, UserMessage

INTERRUPTED_OUTPUT = "interrupted: this call was stopped before it finished; its effects may be partial"
ABORTED_NOTE = ("<turn_aborted>The user interrupted the previous turn ({reason}). Tool calls still running were "
                "stopped; check the state of anything they were changing before relying on it.</turn_aborted>")


class History:
    def __init__(self, items: Iterable[Item] = ()) -> None:
        self._items: list[Item] = list(items)

    def append(self, item: Item) -> None:
        self._items.append(item)

    def __len__(self) -> int:
        return len(self._items)

    @property
    def items(self) -> Sequence[Item]:
        return self._items

    def unanswered_calls(self) -> list[ToolCall]:
        answered = {i.call_id for i in self._items if isinstance(i, ToolOutput)}
        return [i for i in self._items if isinstance(i, ToolCall) and i.call_id not in answered]

    def call_ids(self) -> set[str]:
        return {i.call_id for i in self._items if isinstance(i, ToolCall)}

    def for_prompt(self) -> list[Item]:
        outputs = {i.call_id: i for i in self._items if isinstance(i, ToolOutput)}
        prompt: list[Item] = []
        open_calls: list[ToolCall] = []

        def close_calls() -> None:
            for call in open_calls:
                prompt.append(outputs.get(call.call_id) or ToolOutput(call.call_id, INTERRUPTED_OUTPUT, ok=False))
            open_calls.clear()

        for item in self._items:
            if isinstance(item, ToolCall):
                prompt.append(item)
                open_calls.append(item)
                continue
            close_calls()  # a reply's calls are contiguous: anything else ends the block
            if isinstance(item, ToolOutput):
                continue  # placed right after its call by close_calls (or an orphan: dropped)
            if isinstance(item, TurnAborted):
                prompt.append(UserMessage(ABORTED_NOTE.format(reason=item.reason)))
            else:
                prompt.append(item)
        close_calls()
        return prompt
