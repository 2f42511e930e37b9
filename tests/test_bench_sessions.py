"""The many-sessions benchmark's machinery, with 5 sessions, so it cannot rot."""

from __future__ import annotations

import asyncio
from pathlib import Path

from bench.bench_sessions import STEPS, mock_server, make_project, run_sessions, table


def test_five_concurrent_sessions_each_run_three_tool_steps(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-bench")
    project = make_project(tmp_path)
    with mock_server() as server:
        result = asyncio.run(run_sessions(5, server.base_url, project))
        requests = server.chat_requests
    assert result.completed == 5 and result.tool_calls == 5 * len(STEPS)
    assert len(requests) == 5 * (len(STEPS) + 1)  # three tool steps and the answer, per session
    called = [m["tool_calls"][0]["function"]["name"] for r in requests for m in r.body["messages"][-2:-1]
              if m.get("tool_calls")]
    assert sorted(set(called)) == ["grep", "read_file", "shell"]
    assert 0 < result.baseline_mb <= result.peak_mb and result.wall_s > 0
    assert result.sandbox_procs >= 0
    shown = table([result])
    assert shown.splitlines()[1].split()[:3] == ["5", "5", "15"]


def test_a_sandbox_works_when_the_process_holds_over_a_thousand_descriptors(tmp_path: Path) -> None:
    """Hundreds of sessions in one process hold over 1023 descriptors; the supervisor inherits its
    socket under the same number, and select() cannot watch that (it exited at once: every shell
    command then failed with "the session sandbox is not running")."""
    import os
    import resource

    import pytest

    from auger.config import Config
    from auger.policy.confinement import confine
    from auger.tools.base import SessionToolState, ToolContext
    from auger.tools.shell import SHELL

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip(f"the descriptor limit ({hard}) is too low to hold 1100 descriptors")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    project = make_project(tmp_path)
    scratch = tmp_path / "scratch"

    async def run() -> tuple[bool, str]:
        home = tmp_path / "auger-home"
        dirs = {"config": home, "data": home, "cache": home / "cache"}
        confinement = await confine(Config(), project, scratch, (), print, dirs=dirs)
        if confinement is None:
            pytest.skip("no sandbox works on this machine")
        try:
            ctx = ToolContext(root=project, state=SessionToolState(scratch_dir=scratch), call_id="c", archive=None,
                              env=dict(os.environ), sandbox=confinement)
            result = await SHELL.handler({"command": "echo ok"}, ctx)
            return result.ok, result.output
        finally:
            await confinement.close()

    try:
        ok, output = asyncio.run(run())
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert ok and "ok" in output, output
