"""A scripted model for interactive processes (exec_command / write_stdin) on the mock model servers.

Each step is a tool call and the text its output must show before the next step is sent; until then the
model polls the session (`write_stdin` with no input). So a test waits for what a process prints, never
for a fixed time, whatever the machine's load.

    server.add(*typist([(exec_call("python3 -q -i", tty=True), ">>> "),
                        (write_call("print(6*7)\\n"), "42")]))
"""

from __future__ import annotations

from typing import Any

from tests.support.mock_openai import Reply, ToolCall

POLL_MS = 1000
MAX_POLLS = 60


def exec_call(cmd: str, *, tty: bool = False, yield_ms: int = 500, **more: Any) -> ToolCall:
    return ToolCall("exec_command", {"cmd": cmd, "tty": tty, "yield_time_ms": yield_ms, **more})


def write_call(chars: str, *, session_id: int = 1, yield_ms: int = 500) -> ToolCall:
    return ToolCall("write_stdin", {"session_id": session_id, "chars": chars, "yield_time_ms": yield_ms})


def typist(steps: list[tuple[ToolCall, str]], *, session_id: int = 1, final: str = "done",
           then: list = ()) -> list:
    """Mock-server steps (callables) playing `steps`, then answering `final`, then (later turns) each of
    `then` (replies, or steps like these: another typist's); a step whose text never shows ends the turn with
    "gave up waiting for …" (the test's assertions then say what was missing)."""
    state = {"next": 0, "seen": "", "polls": 0}
    later = list(then)

    def step(body: dict) -> Reply:
        if state["next"] > len(steps):
            if not later:
                return Reply(text="(the typist's script is over)")
            after = later.pop(0)
            return after(body) if callable(after) else after
        last = _last_tool_output(body)
        if last is not None:
            state["seen"] += last
        sent = state["next"]
        if sent:
            expected = steps[sent - 1][1]
            if expected not in state["seen"]:
                state["polls"] += 1
                if state["polls"] > MAX_POLLS or "Process exited" in state["seen"] \
                        or "Error:" in (last or ""):
                    state["next"] = len(steps) + 1
                    return Reply(text=f"gave up waiting for {expected!r}")
                return Reply(tool_calls=[ToolCall("write_stdin", {"session_id": session_id, "chars": "",
                                                                  "yield_time_ms": POLL_MS})])
        if sent >= len(steps):
            state["next"] = len(steps) + 1
            return Reply(text=final)
        state["next"], state["seen"], state["polls"] = sent + 1, "", 0
        return Reply(tool_calls=[steps[sent][0]])

    return [step] * (len(steps) * (MAX_POLLS + 1) + 2 + len(later))


def _last_tool_output(body: dict) -> str | None:
    """The last tool output of a request, on the Chat Completions wire or the Responses wire."""
    messages = body.get("messages") or []
    if messages and messages[-1].get("role") == "tool":
        content = messages[-1].get("content")
        return content if isinstance(content, str) else str(content)
    items = body.get("input") or []
    if items and isinstance(items[-1], dict) and items[-1].get("type") == "function_call_output":
        return str(items[-1].get("output"))
    return None
