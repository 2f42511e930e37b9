"""The web UI benchmark's machinery on a small session, so it cannot rot."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import browser


def test_a_long_sessions_first_paint_and_older_page_are_measured_in_the_browser(tmp_path: Path) -> None:
    reason = browser.missing()
    if reason:
        pytest.skip(reason)
    from bench.bench_webui import measure, table

    result = measure(30, 1, tmp_path)  # 120 items: the newest 80 drawn, 20 replies
    assert result.shown == 20 and result.dom_nodes > 100
    assert len(result.first_paint_ms) == 1 and 0 < result.first_paint_ms[0] < 60_000
    assert 0 < result.older_page_ms[0] < 60_000
    assert table([result]).splitlines()[1].split()[:3] == ["30", "120", "20"]
