"""Reads that start while the reply still streams: what a reply with several reads waits for after its end.

A mock server streams a reply (a sentence, then five read_file calls of a large file) at a slow model's
pace, then answers the follow-up. Measured in-process, each way several times, alternating:

    before   the same reads marked as tools that never start early (ToolSpec.starts_early off): they
             run after the whole reply, as every call did before
    after    auger as it is: each read starts as soon as its arguments are complete

and printed: from the reply's last event to the next request (the reads the turn still waits for), and
the whole turn. Not a test: nothing here is asserted.

    python bench/bench_stream_tools.py [--runs N] [--pace SECONDS] [--megabytes N]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the tests' mock server and harness

from auger.tools.toolset import StaticToolset, builtin_toolset  # noqa: E402
from tests.support.harness import drive, open_session  # noqa: E402
from tests.support.mock_openai import MockChatServer, Reply, ToolCall  # noqa: E402

READS = 5
TEXT = "Let me read the five logs to see where the run failed, then I will compare them."


def reads_reply() -> Reply:
    return Reply(text=TEXT, tool_calls=[ToolCall("read_file", {"path": f"log{n}.txt"}) for n in range(READS)],
                 chunk_chars=12)


async def one_turn(project: Path, pace: float, early: bool) -> tuple[float, float, float]:
    """(seconds from the reply's last event to the next request, of the whole turn, of the reply's stream)."""
    marks: dict[str, float] = {}

    def follow_up(body: dict) -> Reply:
        marks["next request"] = time.perf_counter()
        return Reply(text="done")

    def paced(event: bytes) -> None:
        if "next request" not in marks:  # only the reply with the reads is slow
            marks.setdefault("first event", time.perf_counter())
            time.sleep(pace)
            marks["last event"] = time.perf_counter()

    tools = builtin_toolset()
    if not early:
        tools = StaticToolset([dataclasses.replace(spec, starts_early=False) for spec in tools.list_tools()])
    with tempfile.TemporaryDirectory() as tmp, MockChatServer([reads_reply(), follow_up]) as server:
        server.pace = paced
        session, store = await open_session(project, server, Path(tmp) / "sessions.db", "snapshots=false",
                                            "sandbox=off", tools=tools)
        try:
            started = time.perf_counter()
            run = await drive(session, "why did the run fail?")
            turn = time.perf_counter() - started
        finally:
            await store.aclose()
    assert run.ended.reason == "complete" and len(run.events) > 0
    return marks["next request"] - marks["last event"], turn, marks["last event"] - marks["first event"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--pace", type=float, default=0.01, help="seconds between the reply's streamed events")
    parser.add_argument("--megabytes", type=int, default=20, help="size of each file read")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / "project"
        project.mkdir()
        line = "2026-01-01T00:00:00 step ok: " + "x" * 70 + "\n"
        for n in range(READS):
            (project / f"log{n}.txt").write_text(line * (args.megabytes * 1_000_000 // len(line)))
        os.environ.setdefault("AUGER_HOME", str(Path(tmp) / "home"))
        results: dict[str, list[tuple[float, float, float]]] = {"before": [], "after": []}
        for _ in range(args.runs):
            for label in results:
                results[label].append(asyncio.run(one_turn(project, args.pace, early=label == "after")))
    streamed = statistics.median(r[2] for rows in results.values() for r in rows)
    print(f"{READS} reads of a {args.megabytes} MB file in one reply streamed over {streamed:.2f} s "
          f"({args.pace * 1000:.0f} ms per event); {args.runs} runs each, median; {os.cpu_count()} cpus")
    print(f"{'':8} {'reply end -> next request':>26} {'whole turn':>12}")
    for label, rows in results.items():
        wait = statistics.median(r[0] for r in rows)
        turn = statistics.median(r[1] for r in rows)
        print(f"{label:8} {wait:>25.3f}s {turn:>11.3f}s")


if __name__ == "__main__":
    main()
