"""Turns and compaction in-process: a fake host, the replay client, real tools — no session, no sockets.

These pin the Session ↔ Turn seam: everything a turn does goes through its TurnHost, in the
durable order (commit an item, then announce it)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from auger.engine.turn.accounting import Budgets
from auger.engine.turn.compact import RECORD_SUMMARY_NOTE, compact
from auger.engine.turn.turn import Turn
from auger.engine.workspace import Workspace
from auger.models.replay import RecordedCall, RecordedReply, ReplayClient
from auger.protocol import events as ev
from auger.protocol.events import Usage
from auger.protocol.items import AssistantMessage, Compaction, ToolCall, ToolOutput, TurnAborted, UserMessage
from auger.protocol.ops import UserTurn
from auger.tools.toolset import builtin_toolset
from tests.support.harness import make_config
from tests.support.fake_host import FakeHost, fake_context, fake_runtime


class OrderedHost(FakeHost):
    """Notes how much was recorded when each event went out."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.recorded_at: list[tuple[str, int]] = []

    def emit(self, event) -> None:
        self.recorded_at.append((event.TYPE, len(self.history)))
        super().emit(event)


def _turn(project: Path, replies: list[RecordedReply], host: FakeHost, *, mode: str = "auto", **options):
    workspace = Workspace.open(project, make_config())
    client = ReplayClient(replies=replies)
    runtime = fake_runtime(project, list(builtin_toolset().list_tools()), interactive=True, mode=mode)
    ctx = fake_context(workspace, client, runtime, **options)
    return Turn(ctx, host), client


def test_a_turn_acts_only_through_its_host_and_commits_before_it_announces(project):
    (project / "notes.txt").write_text("remember the milk\n")
    host = OrderedHost(inputs=[UserTurn("what do my notes say?")])
    turn, client = _turn(project, [RecordedReply(tool_calls=[RecordedCall("read_file", {"path": "notes.txt"})]),
                                   RecordedReply(text="They say: remember the milk.")], host)
    assert asyncio.run(turn.run()) == ("complete", None)
    kinds = [type(item) for item in host.history.items]
    assert kinds == [UserMessage, ToolCall, ToolOutput, AssistantMessage]
    assert "remember the milk" in host.history.items[2].output
    at = dict(host.recorded_at)
    assert at["tool_call_ended"] == 3 and at["agent_message"] == 4  # the output, the answer: committed first
    assert host.title == "what do my notes say?" and client.remaining == 0
    assert len(host.charged) == 2 and host.ledger.turn_usage.input_tokens > 0


def test_a_used_up_budget_stops_the_turn_before_any_model_call(project):
    host = FakeHost(inputs=[UserTurn("go")])
    host.ledger.add(Usage(input_tokens=900, output_tokens=200), 0.0)
    turn, client = _turn(project, [RecordedReply(text="never sent")], host, budgets=Budgets(tokens=1000))
    reason, message = asyncio.run(turn.run())
    assert reason == "error" and message.startswith("session token budget reached: 1,100 of 1,000")
    assert client.remaining == 1


def test_a_compact_request_is_honoured_before_the_next_model_call(project):
    host = FakeHost(inputs=[UserTurn("carry on")], compact_requested=True)
    turn, client = _turn(project, [RecordedReply(text="Summary: the user wants to carry on."),
                                   RecordedReply(text="Carrying on.")], host)
    assert asyncio.run(turn.run()) == ("complete", None)
    compacted = host.of(ev.ContextCompacted)
    assert len(compacted) == 1 and compacted[0].reason == "manual"
    assert any(isinstance(i, Compaction) and "carry on" in i.summary for i in host.history.items)
    assert not host.compact_requested and client.remaining == 0


def test_abort_at_an_approval_cancels_the_turn_and_closes_its_calls(project):
    host = FakeHost(inputs=[UserTurn("make a file")], answer=lambda request: "abort")
    turn, _ = _turn(project, [RecordedReply(tool_calls=[RecordedCall("write_file", {"path": "a.txt", "content": "x"})])],
                    host, mode="safe")
    assert asyncio.run(turn.run()) == ("cancelled", "aborted by the user at an approval")
    assert len(host.asked) == 1 and not (project / "a.txt").exists()
    outputs = [i for i in host.history.items if isinstance(i, ToolOutput)]
    assert len(outputs) == 1 and not outputs[0].ok
    assert isinstance(host.history.items[-1], TurnAborted)


def test_compaction_falls_back_to_a_summary_from_the_record(project):
    host = FakeHost()
    for item in (UserMessage("fix the parser"), ToolCall("c1", "shell", '{"command": "make test"}'),
                 ToolOutput("c1", "Exit code 2\nparser.c:10: error", ok=False)):
        host.history.append(item)
    turn, client = _turn(project, [RecordedReply(text=""), RecordedReply(text="  ")], host)
    asyncio.run(compact(turn.ctx, host, "manual"))
    item = host.history.items[-1]
    assert isinstance(item, Compaction) and item.summary.startswith(RECORD_SUMMARY_NOTE)
    assert "`make test` -> Exit code 2" in item.summary and item.user_messages == ["fix the parser"]
    assert client.remaining == 0 and len(host.charged) == 2


def test_a_derived_context_can_narrow_the_tools_of_a_sub_agent(project):
    """A read-only sub-agent is a derived context whose runtime routes a filtered toolset."""
    from auger.tools.toolset import read_only

    host = FakeHost(inputs=[UserTurn("look around")])
    turn, _ = _turn(project, [RecordedReply(tool_calls=[RecordedCall("shell", {"command": "touch x"})]),
                              RecordedReply(text="I may only look.")], host)
    narrow = fake_runtime(project, list(read_only(builtin_toolset()).list_tools()))
    child = turn.ctx.derive(turn_id="child", runtime=narrow, max_model_calls=5)
    assert turn.ctx.turn_id == "t1" and "shell" in {t.name for t in turn.ctx.tools}
    assert "shell" not in {t.name for t in child.tools} and child.max_model_calls == 5
    assert asyncio.run(Turn(child, host).run()) == ("complete", None)
    output = [i for i in host.history.items if isinstance(i, ToolOutput)][0]
    assert "no tool named 'shell'" in output.output and not (project / "x").exists()
