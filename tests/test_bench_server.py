"""The server benchmark's machinery, with 3 sessions and 6 clients, so it cannot rot."""

from __future__ import annotations

from pathlib import Path

from bench.bench_server import measure, mock_server, percentile, table


def test_three_sessions_streamed_to_six_clients_deliver_every_envelope_with_latencies(tmp_path: Path) -> None:
    with mock_server() as server:
        result = measure(3, 6, server.base_url, tmp_path, turns=2)
    assert result.complete == 6  # every client saw its session's two turns end, every envelope once, in order
    assert result.envelopes == len(result.from_commit_ms) == len(result.from_emission_ms) > 6 * 20
    assert 0 <= percentile(result.from_commit_ms, 50) <= percentile(result.from_commit_ms, 99)
    # an envelope is emitted before it is committed, and committed before a client reads it
    assert all(0 <= c <= e for c, e in zip(result.from_commit_ms, result.from_emission_ms, strict=True))
    assert result.rss_mb > 0 and result.peak_rss_mb >= result.rss_mb
    assert table([result, result]).splitlines()[1].split()[:5] == ["3", "6", "2", "2", "6"]
