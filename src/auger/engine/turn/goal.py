"""A goal run: turns until a check passes — a command's exit status, a model's judgement of a goal in words, or
both — or a limit ends it.

    user_turn{until, goal, max_turns} → the command is judged by policy before any turn (`refusal`): one the
    session could never run (denied, or needing an approval nobody headless can give) ends the run at once
    → turn → check (`check`): the command runs through the tool runtime's shell — the session's sandbox, mode,
    policy and approvals, like a call of the model's — and, only when it passed, the checker model judges the
    goal (structured output {met, reason}) → `goal_checked` → passed, or a limit (`limit`): that ends the run
    (`goal_ended`); otherwise the command's output (its tail) is the next turn's user message.

Why a command first: an exit status cannot be talked round, costs no tokens, and the model reads exactly
what failed. The checker model is asked only once the command passed (or when there is none), so a failing
test costs no judgement. The limits, in the order they are looked at: the check passed; the turn failed or
was stopped; the session's token or cost budget is used up; `max_turns` turns ran; two turns in a row
changed nothing (no call that may change a file ran: the model is stuck, more turns would only cost).

The run lives in the session (engine/session/session.py starts each turn and calls `check` inside the turn,
before its `turn_ended`, so the command's events, approvals and an interrupt belong to that turn).
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

from auger.engine.turn.call_outcome import Ran, call_ended, result_of
from auger.engine.turn.model_call import Reply, call_model
from auger.ids import new_hex
from auger.models.base import ModelClient, ModelError, ModelRequest, OutputFormat
from auger.protocol import events as ev
from auger.protocol.items import AssistantMessage, Item, ToolCall, UserMessage
from auger.protocol.vocab import GoalEndReason

if TYPE_CHECKING:
    from auger.engine.turn.host import TurnHost
    from auger.engine.turn.tool_runtime import ToolRuntime

OUTPUT_TAIL = 4000  # characters of the command's output the model reads (and goal_checked carries)
ANSWER_CHARS = 6000  # of the model's last answer the checker reads
NO_PROGRESS_TURNS = 2  # turns in a row that changed nothing before the run gives up
CHECKER_INSTRUCTIONS = (
    "You check whether a coding agent's work meets a goal. You are given the goal, the agent's last answer and, "
    "when there is one, the output of the check command that passed. Judge only from what you are given; "
    "when the evidence does not show the goal is met, it is not. Answer with JSON only: "
    '{"met": true or false, "reason": "one sentence"}.')
VERDICT_SCHEMA: dict[str, Any] = {
    "type": "object", "properties": {"met": {"type": "boolean"}, "reason": {"type": "string"}},
    "required": ["met", "reason"], "additionalProperties": False}


@dataclass
class GoalRun:
    """One goal run's settings and how far it got."""

    until: str | None
    goal: str | None
    max_turns: int
    attempts: int = 0  # turns checked so far
    idle: int = 0  # turns in a row that changed nothing


@dataclass(frozen=True)
class Check:
    passed: bool
    output: str  # the command's output tail ("" without a command)
    exit_code: int | None = None
    reason: str | None = None  # the checker model's
    reply: Reply | None = None  # the checker model's call, for its usage


def refusal(runtime: ToolRuntime, command: str) -> str | None:
    """Why the goal command could never run in this session — the policy denies it, or it needs an approval
    and nobody can give one — said before any turn; None: it may run (perhaps after the user is asked)."""
    problem = runtime.refused_unasked("shell", {"command": command})
    return f"the goal command `{command}` may not run here: {problem}" if problem else None


async def check(run: GoalRun, runtime: ToolRuntime, host: TurnHost, turn_id: str, *,
                checker: ModelClient | None, answer: str) -> Check:
    """Run the goal's checks after a turn: the command, then (if it passed) the checker model."""
    output, exit_code = "", None
    if run.until is not None:
        output, exit_code = await _run_command(runtime, host, turn_id, run.until)
        if exit_code != 0:
            return Check(False, output, exit_code)
    if run.goal is None or checker is None:
        return Check(True, output, exit_code)
    met, reason, reply = await _judge(checker, run.goal, answer, output)
    return Check(met, output, exit_code, reason, reply)


