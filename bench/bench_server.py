"""`auger serve` under load on loopback: S concurrent sessions, each followed by C/S SSE clients, against the
mock model (a streamed reply after two read-only tool steps). Prints the event latency at p50/p99/max — from
the envelope's commit (its row stored) to the moment a client read it, and from its emission (its `time`) —
and the server process's RSS (now and peak), and checks that every client got every envelope of its
session once, in order.

The commit time comes from the server itself: the bench starts it with `AUGER_TRACE_COMMITS` naming a file,
the session's stream appends `SESSION FIRST LAST TIME` to it for each batch as its commit reaches the event
loop (before any subscriber is offered it), and the bench reads the file once the server has exited. That
is the simplest honest way: the server keeps its own process (so its RSS is its own, and nothing of the
bench runs on its loop), the wire protocol is unchanged, both clocks are this machine's, and the trace costs
one buffered line per batch. What it leaves out is the hop from the store's writer thread to the loop: that
belongs to the store, and is inside the "from emission" figures.

One session followed by one client takes `--turns` turns, one after the other, so its figures are not
those of the one batch that holds most of a turn's deltas (nor only of a server that has not yet made the
records and loaded the modules a turn needs); the S × C run takes one turn in each session.

The machine may be shared, so the configurations run interleaved, `--rounds` times, and the table shows the
median of each figure over the rounds.

opencode (`opencode serve`, npm opencode-ai) is not put beside it. It could be driven against the same mock
model (a session by `POST /session`, a prompt, its `GET /event` stream), but what this bench reports is
latency from the commit, and opencode neither says in its events when it stored one nor offers a trace
of it; the only figure both could share is from the mock model's chunk to the client, which also times
each one's model client and stream parser, and the mock does not stamp its chunks.

The server is the real command in its own process, the mock model in another, and the clients have this
one to themselves. Each client reads its stream straight from an asyncio stream (`sse_lines`): a hundred
clients driven through an HTTP library's streaming machinery took half a core of the machine's two, and
their own delay was half of what was measured. Not a test: tests/test_bench_server.py runs the machinery small.

    python bench/bench_server.py [--sessions 50] [--clients 100] [--turns 5] [--rounds 3] [--sandbox off|auto]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
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
from types import SimpleNamespace
from typing import Any, AsyncIterator, Iterator

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.mock_openai import MockChatServer, Reply, ToolCall  # noqa: E402

TOKEN = "bench-token-0123456789abcdef"
STEPS = (ToolCall("read_file", {"path": "README.md"}), ToolCall("grep", {"pattern": "hello"}))
ANSWER = "The readme says hello, and so do the twenty modules under src. " * 6


def reply_for(body: dict[str, Any]) -> Reply:
    """A session's next step from its own request (two tool steps, then the answer, in every turn), so any
    number of sessions share the server."""
    messages = body.get("messages", [])
    user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    done = sum(1 for m in messages[user + 1:] if m.get("role") == "tool")
    return Reply(tool_calls=[STEPS[done]]) if done < len(STEPS) else Reply(text=ANSWER, chunk_chars=12)


@contextlib.contextmanager
def mock_server() -> Iterator[SimpleNamespace]:
    """The mock model in a process of its own (its `base_url`): its threads stream replies at full speed,
    and in this process they would hold the interpreter while a client has an event to read."""
    context = multiprocessing.get_context("spawn")
    ours, theirs = context.Pipe()
    process = context.Process(target=_serve_mock, args=(theirs,), daemon=True)
    process.start()
    try:
        yield SimpleNamespace(base_url=ours.recv())
    finally:
        ours.close()  # its recv() ends: it stops serving
        process.join(10)
        if process.is_alive():
            process.kill()


def _serve_mock(conn: Any) -> None:
    with MockChatServer([reply_for], loop=True) as server:
        conn.send(server.base_url)
        try:
            conn.recv()
        except EOFError:
            pass


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
    turns: int  # per session, one after the other
    envelopes: int  # delivered, over all clients
    complete: int  # clients that saw their session's turn end, every envelope once and in order
    wall_s: float
    from_commit_ms: list[float] = field(default_factory=list, repr=False)
    from_emission_ms: list[float] = field(default_factory=list, repr=False)
    rss_mb: float = 0.0
    peak_rss_mb: float = 0.0


def percentile(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def start_server(project: Path, home: Path, base_url: str, sandbox: str, *, mode: str = "safe",
                 extra: tuple[str, ...] = (), trace: Path | None = None) -> tuple[subprocess.Popen, str]:
    """The real `auger serve` on a free loopback port, in its own process; (the process, its base URL).
    With `trace`, the server appends each committed batch of events to that file (see above)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AUGER_", "OPENAI_"))}
    env.update({"AUGER_HOME": str(home), "OPENAI_API_KEY": "sk-bench", "AUGER_SERVER_TOKEN": TOKEN})
    if trace is not None:
        env["AUGER_TRACE_COMMITS"] = str(trace)
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


