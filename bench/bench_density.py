"""Many idle sessions in one process: what they hold, in auger's process and in sandbox helpers.

N sessions are opened through SessionManager against the mock model server (sandbox on) and left
idle; then the memory of auger's process and of every process below it is read from /proc (RSS, and
PSS: shared pages split among the processes sharing them, so a sum over processes is what they really
take). A second pass runs one command in every session (the user's own `run_shell`, which starts its
sandbox) and reads the same with every sandbox running; then, past the sandbox idle timeout (short
here), once more.

Each N runs in a fresh process; the mock server stays in this one. With `--serve`, the same through
the real `auger serve` in its own process: sessions opened with `POST /api/sessions`, the command run
with a `run_shell` op, and the server's memory read with its helpers'. Not a test.

    python bench/bench_density.py [--sessions 100 1000] [--sandbox auto|bwrap|landlock] [--idle 2] [--serve]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_sessions import _descendants, make_project, mock_server  # noqa: E402

TARGET_TOTAL_MB_AT_1000 = 300.0  # auger + helpers, 1,000 idle sessions
SETTLE_S = 3.0  # after opening: the sessions' start-up snapshots (1 s after open) are done
LIVE_S = 3600.0  # the idle timeout while the commands run: no sandbox stops before the "live" sample


@dataclass
class Sample:
    """Memory of auger's process and of the processes below it, at one moment."""

    sessions: int
    phase: str  # "opened" | "ran one command, idle"
    auger_rss_mb: float
    auger_pss_mb: float
    helpers: int  # processes below auger's (sandboxes, supervisors, proxies' helpers)
    helpers_rss_mb: float
    helpers_pss_mb: float
    seconds: float  # to open the sessions, or to run the commands

    @property
    def total_mb(self) -> float:
        return self.auger_pss_mb + self.helpers_pss_mb


def _memory(pid: int | str) -> tuple[float, float]:
    """(RSS, PSS) in MB, from smaps_rollup."""
    rss = pss = 0.0
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Rss:"):
                    rss = int(line.split()[1]) / 1024
                elif line.startswith("Pss:"):
                    pss = int(line.split()[1]) / 1024
    except OSError:
        pass
    return rss, pss


def sample(n: int, phase: str, seconds: float, pid: int | None = None) -> Sample:
    """Memory of auger's process (this one, or `pid`) and of every process below it."""
    rss, pss = _memory(pid or "self")
    helpers = _descendants(pid or os.getpid())
    held = [_memory(p) for p in helpers]
    return Sample(n, phase, rss, pss, len(helpers), sum(r for r, _ in held), sum(p for _, p in held), seconds)


async def run(n: int, base_url: str, project: Path, sandbox: str, idle: float) -> list[Sample]:
    """Open N sessions, sample; run one command in each, wait past the idle timeout, sample; close."""
    from auger.config import home_dirs, load_config
    from auger.engine.session.sessions import SessionManager
    from auger.engine.workspace import Workspace
    from auger.models.registry import client_for
    from auger.protocol.events import ToolCallEnded, TurnEnded
    from auger.protocol.ops import RunShell, Shutdown
    from auger.store.sqlite import SqliteStore

    config = load_config(["generate_titles=false", f"sandbox={sandbox}", f"sandbox_idle_timeout={LIVE_S}",
                          "mode=auto", "approve_all=true"],
                         {"provider": "openai-compatible", "base_url": base_url, "model": "bench"})
    store = SqliteStore(home_dirs()["data"] / "sessions.db")
    manager = SessionManager(Workspace.open(project, config), store)
    started = time.perf_counter()
    sessions = []
    for _ in range(n):
        sessions.append(await manager.create(client_for(config)))
    opened = time.perf_counter() - started
    await asyncio.sleep(SETTLE_S)
    samples = [sample(n, "opened, idle", opened)]

    failed: Counter[str] = Counter()

    async def one_command(session) -> None:
        events = session.subscribe()
        session.submit(RunShell("echo ok"))
        async for envelope in events:
            if isinstance(envelope.event, ToolCallEnded) and not envelope.event.ok:
                failed[envelope.event.output.strip().splitlines()[-1][:160]] += 1
            if isinstance(envelope.event, TurnEnded):
                return

    started = time.perf_counter()
    await asyncio.gather(*(one_command(s) for s in sessions))
    ran = time.perf_counter() - started
    samples.append(sample(n, "ran a command, live", ran))
    for problem, times in failed.most_common(5):
        print(f"N={n}: {times} x {problem}", file=sys.stderr)
    running = sum(1 for s in sessions if s.confinement is not None and s.confinement.running)
    if running != n:
        print(f"N={n}: {n - running} sandboxes not running after their command", file=sys.stderr)
    for session in sessions:  # counted from now: every sandbox was still running for the sample above
        if session.confinement is not None:
            session.confinement.idle_timeout = idle
    await asyncio.sleep(idle + SETTLE_S)
    samples.append(sample(n, "ran a command, idle", ran))
    for session in sessions:
        session.submit(Shutdown())
    await asyncio.gather(*(s.wait_closed() for s in sessions))
    await store.aclose()
    return samples


def _child(n: int, base_url: str, project: Path, sandbox: str, idle: float) -> None:
    import auger.engine.session.sessions  # noqa: F401  (imported before anything is measured)

    print(json.dumps([asdict(s) for s in asyncio.run(run(n, base_url, project, sandbox, idle))]))


