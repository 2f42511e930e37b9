"""Event stream benchmark: a chatty reply's message_delta events through a session's EventStream, stored in a
real SQLite file, read by one subscriber (what `auger exec --json` prints).

Two shapes of stream: as fast as the loop can emit (`burst` deltas per event-loop step): events per
second end to end (emit → stored → received); and paced like a model's reply (`rate` deltas per second,
the loop idle in between): the delay from emitting an event to a subscriber receiving it. Not a test:
nothing here is asserted.

    python bench/bench_stream.py [--events N] [--runs N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from auger.engine.session.stream import EventStream  # noqa: E402
from auger.protocol import events as ev  # noqa: E402
from auger.store.sqlite import SqliteStore  # noqa: E402


async def one_run(db: Path, events: int, burst: int, rate: float | None) -> tuple[float, list[float]]:
    """(events per second, per-event delays in ms) of one stream of `events` deltas, `burst` per loop step,
    or one every 1/`rate` seconds."""
    store = SqliteStore(db)
    try:
        stream = EventStream(f"bench-{burst}-{time.monotonic_ns()}", store)
        await stream.open()
        sent: dict[int, float] = {}
        delays: list[float] = []

        async def read() -> None:
            async for envelope in stream.subscribe():
                if envelope.seq in sent:
                    delays.append((time.perf_counter() - sent[envelope.seq]) * 1000)

        reader = asyncio.create_task(read())
        await asyncio.sleep(0)
        started = time.perf_counter()
        for n in range(events):
            stream.emit(ev.MessageDelta("turn", f"tok{n} "))
            sent[stream.seq] = time.perf_counter()
            if rate is not None:
                await asyncio.sleep(1 / rate)  # the next chunk arrives over the network
            elif (n + 1) % burst == 0:
                await asyncio.sleep(0)  # the next chunk arrives in a later loop step
        stream.emit(ev.ShutdownComplete())
        await reader
        return events / (time.perf_counter() - started), delays
    finally:
        await store.aclose()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=3000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    print(f"event stream benchmark ({args.runs} runs, median; {sys.platform}, {os.cpu_count()} cpus, "
          f"python {sys.version.split()[0]})")
    print(f"{'message_delta events':<38} {'events/s':>10} {'delay p50 ms':>13} {'delay p99 ms':>13}")
    shapes = [(f"{args.events}, {burst} per loop step", args.events, burst, None) for burst in (1, 32)]
    shapes += [(f"{rate * 2 // 5}, paced at {rate}/s", rate * 2 // 5, 1, float(rate)) for rate in (100, 1000)]
    with tempfile.TemporaryDirectory() as tmp:
        for label, events, burst, rate in shapes:
            rates, p50s, p99s = [], [], []
            for _ in range(args.runs):
                per_s, delays = asyncio.run(one_run(Path(tmp) / "s.db", events, burst, rate))
                delays.sort()
                rates.append(per_s)
                p50s.append(delays[len(delays) // 2])
                p99s.append(delays[int(len(delays) * 0.99)])
            print(f"{label:<38} {statistics.median(rates):>10.0f} {statistics.median(p50s):>13.3f} "
                  f"{statistics.median(p99s):>13.3f}")


if __name__ == "__main__":
    main()