Receipt = tuple[str, int, float, float]  # (session, seq, when a client read it, its emission time)


def commit_times(trace: Path) -> dict[tuple[str, int], float]:
    """(session, seq) -> when its batch's commit reached the server's loop, from the server's trace."""
    times = {}
    for line in trace.read_text().splitlines():
        session_id, first, last, when = line.split()
        for seq in range(int(first), int(last) + 1):
            times[session_id, seq] = float(when)
    return times


async def sse_lines(url: str, path: str) -> AsyncIterator[bytes]:
    """The lines of one SSE stream, read with nothing between the socket and the parser but asyncio's stream:
    a hundred clients in one process must not be what the latency measures (an HTTP library's per-chunk
    machinery costs a hundred times what reading a line does). HTTP/1.1, the body chunked as the server sends
    it; raises on anything else."""
    host, _, port = url.removeprefix("http://").partition(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nhost: {host}:{port}\r\nauthorization: Bearer {TOKEN}\r\n"
                     "accept: text/event-stream\r\n\r\n".encode())
        status = await reader.readline()
        if not status.startswith(b"HTTP/1.1 200"):
            raise RuntimeError(f"GET {path}: {status!r}")
        headers = {}
        while (line := await reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode().partition(":")
            headers[name.strip().lower()] = value.strip().lower()
        if headers.get("transfer-encoding") != "chunked":
            raise RuntimeError(f"GET {path}: not a chunked body ({headers})")
        pending = b""
        while True:
            size = int((await reader.readline()).split(b";")[0], 16)
            if size == 0:
                return
            pending += await reader.readexactly(size)
            await reader.readexactly(2)  # the chunk's CRLF
            *lines, pending = pending.split(b"\n")
            for line in lines:
                yield line
    finally:
        writer.close()


async def follow(url: str, session_id: str, after: int, ready: asyncio.Event, ended: list[asyncio.Event],
                 receipts: list[Receipt]) -> tuple[int, bool]:
    """One SSE client, from the session's state when it was created (as a page that drew it would): every
    envelope after that until its last turn ends, setting `ended[k]` when turn k ends; (how many, all once
    and in order)."""
    seqs: list[int] = []
    event: dict[bytes, bytes] = {}
    async for line in sse_lines(url, f"/api/sessions/{session_id}/events?after_seq={after}"):
        if line:
            key, _, value = line.partition(b": ")
            event[key] = value
            continue
        if b"data" in event and b"id" in event:
            received = time.time()
            data = json.loads(event[b"data"])
            receipts.append((session_id, data["seq"], received, data["time"]))
            seqs.append(data["seq"])
            if data["type"] == "turn_ended":
                waiting = [e for e in ended if not e.is_set()]
                waiting[0].set()
                if len(waiting) == 1:
                    return len(seqs), seqs == list(range(after + 1, after + 1 + len(seqs)))
        elif event.get(b"event") == b"state":
            ready.set()
        event = {}
    return len(seqs), False


async def drive(url: str, project: Path, sessions: int, clients: int,
                turns: int) -> tuple[int, int, list[Receipt], float]:
    import httpx

    limits = httpx.Limits(max_connections=sessions + 10)
    async with httpx.AsyncClient(base_url=url, headers={"authorization": f"Bearer {TOKEN}"}, timeout=300,
                                 limits=limits) as client:
        ids, last = [], []
        for _ in range(sessions):
            created = await client.post("/api/sessions", json={"cwd": str(project)})
            created.raise_for_status()
            ids.append(created.json()["id"])
            last.append(created.json()["state"]["last_seq"])
        receipts: list[Receipt] = []
        readies = [asyncio.Event() for _ in range(clients)]
        ended = [[asyncio.Event() for _ in range(turns)] for _ in range(clients)]
        followers = [asyncio.create_task(follow(url, ids[i % sessions], last[i % sessions], readies[i], ended[i],
                                                receipts)) for i in range(clients)]
        await asyncio.gather(*(r.wait() for r in readies))  # everyone is listening before any turn starts

        async def converse(n: int) -> None:
            """The session's turns, each asked once the last one ended (as its first client saw)."""
            for turn in range(turns):
                posted = await client.post(f"/api/sessions/{ids[n]}/ops", json={
                    "submission_id": f"bench-{n}-{turn}",
                    "op": {"type": "user_turn", "text": "read the readme, grep hello"}})
                posted.raise_for_status()
                await ended[n][turn].wait()

        started = time.perf_counter()
        await asyncio.gather(*(converse(n) for n in range(sessions)))
        outcomes = await asyncio.gather(*followers)
        wall = time.perf_counter() - started
    return sum(n for n, _ in outcomes), sum(ok for _, ok in outcomes), receipts, wall


def measure(sessions: int, clients: int, base_url: str, root: Path, sandbox: str = "off", turns: int = 1) -> Result:
    run = root / f"run-{sessions}-{clients}-{time.monotonic_ns()}"
    home = run / "home"
    home.mkdir(parents=True)
    project = make_project(run)
    trace = run / "commits.trace"
    proc, url = start_server(project, home, base_url, sandbox, trace=trace)
    try:
        delivered, complete, receipts, wall = asyncio.run(drive(url, project, sessions, clients, turns))
        rss, peak = memory_mb(proc.pid)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
    committed = commit_times(trace)
    return Result(sessions, clients, turns, delivered, complete, wall,
                  [(received - committed[s, seq]) * 1000 for s, seq, received, _ in receipts],
                  [(received - emitted) * 1000 for _, _, received, emitted in receipts], rss, peak)


COLUMNS = (("commit p50", 8), ("p99", 6), ("max", 6), ("emit p50", 8), ("p99", 6), ("max", 6), ("RSS MB", 6),
           ("peak MB", 7), ("wall s", 6))


def figures(r: Result) -> list[float]:
    """One run's figures, in the order of COLUMNS."""
    return [percentile(r.from_commit_ms, 50), percentile(r.from_commit_ms, 99), max(r.from_commit_ms, default=0),
            percentile(r.from_emission_ms, 50), percentile(r.from_emission_ms, 99),
            max(r.from_emission_ms, default=0), r.rss_mb, r.peak_rss_mb, r.wall_s]


def table(results: list[Result]) -> str:
    """One row per configuration (sessions × clients): each figure is its median over that
    configuration's runs; `complete` and `envelopes` are the worst run's."""
    rows = [f"{'sessions':>8} {'clients':>7} {'turns':>5} {'runs':>4} {'complete':>8} {'envelopes':>9} "
            + " ".join(f"{name:>{width}}" for name, width in COLUMNS)]
    configs = dict.fromkeys((r.sessions, r.clients, r.turns) for r in results)
    for sessions, clients, turns in configs:
        runs = [r for r in results if (r.sessions, r.clients, r.turns) == (sessions, clients, turns)]
        medians = [statistics.median(column) for column in zip(*(figures(r) for r in runs), strict=True)]
        rows.append(f"{sessions:>8} {clients:>7} {turns:>5} {len(runs):>4} {min(r.complete for r in runs):>8} "
                    f"{min(r.envelopes for r in runs):>9} "
                    + " ".join(f"{value:>{width}.1f}" for value, (_, width) in zip(medians, COLUMNS, strict=True)))
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--turns", type=int, default=5, help="turns of the one session followed by one client")
    parser.add_argument("--sandbox", default="off", choices=("auto", "bwrap", "landlock", "off"))
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as tmp, mock_server() as server:
        for _ in range(args.rounds):  # interleaved, so a busy spell of the machine touches both alike
            for sessions, clients, turns in ((1, 1, args.turns), (args.sessions, args.clients, 1)):
                results.append(measure(sessions, clients, server.base_url, Path(tmp), args.sandbox, turns))
    print(table(results))
    print(f"milliseconds from commit / from emission to a client's read; medians of {args.rounds} interleaved "
          f"rounds; sandbox={args.sandbox}")


if __name__ == "__main__":
    main()
