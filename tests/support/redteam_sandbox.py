"""Shared pieces of the sandbox red-team modules (tests/redteam/test_rc*.py).

Every attack runs through a real session: a scripted mock model calls the real
`shell` tool, in the sandbox under test, and the attack is judged by its effect
on the host (a file changed, a secret read, a process alive). Each has a
control: the same payload with `sandbox=off`, showing it does work unconfined.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from auger.policy import effects
from auger.policy.sandbox import detect
from tests.support.harness import run_session
from tests.support.mock_openai import Reply, ToolCall

KINDS = ("bwrap", "landlock")


def require(kind: str):
    """The sandbox of that kind; a failure (not a skip) when it does not work here: CI has both."""
    if kind == "off":
        return None
    sandbox, why = detect(kind)
    if sandbox is None:
        pytest.fail(f"the {kind} sandbox is unavailable here ({why}); these tests need bubblewrap and Landlock")
    return sandbox


def shell(project: Path, server, kind: str, *calls, mode: str = "auto", approve_all: bool = True,
          overrides: tuple[str, ...] = (), **kw) -> list[str]:
    """Run shell calls (a command string, or an arguments dict) one after another in one session;
    returns the tool outputs the model read, in order."""
    require(kind)
    args = [c if isinstance(c, dict) else {"command": c} for c in calls]
    server.add(Reply(tool_calls=[ToolCall("shell", a) for a in args]), Reply(text="done"))
    settings = (f"sandbox={kind}", f"mode={mode}", f"approve_all={'true' if approve_all else 'false'}", *overrides)
    run_session(project, server, "go", overrides=settings, **kw)
    return [m["content"] for m in server.chat_requests[-1].body["messages"] if m["role"] == "tool"]


def force_read_only(monkeypatch) -> None:
    """Test hook: the classifier calls every command read-only (what a misclassification looks like)."""

    def wrong(command, root, cwd=None):
        return effects.CommandAnalysis(effects.READ_ONLY, (("true",),), (), ())

    monkeypatch.setattr(effects, "analyze_command", wrong)


def processes_with(marker: str) -> list[int]:
    """Host pids whose command line contains `marker`."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline:
            found.append(int(name))
    return found


def none_alive(marker: str, within: float = 3.0) -> bool:
    """True once no host process carries `marker` (processes get `within` seconds to die)."""
    deadline = time.monotonic() + within
    while processes_with(marker):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def kill_all(marker: str) -> None:
    """Clean up after a control run (unconfined processes do outlive the session)."""
    for pid in processes_with(marker):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def descendants(pid: int) -> set[int]:
    """Every process below `pid` (children, theirs, and so on), from /proc."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_bytes()
        except OSError:
            continue
        children.setdefault(int(stat[stat.rfind(b")") + 2:].split()[1]), []).append(int(name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def all_gone(pids: set[int], within: float = 3.0) -> set[int]:
    """The processes of `pids` still alive after `within` seconds (zombies count as gone)."""
    deadline = time.monotonic() + within
    while True:
        alive = set()
        for pid in pids:
            try:
                state = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            if state != b"Z":
                alive.add(pid)
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.05)
