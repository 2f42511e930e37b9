"""The shell tool for real: process groups, live output, summaries, timeouts, background jobs."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from auger.tools.base import SessionToolState, ToolContext, ToolError
from auger.tools.shell import SHELL, end_processes
from tests.support.harness import dies_soon, process_alive


class Archive:
    async def get_output(self, call_id):
        return None

    async def list_outputs(self):
        return []


def make_ctx(root: Path, lines: list | None = None) -> ToolContext:
    return ToolContext(root=root.resolve(), state=SessionToolState(scratch_dir=root.parent / "scratch"),
                       call_id="c1", archive=Archive(),
                       emit_output=(lambda s, t: lines.append((s, t))) if lines is not None else (lambda s, t: None))


def shell(root: Path, lines: list | None = None, **args):
    ctx = make_ctx(root, lines)
    return asyncio.run(SHELL.handler(SHELL.validate(args), ctx))


def test_summary_format_and_live_lines(project):
    lines = []
    result = shell(project, lines, command="for i in $(seq 1 30); do echo out$i; done; echo bad >&2; exit 3")
    first = result.output.splitlines()[0]
    assert first == "Exit code: 3 | stdout: 30 lines | stderr: 1 lines"
    assert "out30" in result.output and "out11" in result.output and "out10\n" not in result.output
    assert "--- stderr ---\nbad" in result.output
    assert "recall with call_id='c1'" in result.output  # stdout was cut, so the model is told where the rest is
    assert "out1\n" in result.full_output
    assert not result.ok
    streamed = "".join(t for s, t in lines if s == "stdout")
    assert streamed.splitlines() == [f"out{i}" for i in range(1, 31)]
    assert ("stderr", "bad\n") in lines


def test_stderr_keeps_last_fifty_lines(project):
    result = shell(project, command="for i in $(seq 1 80); do echo e$i >&2; done")
    assert "stderr: 80 lines" in result.output
    assert "(last 50 of 80 lines)" in result.output
    assert "e31\n" in result.output and "e30\n" not in result.output


def test_huge_output_is_capped_in_storage_and_summarised(project):
    result = shell(project, command="yes 0123456789 | head -n 500000")
    assert "stdout: 500000 lines" in result.output
    assert len(result.output) < 2_000
    assert len(result.full_output) <= 200_000 + 2_000
    assert "bytes not kept" in result.full_output


def test_long_lines_are_cut_for_the_model(project):
    result = shell(project, command="python3 -c \"print('x' * 5000)\"")
    assert "chars cut]" in result.output
    assert len(result.output) < 1_000


def test_timeout_kills_the_whole_group(project):
    pidfile = project / "pid"
    started = time.monotonic()
    result = shell(project, command=f"sleep 60 & echo $! > {pidfile}; wait", timeout=1)
    assert time.monotonic() - started < 4
    assert "timed out after 1s" in result.output
    assert not result.ok
    assert dies_soon(int(pidfile.read_text()))


def test_timeout_is_capped_at_300(project):
    from auger.tools import shell as mod

    assert mod.MAX_TIMEOUT == 300
    assert "max 300s" in SHELL.description


def test_orphan_holding_the_pipe_does_not_hang_the_call(project):
    pidfile = project / "pid"
    started = time.monotonic()
    result = shell(project, command=f"(sleep 60; echo late) & echo $! > {pidfile}; echo quick")
    assert time.monotonic() - started < 3
    assert "Exit code: 0" in result.output and "quick" in result.output
    assert dies_soon(int(pidfile.read_text()))


def test_workdir_must_stay_inside_the_root(project):
    (project / "sub").mkdir()
    assert shell(project, command="pwd", workdir="sub").output.rstrip().endswith(str(project.resolve() / "sub"))
    for bad in ("..", "/tmp", f"../{project.name}-evil"):
        with pytest.raises(ToolError, match="outside the project root"):
            shell(project, command="pwd", workdir=bad)


def test_background_process_is_tracked_and_stopped_with_the_session(project):
    ctx = make_ctx(project)

    async def main():
        result = await SHELL.handler(SHELL.validate({"command": "echo started; sleep 60", "background": True}), ctx)
        pid = result.metadata["pid"]
        assert f"pid {pid}" in result.output
        await asyncio.sleep(0.2)
        assert process_alive(pid)
        log = Path(result.metadata["log"]).read_text()
        assert "started" in log
        await end_processes(ctx.state)
        return pid

    pid = asyncio.run(main())
    assert dies_soon(pid)


def test_commands_get_a_non_interactive_environment(project):
    result = shell(project, command="echo $PAGER $GIT_PAGER; read x < /dev/stdin; echo rc=$?")
    assert "cat cat" in result.output
    assert "rc=1" in result.output  # stdin is closed: a prompt cannot hang the agent

