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
