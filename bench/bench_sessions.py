"""Many sessions in one process: N concurrent sessions against the mock server, each doing three tool
steps (read_file, shell `echo`, grep) and a final answer. Prints wall time, peak RSS, RSS per session,
and the sandbox processes beside ours (their memory is not in our RSS, so it is shown on its own).

Each N runs in a fresh process (peak RSS is a high-water mark); the mock server stays in this one, so
its request log is not counted as ours. Not a test: tests/test_bench_sessions.py runs the machinery.

    python bench/bench_sessions.py [--sessions 10 100 500] [--sandbox auto|off] [--trace]
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
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.mock_openai import MockChatServer, Reply, ToolCall  # noqa: E402

TARGET_MB_AT_100 = 150.0
STEPS = (
    ToolCall("read_file", {"path": "README.md"}),
    ToolCall("shell", {"command": "echo ok"}),
    ToolCall("grep", {"pattern": "hello"}),
)


def reply_for(body: dict[str, Any]) -> Reply:
    """The next step of a session, from its own request: as many steps as it has tool outputs. Any
    number of sessions can share one server in any interleaving."""
    done = sum(1 for m in body.get("messages", []) if m.get("role") == "tool")
    return Reply(tool_calls=[STEPS[done]]) if done < len(STEPS) else Reply(text="done")


def mock_server() -> MockChatServer:
    """A server answering every session (the one step is re-appended after each request)."""
    return MockChatServer([reply_for], loop=True)


def make_project(root: Path) -> Path:
    project = root / "project"
    (project / "src").mkdir(parents=True)
    (project / "README.md").write_text("# bench\nhello from the readme\n")
    for i in range(20):
        (project / "src" / f"m{i}.py").write_text(f"def f{i}():\n    return 'hello {i}'\n" * 10)
    return project


@dataclass
class Result:
    sessions: int
    completed: int
    tool_calls: int
    wall_s: float
    cpu_s: float  # our CPU time (user + system, all threads) while the sessions ran: less noisy than wall
    baseline_mb: float  # our RSS once the engine is imported and the store open, before any session
    peak_mb: float  # our peak RSS while the sessions ran
    sandbox_procs: int  # processes beside ours (sandboxes, supervisors) with all N sessions open
    sandbox_mb: float  # their proportional set size (PSS) then
    top_allocations: list[str] = field(default_factory=list)
    problems: dict[str, int] = field(default_factory=dict)  # failed calls and warnings, by message

    @property
    def per_session_mb(self) -> float:
        return (self.peak_mb - self.baseline_mb) / max(self.sessions, 1)


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _rss_mb(pid: int | str = "self") -> float:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _pss_mb(pid: int) -> float:
    """A process's proportional set size: shared pages (the interpreter, libraries) split among the
    processes sharing them, so a sum over processes is what they really take."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _peak_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def run_sessions(n: int, base_url: str, project: Path, *, sandbox: str = "auto",
                       trace: bool = False) -> Result:
    """N sessions of one workspace in one store, all at once; each must end complete after its three
    tool calls. Needs AUGER_HOME pointing at a scratch directory."""
    from auger.config import home_dirs, load_config
    from auger.engine.session.sessions import SessionManager, run_prompt
    from auger.engine.workspace import Workspace
    from auger.models.registry import client_for
    from auger.protocol.events import ToolCallEnded, WarningEvent
    from auger.store.sqlite import SqliteStore

    config = load_config(["generate_titles=false", f"sandbox={sandbox}"],
                         {"provider": "openai-compatible", "base_url": base_url, "model": "bench"})
    store = SqliteStore(home_dirs()["data"] / "sessions.db")
    workspace = Workspace.open(project, config)
    manager = SessionManager(workspace, store)
    calls = 0
    problems: Counter[str] = Counter()

    def count(session: Any, event: Any) -> None:
        nonlocal calls
        if isinstance(event, ToolCallEnded):
            calls += event.ok
            if not event.ok:
                problems[f"{event.name} failed: {event.output.strip().splitlines()[-1][:120]}"] += 1
        elif isinstance(event, WarningEvent):
            problems[f"warning: {event.message[:120]}"] += 1

    opened = asyncio.Barrier(n)  # all N are open before any starts: N really at once
    top: list[str] = []

    beside: list[tuple[int, float]] = []  # (processes, their PSS) with all N open

    async def one() -> bool:
        session = await manager.create(client_for(config))
        if await opened.wait() == 0:
            pids = _descendants(os.getpid())
            beside.append((len(pids), sum(_pss_mb(p) for p in pids)))
            if trace:
                top.extend(_top_allocations())
        ended = await run_prompt(session, "read the readme, run echo, grep for hello", on_event=count)
        await session.wait_closed()
        return ended[-1].reason == "complete"

    if trace:
        import tracemalloc

        tracemalloc.start(10)
    baseline = _rss_mb()
    started, cpu_started = time.perf_counter(), time.process_time()
    try:
        outcomes = await asyncio.gather(*(one() for _ in range(n)))
    finally:
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started
        if trace:
            import tracemalloc

            tracemalloc.stop()
        await store.aclose()
    return Result(n, sum(outcomes), calls, wall, cpu, baseline, _peak_mb(), *beside[0], top,
                  dict(problems.most_common(10)))


