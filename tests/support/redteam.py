"""Shared helpers for the red-team suite (tests/redteam/): attacks judged by their effect.

* `Swapper` races a directory against a symlink to somewhere else with renameat2(RENAME_EXCHANGE),
  the strongest form of the check-then-open race: at every instant the name is either the real
  directory or the link, never missing.
* `scripted_session` runs a real session whose mock model makes the given tool calls, and returns
  the run and everything the model was sent, so a test can check what reached the provider.
* `marker_in_requests` says whether a secret marker reached the model in any request.
* `exposed` says where planted secret values (as written, or base64'd) can be read: request bodies, the
  store's files, events.
"""

from __future__ import annotations

import asyncio
import ctypes
import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.support.harness import Run, run_session
from tests.support.mock_openai import MockChatServer, Reply, ToolCall

AT_FDCWD = -100
RENAME_EXCHANGE = 2

_libc = ctypes.CDLL(None, use_errno=True)


def exchange(a: Path, b: Path) -> None:
    """Atomically swap two directory entries (whatever they are)."""
    if _libc.renameat2(AT_FDCWD, os.fsencode(a), AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), str(a))


class Swapper:
    """While active, `path` (a real directory) flips between itself and a symlink to `target`.

    Use as a context manager; `swaps` counts the flips done, so a test can show the race ran.
    On exit the real directory is back at `path`.
    """

    def __init__(self, path: Path, target: Path) -> None:
        self.path = path
        self.link = path.with_name(path.name + ".swap-link")
        self.link.symlink_to(target, target_is_directory=True)
        self.swaps = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            exchange(self.path, self.link)
            self.swaps += 1

    def __enter__(self) -> Swapper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        if self.path.is_symlink():  # an odd number of flips: put the directory back
            exchange(self.path, self.link)
        self.link.unlink()


def scripted_session(project: Path, calls: list[ToolCall], *overrides: str, mode: str = "auto",
                     sandbox: str = "auto") -> tuple[Run, str]:
    """One user turn in which the mock model makes `calls` (one reply each), then says "done".

    Returns the run and the JSON of every request the model received (what left the machine)."""
    with MockChatServer() as server:
        server.add(*[Reply(tool_calls=[call]) for call in calls], Reply(text="done"))
        run = run_session(project, server, "go", overrides=(f"mode={mode}", f"sandbox={sandbox}", "approve_all=true",
                                                               *overrides))
        sent = "\n".join(json.dumps(r.body) for r in server.chat_requests)
    return run, sent


def tool_outputs(run: Run) -> list[str]:
    """The output of each tool call in the run, in order."""
    from auger.protocol import events as ev

    return [e.output for e in run.of(ev.ToolCallEnded)]


def files_under(path: Path) -> set[str]:
    """Every entry below `path`, relative, without following symlinks."""
    found: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(path):
        for name in dirnames + filenames:
            found.add(os.path.relpath(os.path.join(dirpath, name), path))
    return found


SANDBOXES = ("bwrap", "landlock")


@pytest.fixture(params=SANDBOXES)
def sandbox(request: pytest.FixtureRequest) -> str:
    """The sandbox a session-level attack runs under (config `sandbox = ...`); import into a module."""
    return request.param


@pytest.fixture(params=["openat2", "component-walk"])
def fs_mode(request: pytest.FixtureRequest):
    """Run a test with openat2, then with the per-component fallback forced (as on kernels < 5.6)."""
    from auger.policy import fs

    if request.param == "openat2" and not fs.openat2_available():
        print("openat2 is not available on this kernel; the openat2 case runs the component walk")
    fs.set_openat2(False if request.param == "component-walk" else None)
    yield request.param
    fs.set_openat2(None)


async def run_many(spec: Any, args_list: list[dict[str, Any]], ctx: Any) -> list[Any]:
    """Run the tool once per argument set, in one event loop (fast enough to race thousands of swaps)."""
    from auger.tools.base import ToolError

    results = []
    for args in args_list:
        try:
            results.append(await spec.handler(spec.validate(args), ctx))
        except ToolError as exc:
            results.append(exc)
    return results


def text_of(result: Any) -> str:
    """A tool result's output, or a ToolError's message."""
    return str(result) if isinstance(result, Exception) else result.output


def exposed(values: list[str], *, bodies: list[dict] | None = None, store_dir: Path | None = None,
            events: list | None = None) -> list[str]:
    """Where any of `values` — as written, or in base64 as `base64` prints it — can be read: in a model request
    body, the store's files (SQLite's database and its WAL, as bytes), or an event's JSON. One line per find."""
    import base64 as b64

    forms = {v: [v, b64.b64encode(v.encode()).decode().rstrip("=")[:-2]] for v in values}
    places: list[tuple[str, str]] = [(f"request {n}", json.dumps(b, ensure_ascii=False))
                                     for n, b in enumerate(bodies or [])]
    if store_dir is not None:
        for path in sorted(store_dir.glob("*.db*")):
            places.append((path.name, path.read_bytes().decode("latin-1")))
    places += [(f"event {e.TYPE}", json.dumps(e.to_json(), ensure_ascii=False)) for e in events or []]
    return [f"{value[:12]}… ({'base64' if form != value else 'as is'}) in {where}"
            for value, candidates in forms.items() for form in candidates for where, text in places if form in text]
