"""The server benchmark's machinery, with 3 sessions and 6 clients, so it cannot rot."""

from __future__ import annotations

from pathlib import Path

from bench.bench_server import measure, mock_server, table


def test_three_sessions_streamed_to_six_clients_deliver_every_envelope_with_latencies(tmp_path: Path) -> None:
    with mock_server() as server:
        result = measure(3, 6, server.base_url, tmp_path)
    assert result.complete == 6  # every client saw its session's turn end, every envelope once, in order
    assert result.envelopes == len(result.latencies_ms) > 6 * 10
    assert 0 <= result.percentile(50) <= result.percentile(99)
    assert result.rss_mb > 0 and result.peak_rss_mb >= result.rss_mb
    assert table([result]).splitlines()[1].split()[:3] == ["3", "6", "6"]