def _top_allocations() -> list[str]:
    """Where the memory held by N open sessions was allocated, by file (tracemalloc)."""
    import gc
    import tracemalloc

    gc.collect()
    return [str(stat) for stat in tracemalloc.take_snapshot().statistics("filename")[:15]]


def _child(n: int, base_url: str, project: Path, sandbox: str, trace: bool) -> None:
    """One N in this fresh process: prints its Result as JSON."""
    import auger.engine.session.sessions  # noqa: F401  (imported before the baseline is read)

    result = asyncio.run(run_sessions(n, base_url, project, sandbox=sandbox, trace=trace))
    print(json.dumps(asdict(result)))


def measure(n: int, base_url: str, project: Path, home: Path, sandbox: str, trace: bool) -> Result:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AUGER_", "OPENAI_"))}
    env.update({"AUGER_HOME": str(home), "OPENAI_API_KEY": "sk-bench"})
    argv = [sys.executable, __file__, "--child", str(n), base_url, str(project), sandbox]
    done = subprocess.run(argv + (["--trace"] if trace else []), env=env, capture_output=True, text=True,
                          timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"N={n} failed:\n{done.stderr[-3000:]}")
    data = json.loads(done.stdout.strip().splitlines()[-1])
    return Result(**data)


def table(results: list[Result]) -> str:
    rows = [f"{'sessions':>8} {'done':>5} {'calls':>6} {'wall s':>7} {'cpu s':>6} {'base MB':>8} {'peak MB':>8} "
            f"{'MB/session':>10} {'sandbox procs':>13} {'their PSS MB':>12}"]
    for r in results:
        rows.append(f"{r.sessions:>8} {r.completed:>5} {r.tool_calls:>6} {r.wall_s:>7.2f} {r.cpu_s:>6.2f} "
                    f"{r.baseline_mb:>8.1f} {r.peak_mb:>8.1f} {r.per_session_mb:>10.3f} {r.sandbox_procs:>13} "
                    f"{r.sandbox_mb:>12.1f}")
    at_100 = next((r for r in results if r.sessions == 100), None)
    if at_100 is not None:
        verdict = "met" if at_100.peak_mb <= TARGET_MB_AT_100 else "NOT met"
        rows.append(f"target: 100 sessions in under {TARGET_MB_AT_100:.0f} MB (our RSS): {verdict} "
                    f"({at_100.peak_mb:.1f} MB)")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, nargs="+", default=[10, 100, 500])
    parser.add_argument("--sandbox", default="auto", choices=("auto", "bwrap", "landlock", "off"))
    parser.add_argument("--trace", action="store_true", help="print the top allocations (tracemalloc; slower)")
    parser.add_argument("--child", nargs=4, metavar=("N", "URL", "PROJECT", "SANDBOX"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        n, url, project, sandbox = args.child
        _child(int(n), url, Path(project), sandbox, args.trace)
        return
    results = []
    with tempfile.TemporaryDirectory() as tmp, mock_server() as server:
        project = make_project(Path(tmp))
        for n in args.sessions:
            home = Path(tmp) / f"home-{len(results)}-{n}"  # an N may be given twice: each run starts afresh
            home.mkdir()
            results.append(measure(n, server.base_url, project, home, args.sandbox, args.trace))
            for line in results[-1].top_allocations:
                print(f"  {line}")
            for problem, times in results[-1].problems.items():
                print(f"  N={n}: {times} x {problem}")
    print(table(results))


if __name__ == "__main__":
    main()
