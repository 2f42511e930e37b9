"""History normalisation and the JSON form of every op, event and item."""

from __future__ import annotations

import dataclasses
import enum
import json
import typing

import pytest

from auger.engine.turn.history import History
from auger.protocol.events import Event, TokenUsage, Usage
from auger.protocol.items import AssistantMessage, Item, ToolCall, ToolOutput, TurnAborted, UserMessage
from auger.protocol.ops import Op


def test_every_call_gets_an_output_right_after_its_block():
    h = History([
        UserMessage("u1"), AssistantMessage("a"), ToolCall("c1", "read_file", "{}"), ToolCall("c2", "grep", "{}"),
        ToolOutput("c2", "second done"), ToolOutput("c1", "first done"),  # parallel calls finished out of order
        ToolCall("c3", "shell", "{}"),  # process died here: no output
        UserMessage("u2"),
        ToolOutput("zz", "orphan"),
    ])
    prompt = h.for_prompt()
    kinds = [(type(i).__name__, getattr(i, "call_id", "")) for i in prompt]
    assert kinds == [("UserMessage", ""), ("AssistantMessage", ""), ("ToolCall", "c1"), ("ToolCall", "c2"),
                     ("ToolOutput", "c1"), ("ToolOutput", "c2"), ("ToolCall", "c3"), ("ToolOutput", "c3"),
                     ("UserMessage", "")]
    assert prompt[7].ok is False and "interrupted" in prompt[7].output
    assert [c.call_id for c in h.unanswered_calls()] == ["c3"]


def test_calls_of_consecutive_replies_stay_separate_blocks():
    h = History([ToolCall("a", "x", "{}"), ToolOutput("a", "A"), ToolCall("b", "y", "{}"), ToolOutput("b", "B")])
    assert [type(i).__name__ for i in h.for_prompt()] == ["ToolCall", "ToolOutput", "ToolCall", "ToolOutput"]


def test_aborted_turn_becomes_a_note_for_the_model():
    prompt = History([UserMessage("go"), TurnAborted("interrupted by the user")]).for_prompt()
    assert isinstance(prompt[1], UserMessage) and "<turn_aborted>" in prompt[1].text


def _sample(cls):
    values = {}
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING:
            continue
        hint = hints[f.name]
        if isinstance(hint, type) and issubclass(hint, enum.Enum):
            values[f.name] = next(iter(hint))
        else:
            values[f.name] = {str: "x", bool: True, int: 3, float: 1.5}.get(hint, "x")
    return cls(**values)


@pytest.mark.parametrize("family", [Op, Event, Item])
def test_every_record_round_trips_through_json(family):
    assert family._registry, "no record types registered"
    for tag, cls in family._registry.items():
        record = _sample(cls)
        data = json.loads(json.dumps(record.to_json()))
        assert data["type"] == tag
        assert family.from_json(data) == record


def test_nested_usage_round_trips_and_unknown_types_are_refused():
    event = TokenUsage("t", Usage(1, 2, 3, 4), Usage(5, 6, 7, 8), Usage(9, 10, 11, 12))
    back = Event.from_json(json.loads(json.dumps(event.to_json())))
    assert back == event and isinstance(back.session, Usage)
    with pytest.raises(ValueError, match="unknown Op type"):
        Op.from_json({"type": "self_destruct"})
    with pytest.raises(ValueError):
        Op.from_json({"type": "turn_started", "turn_id": "t"})  # an event is not an op


_FIRST_USE = """
import dataclasses, sys, threading
from auger.protocol import events, items, ops
records = [*events.Event._registry.values(), *items.Item._registry.values(), *ops.Op._registry.values()]
made = [r.__name__ for r in records if "__init__" in r.__dict__]  # a dataclass has its own
assert not made, f"made dataclasses at import: {made}"
assert dataclasses.is_dataclass(events.ItemStarted) and [f.name for f in dataclasses.fields(events.ItemStarted)] \\
    == ["turn_id", "item_id", "kind"]
starts, errors = threading.Barrier(8), []
def build():
    starts.wait()
    try:
        assert ops.UserTurn("hi").images == []
    except BaseException as exc:
        errors.append(exc)
threads = [threading.Thread(target=build) for _ in range(8)]
[t.start() for t in threads]
[t.join() for t in threads]
assert not errors, errors
@dataclasses.dataclass
class Later(events.MessageDelta):
    extra: int = 0
assert [f.name for f in dataclasses.fields(Later)] == ["turn_id", "delta", "item_id", "extra"]
assert repr(events.TurnStarted("t")) == "TurnStarted(turn_id='t')" and events.TurnStarted.__match_args__ == ("turn_id",)
print("ok")
"""


def test_a_record_is_made_a_dataclass_at_its_first_use_and_is_the_same_dataclass_then():
    """Making eighty dataclasses is most of what importing the protocol costs, and a process uses few."""
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-c", _FIRST_USE], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr
    assert [f.name for f in dataclasses.fields(ToolCall)] == ["call_id", "name", "arguments"]
    assert ToolCall("c", "n", "{}") == ToolCall("c", "n", "{}") and ToolCall.__hash__ is None
