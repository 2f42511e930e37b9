"""child_watch: subprocesses of any event loop are reaped through pidfds, with their exit status."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import pytest

from auger import child_watch

T = TypeVar("T")


def _run_with_watcher(coro_factory: Callable[[], Coroutine[Any, Any, T]]) -> tuple[bool, T]:
    """Run `coro_factory()` in a fresh process-wide policy that has the pidfd watcher, then restore."""
    policy = asyncio.get_event_loop_policy()
    asyncio.set_event_loop_policy(asyncio.DefaultEventLoopPolicy())
    try:
        installed = child_watch.install()
        return installed, asyncio.run(coro_factory())
    finally:
        asyncio.set_event_loop_policy(policy)


async def _exit_codes() -> list[int | None]:
    async def one(code: int) -> int | None:
        proc = await asyncio.create_subprocess_exec(sys.executable, "-c", f"import sys; sys.exit({code})")
        return await proc.wait()

    return list(await asyncio.gather(*(one(code) for code in (0, 3, 7, 0))))


def test_children_are_reaped_with_their_exit_codes() -> None:
    installed, codes = _run_with_watcher(_exit_codes)
    assert codes == [0, 3, 7, 0]
    if sys.version_info < (3, 12):
        assert installed, "Linux here gives pidfds: the watcher should be in place"


def test_a_killed_child_reports_the_signal_and_output_is_read_whole() -> None:
    async def go() -> tuple[int | None, bytes]:
        proc = await asyncio.create_subprocess_exec("sleep", "30")
        proc.kill()
        killed = await proc.wait()
        out = await asyncio.create_subprocess_exec(sys.executable, "-c", "print('x' * 300000)",
                                                   stdout=asyncio.subprocess.PIPE)
        data, _ = await out.communicate()
        return killed, data

    _, (killed, data) = _run_with_watcher(go)
    assert killed == -9
    assert data.strip() == b"x" * 300000


def test_loops_one_after_another_and_in_other_threads_share_the_watcher() -> None:
    results: list[list[int | None]] = []

    def in_thread() -> None:
        results.append(asyncio.run(_exit_codes()))

    async def go() -> list[int | None]:
        thread = threading.Thread(target=in_thread)
        thread.start()
        own = await _exit_codes()
        await asyncio.to_thread(thread.join)
        return own

    _, own = _run_with_watcher(go)
    _, again = _run_with_watcher(_exit_codes)  # a second asyncio.run, after the first loop closed
    assert own == again == [0, 3, 7, 0] and results == [[0, 3, 7, 0]]


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="Python 3.12 and later watch through pidfds themselves")
def test_the_command_line_installs_it_and_importing_auger_does_not() -> None:
    probe = "import asyncio; print(type(asyncio.get_event_loop_policy()._watcher).__name__)"
    host = subprocess.run([sys.executable, "-c", f"import auger, auger.events; {probe}"], capture_output=True,
                          text=True, check=True)
    assert host.stdout.strip() == "NoneType"
    command = f"from auger.frontends.cli import main\nmain(['models'])\n{probe}"  # a command that runs
    cli = subprocess.run([sys.executable, "-c", command], capture_output=True, text=True, check=True)
    assert cli.stdout.strip().splitlines()[-1] == "PidfdWatcher"