def measure(n: int, base_url: str, project: Path, home: Path, sandbox: str, idle: float) -> list[Sample]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AUGER_", "OPENAI_"))}
    env.update({"AUGER_HOME": str(home), "OPENAI_API_KEY": "sk-bench"})
    argv = [sys.executable, __file__, "--child", str(n), base_url, str(project), sandbox, str(idle)]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise SystemExit(f"N={n} failed:\n{done.stderr[-3000:]}")
    for line in done.stderr.splitlines():
        if line.startswith(f"N={n}:"):
            print(f"  {line}")
    return [Sample(**s) for s in json.loads(done.stdout.strip().splitlines()[-1])]


SERVED_IDLE_S = 60.0  # the served sandboxes' idle timeout: every one still runs when the commands have ended


def measure_served(n: int, base_url: str, project: Path, home: Path, sandbox: str, idle: float) -> list[Sample]:
    """The same three samples of a real `auger serve` holding N sessions (its sandbox idle timeout is
    SERVED_IDLE_S, so that the live sample sees every sandbox; `idle` is not used)."""
    from bench.bench_server import start_server

    proc, url = start_server(project, home, base_url, sandbox, mode="auto",
                             extra=("-c", f"sandbox_idle_timeout={SERVED_IDLE_S}"))
    try:
        return asyncio.run(_served(n, url, project, proc.pid))
    finally:
        proc.terminate()
        proc.wait(timeout=60)


async def _served(n: int, url: str, project: Path, pid: int) -> list[Sample]:
    import httpx

    from bench.bench_server import TOKEN

    at_once = asyncio.Semaphore(16)  # requests in flight: a client, not a flood

    async def call(method: str, path: str, **kw):
        async with at_once:
            response = await client.request(method, path, **kw)
        response.raise_for_status()
        return response.json() if response.content else None

    async def command(i: int, session_id: str) -> bool:
        await call("POST", f"/api/sessions/{session_id}/ops", json={
            "submission_id": f"cmd-{i}", "op": {"type": "run_shell", "command": "echo ok"}})
        deadline = time.perf_counter() + 600
        while time.perf_counter() < deadline:
            state = (await call("GET", f"/api/sessions/{session_id}"))["state"]
            if state["running_turn"] is None and state["last_seq"] > 2:
                return True
            await asyncio.sleep(0.2)
        return False

    async with httpx.AsyncClient(base_url=url, headers={"authorization": f"Bearer {TOKEN}"}, timeout=120) as client:
        started = time.perf_counter()
        ids = [created["id"] for created in await asyncio.gather(
            *(call("POST", "/api/sessions", json={"cwd": str(project)}) for _ in range(n)))]
        opened = time.perf_counter() - started
        await asyncio.sleep(SETTLE_S)
        samples = [sample(n, "opened, idle", opened, pid)]
        started = time.perf_counter()
        ended = await asyncio.gather(*(command(i, session_id) for i, session_id in enumerate(ids)))
        ran = time.perf_counter() - started
        samples.append(sample(n, "ran a command, live", ran, pid))
        if not all(ended):
            print(f"N={n}: {ended.count(False)} commands did not end", file=sys.stderr)
        await asyncio.sleep(SERVED_IDLE_S + SETTLE_S)
        samples.append(sample(n, "ran a command, idle", ran, pid))
    return samples


def table(samples: list[Sample]) -> str:
    rows = [f"{'sessions':>8}  {'state':<22} {'s':>6} {'auger RSS':>9} {'auger PSS':>9} {'helpers':>7} "
            f"{'their RSS':>9} {'their PSS':>9} {'total PSS':>9} {'per session':>11}"]
    for s in samples:
        rows.append(f"{s.sessions:>8}  {s.phase:<22} {s.seconds:>6.1f} {s.auger_rss_mb:>9.1f} {s.auger_pss_mb:>9.1f} "
                    f"{s.helpers:>7} {s.helpers_rss_mb:>9.1f} {s.helpers_pss_mb:>9.1f} {s.total_mb:>9.1f} "
                    f"{s.total_mb / s.sessions:>11.3f}")
    rows.append("(MB; 'total PSS': auger's process and every helper; 's': to open them all, or to run the commands)")
    idle = [s for s in samples if s.sessions == 1000 and s.phase.endswith("idle")]
    if idle:
        worst = max(idle, key=lambda s: s.total_mb)
        verdict = "met" if worst.total_mb <= TARGET_TOTAL_MB_AT_1000 and not any(s.helpers for s in idle) \
            else "NOT met"
        rows.append(f"target: 1,000 idle sessions in {TARGET_TOTAL_MB_AT_1000:.0f} MB, no helper process: {verdict} "
                    f"({worst.total_mb:.1f} MB, {max(s.helpers for s in idle)} helpers)")
    for s in samples:
        if s.phase.endswith("live"):
            rows.append(f"{s.sessions} live sandboxes: {s.helpers_pss_mb / s.sessions:.2f} MB of helpers (PSS) each "
                        f"(target 3 MB)")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--sandbox", default="auto", choices=("auto", "bwrap", "landlock"))
    parser.add_argument("--idle", type=float, default=2.0, help="sandbox_idle_timeout for the run (seconds)")
    parser.add_argument("--serve", action="store_true", help="hold the sessions in a real `auger serve`")
    parser.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        n, url, project, sandbox, idle = args.child
        _child(int(n), url, Path(project), sandbox, float(idle))
        return
    samples: list[Sample] = []
    with tempfile.TemporaryDirectory() as tmp, mock_server() as server:
        project = make_project(Path(tmp))
        for n in args.sessions:
            home = Path(tmp) / f"home-{n}"
            home.mkdir()
            how = measure_served if args.serve else measure
            samples += how(n, server.base_url, project, home, args.sandbox, args.idle)
    print(table(samples))


if __name__ == "__main__":
    main()