async def _run_command(runtime: ToolRuntime, host: TurnHost, turn_id: str, command: str) -> tuple[str, int | None]:
    """The command's output tail and exit status (None: it did not run — refused, or failed to start)."""
    call = ToolCall("goal-" + new_hex(10), "shell", json.dumps({"command": command}))
    started = time.monotonic()
    try:
        outcome = await runtime.run(call, host, turn_id=turn_id)
    except asyncio.CancelledError:
        host.emit(ev.ToolCallEnded(turn_id, call.call_id, "shell", False, "interrupted",
                                   int((time.monotonic() - started) * 1000)))
        raise
    result = result_of(outcome)
    host.emit(call_ended(turn_id, call, result, outcome, started))
    for event in result.events:  # secret_redacted, when it was
        host.emit(event)
    code = result.metadata.get("exit_code") if isinstance(outcome, Ran) else None
    if isinstance(outcome, Ran) and result.metadata.get("timed_out"):
        code = None
    return tail(result.output), code if isinstance(code, int) else None


async def _judge(client: ModelClient, goal: str, answer: str, output: str) -> tuple[bool, str, Reply | None]:
    """The checker model's verdict: (met, reason, its call). A failing or unreadable checker never passes a
    goal: its problem is the reason."""
    from auger.engine.turn.structured_output import parse_answer

    text = f"Goal: {goal}\n\nThe agent's last answer:\n{answer[-ANSWER_CHARS:] or '(none)'}"
    if output:
        text += f"\n\nOutput of the check command (it passed):\n{output}"
    request = ModelRequest(CHECKER_INSTRUCTIONS, [UserMessage(text)], [],
                           output=OutputFormat("goal_check", VERDICT_SCHEMA, True))
    try:
        reply = await call_model(client, request)
    except ModelError as exc:
        return False, f"the goal checker failed: {exc}", None
    try:
        verdict = parse_answer(reply.text, VERDICT_SCHEMA)
    except ValueError as exc:
        return False, f"the goal checker's answer is unusable: {exc}", reply
    return bool(verdict["met"]), str(verdict["reason"]).strip() or "(no reason given)", reply


def limit(run: GoalRun, passed: bool, *, changed: bool, budget: str | None) -> tuple[GoalEndReason, str] | None:
    """What ends the run after a checked turn, and how to say it; None: another turn. Counts the turn."""
    run.idle = 0 if changed else run.idle + 1
    turns = f"{run.attempts} turn{'s' if run.attempts != 1 else ''}"
    if passed:
        return GoalEndReason.PASSED, f"goal met after {turns}"
    if budget:
        return GoalEndReason.BUDGET, f"goal not met after {turns}: {budget}"
    if run.attempts >= run.max_turns:
        return GoalEndReason.MAX_TURNS, f"goal not met after {turns} (--max-turns {run.max_turns})"
    if run.idle >= NO_PROGRESS_TURNS:
        return GoalEndReason.NO_PROGRESS, (f"goal not met after {turns}: the last {run.idle} turns changed "
                                           "nothing")
    return None


def next_prompt(run: GoalRun, result: Check) -> str:
    """The user message of the next turn: what failed, in the check's own words."""
    if result.exit_code is None and run.until is not None and not result.passed and result.reason is None:
        head = f"The goal check `{run.until}` could not run:"
    elif result.reason is not None:
        head = f"The goal is not met yet ({run.goal}): {result.reason}"
    else:
        head = f"The goal check `{run.until}` still fails (exit code {result.exit_code}). Its output:"
    body = f"\n{result.output}" if result.output and result.reason is None else ""
    return f"{head}{body}\n\nKeep working until it passes (turn {run.attempts + 1} of at most {run.max_turns})."


def tail(text: str, limit: int = OUTPUT_TAIL) -> str:
    """The last `limit` characters, cut at a line start, marked when cut."""
    if len(text) <= limit:
        return text
    cut = text[-limit:]
    newline = cut.find("\n")
    if 0 <= newline < 200:
        cut = cut[newline + 1:]
    return f"[… {len(text) - len(cut)} earlier characters cut]\n{cut}"


def last_answer(items: Sequence[Item]) -> str:
    """The model's last message in the conversation ("" for none)."""
    return next((item.text for item in reversed(items) if isinstance(item, AssistantMessage)), "")


def checked_event(run: GoalRun, turn_id: str, result: Check) -> ev.GoalChecked:
    return ev.GoalChecked(turn_id, run.attempts, result.passed, result.output, run.max_turns, result.exit_code,
                          result.reason)
