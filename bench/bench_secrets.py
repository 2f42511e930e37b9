"""What redacting secret values costs (auger/secrets).

Three measurements, each against a floor measured in the same run:

    per MB of tool output   `Redactor.redact` over 1 MB of text of three kinds — source code (auger's own),
                            a build log, and `env`-like lines with secrets in them — with ten known values,
                            against JSON-encoding the same text (what recording an output costs anyway)
    the turn loop           turns whose one call prints a 4 KB file, in-process against the mock model,
                            redaction on and off (`[secrets] redact = false`), alternating
    the first request       its body's size and the time from opening the session to the first request,
                            redaction on and off: the first request does not grow

Printed as tables. Not a test: nothing here is asserted.

    python bench/bench_secrets.py [--runs N] [--turns N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the tests' mock server and harness

from auger.protocol import events as ev  # noqa: E402
from auger.secrets.known import KnownSecret  # noqa: E402
from auger.secrets.numbering import Numbering  # noqa: E402
from auger.secrets.redact import Redactor  # noqa: E402
from auger.secrets.settings import DEFAULT_ENV_PATTERNS  # noqa: E402
from tests.support.harness import drive, open_session  # noqa: E402
from tests.support.mock_openai import MockChatServer, Reply, ToolCall  # noqa: E402

MB = 1 << 20
SRC = Path(__file__).resolve().parent.parent / "src" / "auger"


def texts() -> dict[str, str]:
    code = "".join(p.read_text() for p in sorted(SRC.rglob("*.py")))
    log = "".join(f"2026-01-0{n % 9 + 1} 12:{n % 60:02d}:00 INFO build step {n}: compiled module_{n}.o in "
                  f"{n % 97} ms (cache hit {n % 3 == 0}) sha={n * 2654435761 % 2**64:016x}\n" for n in range(20000))
    env = "".join(f"HOME=/home/u{n}\nPATH=/usr/bin:/bin\nAPP_{n}_TOKEN=tok-{n:06d}-Xy{n % 89}z\n"
                  f"GITHUB_TOKEN=ghp_{n:036d}\nLANG=C.UTF-8\n" for n in range(6000))
    return {kind: (text * (MB // len(text) + 1))[:MB] for kind, text in
            (("source code", code), ("build log", log), ("env with secrets", env))}


def known() -> list[KnownSecret]:
    return [KnownSecret(f"env-var-{n}", f"known-secret-value-{n:04d}-aZ9", f"$VAR_{n}") for n in range(10)]


def per_mb(runs: int) -> list[tuple[str, float, float, int]]:
    """(kind, redaction ms per MB, JSON-encoding ms per MB, values replaced)."""
    rows = []
    for kind, text in texts().items():
        redact_times, floor_times, found = [], [], 0
        for _ in range(runs):
            redactor = Redactor(known(), Numbering(b"k" * 32), DEFAULT_ENV_PATTERNS)  # nothing learned yet
            started = time.perf_counter()
            redaction = redactor.redact(text)
            redact_times.append(time.perf_counter() - started)
            found = redaction.count
            started = time.perf_counter()
            json.dumps(text)
            floor_times.append(time.perf_counter() - started)
        rows.append((kind, statistics.median(redact_times) * 1000, statistics.median(floor_times) * 1000, found))
    return rows


async def session_turns(project: Path, turns: int, redact: bool) -> tuple[list[float], int, float]:
    """(each turn's seconds, the first request's body size, seconds from opening to the first request)."""
    marks: dict[str, float] = {}

    def first(body: dict) -> Reply:
        marks.setdefault("first request", time.perf_counter())
        return Reply(tool_calls=[ToolCall("shell", {"command": "cat notes.txt"})])

    steps: list = [first, Reply(text="done")]
    for _ in range(turns - 1):
        steps += [Reply(tool_calls=[ToolCall("shell", {"command": "cat notes.txt"})]), Reply(text="done")]
    with tempfile.TemporaryDirectory() as tmp, MockChatServer(steps) as server:
        opened = time.perf_counter()
        session, store = await open_session(project, server, Path(tmp) / "sessions.db", "snapshots=false",
                                            "sandbox=off", "approve_all=true",
                                            tables={"secrets": {"redact": redact}})
        starts: list[float] = []
        times: list[float] = []

        def timed(_session, event) -> None:
            if isinstance(event, ev.TurnStarted):
                starts.append(time.perf_counter())
            elif isinstance(event, ev.TurnEnded):
                times.append(time.perf_counter() - starts[-1])

        try:
            await drive(session, *(f"turn {n}" for n in range(turns)), on_event=timed)
        finally:
            await store.aclose()
        size = len(json.dumps(server.chat_requests[0].body))
    return times, size, marks["first request"] - opened


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--turns", type=int, default=10)
    args = parser.parse_args()

    print("redaction per MB of tool output (median of", args.runs, "runs; floor: json.dumps of the same text)")
    print(f"{'text':<18} {'redact ms/MB':>13} {'floor ms/MB':>12} {'ratio':>7} {'replaced':>9}")
    for kind, redact, floor, found in per_mb(args.runs):
        print(f"{kind:<18} {redact:>13.1f} {floor:>12.1f} {redact / floor:>7.1f} {found:>9}")

    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / "project"
        project.mkdir()
        (project / "notes.txt").write_text(("release notes: fixed the cache, see ticket 1234 for details\n" * 70)[:4096])
        results: dict[bool, tuple[list[float], list[int], list[float]]] = {True: ([], [], []), False: ([], [], [])}
        for redact in (False, True):  # warm-up: the first session of a process pays for its imports
            asyncio.run(session_turns(project, 2, redact))
        for _ in range(args.runs):
            for redact in (False, True):
                times, size, first = asyncio.run(session_turns(project, args.turns, redact))
                results[redact][0].extend(times[1:])  # the first turn also opens things
                results[redact][1].append(size)
                results[redact][2].append(first)
    off, on = results[False], results[True]
    print()
    print(f"the turn loop: one call printing 4 KB per turn, {args.turns} turns x {args.runs} sessions each way")
    print(f"{'':<14} {'redaction off':>14} {'on':>10} {'ratio':>7}")
    turn_off, turn_on = statistics.median(off[0]) * 1000, statistics.median(on[0]) * 1000
    print(f"{'turn, ms':<14} {turn_off:>14.1f} {turn_on:>10.1f} {turn_on / turn_off:>7.2f}")
    first_off, first_on = statistics.median(off[2]) * 1000, statistics.median(on[2]) * 1000
    print(f"{'to 1st req, ms':<14} {first_off:>14.1f} {first_on:>10.1f} {first_on / first_off:>7.2f}")
    print(f"{'1st body, B':<14} {statistics.median(off[1]):>14.0f} {statistics.median(on[1]):>10.0f} "
          f"{statistics.median(on[1]) / statistics.median(off[1]):>7.2f}")


if __name__ == "__main__":
    main()
