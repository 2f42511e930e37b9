"""The user's own shell command (`run_shell` op, `!cmd` in the terminal UI): it takes the model's path
(policy, sandbox, snapshot), runs as a turn without a model call, is interruptible, is undoable, and
the model sees it in the next request."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from auger.protocol import events as ev
from auger.protocol.ops import Interrupt, RunShell, Undo, UserTurn
from tests.support.harness import Follow, follow_session, is_context
from tests.support.mock_openai import Reply


def test_run_shell_is_a_turn_without_a_model_call_and_the_model_sees_it(project: Path, server) -> None:
    server.add(Reply(text="noted"))

    async def steps(session, follow: Follow) -> None:
        session.submit(RunShell("echo from-the-user > made.txt; cat made.txt"))
        await follow.until(ev.TurnEnded)
        assert server.chat_requests == [], "a user's shell command never calls the model"
        session.submit(UserTurn("what did I run?"))
        await follow.until(ev.TurnEnded)

    events = follow_session(project, server, steps, "mode=auto")
    kinds = [type(e) for e in events]
    first_end = kinds.index(ev.TurnEnded)
    assert ev.TurnStarted in kinds[:first_end] and ev.ToolCallStarted in kinds[:first_end]
    ended = [e for e in events[:first_end] if isinstance(e, ev.ToolCallEnded)]
    assert ended and ended[0].ok and "from-the-user" in ended[0].output
    assert events[first_end].reason == "complete"
    assert (project / "made.txt").read_text() == "from-the-user\n"
    sent = [m for m in server.chat_requests[0].body["messages"] if m["role"] == "user" and not is_context(m["content"])]
    assert "I ran this shell command myself" in sent[0]["content"] and "from-the-user" in sent[0]["content"]


def test_run_shell_follows_policy_is_interruptible_and_undoable(project: Path, server) -> None:
    (project / "keep.txt").write_text("precious\n")
    took: list[float] = []

    async def steps(session, follow: Follow) -> None:
        session.submit(RunShell("rm keep.txt"))
        await follow.until(ev.TurnEnded)
        assert not (project / "keep.txt").exists()
        session.submit(Undo())
        await follow.until(ev.TurnUndone)
        session.submit(RunShell("sleep 30"))
        await follow.until(ev.ToolCallStarted)
        await asyncio.sleep(0.3)
        started = time.monotonic()
        session.submit(Interrupt())
        await follow.until(ev.TurnEnded)
        took.append(time.monotonic() - started)

    events = follow_session(project, server, steps, "mode=auto")
    assert (project / "keep.txt").read_text() == "precious\n", "undo restores what the user's command removed"
    ends = [e for e in events if isinstance(e, ev.TurnEnded)]
    assert ends[-1].reason == "cancelled" and took[0] < 2.0


def test_run_shell_is_refused_headless_when_policy_asks(project: Path, server) -> None:
    async def steps(session, follow: Follow) -> None:
        session.submit(RunShell("touch nope.txt"))
        await follow.until(ev.TurnEnded)

    events = follow_session(project, server, steps, "mode=plan")
    ended = [e for e in events if isinstance(e, ev.ToolCallEnded)]
    assert ended and not ended[0].ok
    assert not (project / "nope.txt").exists()
