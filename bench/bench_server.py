"""`auger serve` under load on loopback: S concurrent sessions, each followed by C/S SSE clients, against the
mock model (a streamed reply after two read-only tool steps). Prints the event latency — from the moment the
server emitted an envelope (its `time`) to the moment a client read it — at p50/p99/max, and the server
process's RSS (now and peak), and checks that every client got every envelope of its session once, in order.

The server is the real command in its own process (so its memory is its own); the mock model and the clients
share this one. Not a test: tests/test_bench_server.py runs the machinery small.

    python bench/bench_server.py [--sessions 50] [--clients 100] [--sandbox off|auto]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.mock_openai import MockChatServer, Reply, ToolCall  # noqa: E402

TOKEN = "bench-token-0123456789abcdef"
STEPS = (ToolCall("read_file", {"path": "README.md"}), ToolCall("grep", {"pattern": "hello"}))
ANSWER = "The readme says hello, and so do the twenty modules under src. " * 6


def reply_for(body: dict[str, Any]) -> Reply:
    """A session's next step from its own request, so any number of sessions share the server."""
    done = sum(1 for m in body.get("messages", []) if m.get("role") == "tool")
    return Reply(tool_calls=[STEPS[done]]) if done < len(STEPS) else Reply(text=ANSWER, chunk_chars=12)


def mock_server() -> MockChatServer:
    return MockChatServer([reply_for], loop=True)


def make_project(root: Path) -> Path:
    project = root / "project"
    (project / "src").mkdir(parents=True)
    (project / "README.md").write_text("# bench\nhello from the readme\n")
    for i in range(20):
        (project / "src" / f"m{i}.py").write_text(f"def f{i}():\n    return 'hello {i}'\n")
    return project


@dataclass
class Result:
    sessions: int
    clients: int
    envelopes: int  # delivered, over all clients
    complete: int  # clients that saw their session's turn end, every envelope once and in order
    wall_s: float
    latencies_ms: list[float] = field(default_factory=list, repr=False)
    rss_mb: float = 0.0
    peak_rss_mb: float = 0.0

    def percentile(self, p: float) -> float:
        if not self.latencies_ms:
            return float("nan")
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def start_server(project: Path, home: Path, base_url: str, sandbox: str, *, mode: str = "safe",
                 extra: tuple[str, ...] = ()) -> tuple[subprocess.Popen, str]:
    """The real `auger serve` on a free loopback port, in its own process; (the process, its base URL)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AUGER_", "OPENAI_"))}
    env.update({"AUGER_HOME": str(home), "OPENAI_API_KEY": "sk-bench", "AUGER_SERVER_TOKEN": TOKEN})
    proc = subprocess.Popen([sys.executable, "-m", "auger", "serve", "--port", "0", "--mode", mode,
                             "--base-url", base_url, "--model", "bench", "-c", "generate_titles=false",
                             "-c", f"sandbox={sandbox}", *extra], cwd=project, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    first = proc.stdout.readline()
    found = re.search(r"listening on (http://\S+)/", first)
    if found is None:
        proc.kill()
        raise SystemExit(f"auger serve did not start: {first!r}")
    return proc, found.group(1)


def memory_mb(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of a process, in MB."""
    values = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                values[line.split(":")[0]] = int(line.split()[1]) / 1024
    return values.get("VmRSS", 0.0), values.get("VmHWM", 0.0)


async def follow(client: Any, session_id: str, after: int, ready: asyncio.Event,
                 latencies: list[float]) -> tuple[int, bool]:
    """One SSE client, from the session's state when it was created (as a page that drew it would): every
    envelope after that until its turn ends; (how many, all once and in order)."""
    seqs: list[int] = []
    async with client.stream("GET", f"/api/sessions/{session_id}/events", params={"after_seq": after}) as response:
        event: dict[str, str] = {}
        async for line in response.aiter_lines():
            if line:
                key, _, value = line.partition(": ")
                event[key] = value
                continue
            if "data" in event and "id" in event:
                received = time.time()
                data = json.loads(event["data"])
                latencies.append((received - data["time"]) * 1000)
                seqs.append(data["seq"])
                if data["type"] == "turn_ended":
                    return len(seqs), seqs == list(range(after + 1, after + 1 + len(seqs)))
            elif event.get("event") == "state":
                ready.set()
            event = {}
    return len(seqs), False


async def drive(url: str, project: Path, sessions: int, clients: int) -> tuple[int, int, list[float], float]:
    import httpx

    limits = httpx.Limits(max_connections=clients + sessions + 10)
    async with httpx.AsyncClient(base_url=url, headers={"authorization": f"Bearer {TOKEN}"}, timeout=300,
                                 limits=limits) as client:
        ids, last = [], []
        for _ in range(sessions):
            created = await client.post("/api/sessions", json={"cwd": str(project)})
            created.raise_for_status()
            ids.append(created.json()["id"])
            last.append(created.json()["state"]["last_seq"])
        latencies: list[float] = []
        readies = [asyncio.Event() for _ in range(clients)]
        followers = [asyncio.create_task(follow(client, ids[i % sessions], last[i % sessions], readies[i], latencies))
                     for i in range(clients)]
        await asyncio.gather(*(r.wait() for r in readies))  # everyone is listening before any turn starts
        started = time.perf_counter()
        for n, session_id in enumerate(ids):
            posted = await client.post(f"/api/sessions/{session_id}/ops", json={
                "submission_id": f"bench-{n}", "op": {"type": "user_turn", "text": "read the readme, grep hello"}})
            posted.raise_for_status()
        outcomes = await asyncio.gather(*followers)
        wall = time.perf_counter() - started
    return sum(n for n, _ in outcomes), sum(ok for _, ok in outcomes), latencies, wall


def measure(sessions: int, clients: int, base_url: str, root: Path, sandbox: str = "off") -> Result:
    home = root / f"home-{sessions}-{clients}"
    home.mkdir()
    project = make_project(root / f"p-{sessions}-{clients}")
    proc, url = start_server(project, home, base_url, sandbox)
    try:
        delivered, complete, latencies, wall = asyncio.run(drive(url, project, sessions, clients))
        rss, peak = memory_mb(proc.pid)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
    return Result(sessions, clients, delivered, complete, wall, latencies, rss, peak)


def table(results: list[Result]) -> str:
    rows = [f"{'sessions':>8} {'clients':>7} {'complete':>8} {'envelopes':>9} {'wall s':>7} {'p50 ms':>7} "
            f"{'p99 ms':>7} {'max ms':>7} {'RSS MB':>7} {'peak MB':>7}"]
    for r in results:
        rows.append(f"{r.sessions:>8} {r.clients:>7} {r.complete:>8} {r.envelopes:>9} {r.wall_s:>7.2f} "
                    f"{r.percentile(50):>7.1f} {r.percentile(99):>7.1f} "
                    f"{max(r.latencies_ms, default=float('nan')):>7.1f} {r.rss_mb:>7.1f} {r.peak_rss_mb:>7.1f}")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--sandbox", default="off", choices=("auto", "bwrap", "landlock", "off"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, mock_server() as server:
        result = measure(args.sessions, args.clients, server.base_url, Path(tmp), args.sandbox)
    print(table([result]))
    if result.latencies_ms:
        print(f"mean {statistics.mean(result.latencies_ms):.1f} ms over {len(result.latencies_ms)} deliveries; "
              f"sandbox={args.sandbox}")


if __name__ == "__main__":
    main()
