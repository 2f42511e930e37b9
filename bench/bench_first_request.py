"""What `auger exec` costs from spawn to its first model request, against a floor measured in the same run.

The floor is the least any Python program can do to send that request: a bare interpreter that imports
asyncio and httpx and posts one chat request to the same loopback mock server. It imports httpx as auger
does, without httpx's own command line (click, pygments, rich: more than httpx itself costs, and never used);
a plain `import httpx` is measured too, for reference. Each round runs the floor, `auger exec` with a fresh
AUGER_HOME (nothing created yet: the store is made and migrated), the floor again, `auger exec` with a warm
home (the one the previous rounds used) and the plain floor, so a busy moment of a shared machine costs each
alike. The sandbox is left as configured by default (on).

Measured per run:

    wall      spawn → the request's arrival at the server
    cpu@req   CPU time the process (all its threads) had used when the request arrived (/proc/PID/task/*/schedstat)
    cpu       CPU time of the whole run, user + sys, its children included (os.wait4)

Printed as a table of medians, with the wall-time ratio to the floor, and what one more run of each home
had done by its first request (tests/support/start_path.py): the modules imported, the dataclasses made and
the regular expressions compiled. Not a test: nothing here is asserted.

    python bench/bench_first_request.py [--runs N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the tests' mock server

from tests.support.mock_openai import MockChatServer, Reply  # noqa: E402
from tests.support.start_path import FirstRequest, at_first_request  # noqa: E402

_FLOOR = """
import asyncio, sys
if sys.argv[2] == "lean":
    sys.modules["httpx._main"] = None  # as auger/models/__init__.py does: not httpx's command line (click, rich)
import httpx

async def main():
    async with httpx.AsyncClient() as client:
        body = {"model": "bench", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
        async with client.stream("POST", sys.argv[1] + "/chat/completions", json=body,
                                 headers={"authorization": "Bearer sk-bench"}) as reply:
            async for _ in reply.aiter_bytes():
                pass

asyncio.run(main())
"""


def auger_cmd() -> list[str]:
    exe = shutil.which("auger", path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    return [exe] if exe else [sys.executable, "-m", "auger"]


def precompile() -> None:
    """Measure auger as installed: an editable checkout under PYTHONDONTWRITEBYTECODE would otherwise compile
    every module on every run."""
    import compileall

    import auger

    compileall.compile_dir(os.path.dirname(auger.__file__), quiet=1)


def thread_cpu(pid: int) -> float:
    """Seconds of CPU all threads of `pid` have used so far (0.0 if it is gone)."""
    total = 0
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                    total += int(f.read().split()[0])
            except (FileNotFoundError, ProcessLookupError):
                continue
    except FileNotFoundError:
        return 0.0
    return total / 1e9


class Run:
    """One child process, timed from spawn to the first request the server sees."""

    def __init__(self) -> None:
        self.pid = 0
        self.arrived: float | None = None
        self.cpu_at_request = 0.0

    def step(self, body: dict) -> Reply:
        if self.arrived is None:
            self.arrived = time.perf_counter()
            self.cpu_at_request = thread_cpu(self.pid)
        return Reply(text="done")

    def measure(self, cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, float]:
        """(wall to the request, CPU at the request, CPU of the whole run)."""
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.pid = proc.pid
        _, status, usage = os.wait4(proc.pid, 0)
        code = os.waitstatus_to_exitcode(status)
        stderr = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
        if code != 0 or self.arrived is None:
            raise SystemExit(f"{cmd[:3]} failed (exit {code}, request sent: {self.arrived is not None}): {stderr}")
        return self.arrived - started, self.cpu_at_request, usage.ru_utime + usage.ru_stime


def one(make_cmd: Callable[[str], list[str]], env: dict[str, str], cwd: Path) -> tuple[float, float, float]:
    run = Run()
    with MockChatServer([run.step]) as server:
        return run.measure(make_cmd(server.base_url), env, cwd)


def bench(runs: int) -> tuple[dict[str, list[tuple[float, float, float]]], dict[str, FirstRequest]]:
    precompile()
    results: dict[str, list[tuple[float, float, float]]] = {
        "floor": [], "auger exec, fresh home": [], "auger exec, warm home": [], "floor, plain import httpx": []}
    cmd = auger_cmd()
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        project, warm = tmp_path / "project", tmp_path / "warm-home"
        project.mkdir()
        warm.mkdir()
        subprocess.run(["git", "init", "-q", str(project)], check=True)
        (project / "README.md").write_text("# a project\n")
        base = {k: v for k, v in os.environ.items() if not k.startswith(("AUGER_", "OPENAI_"))}
        base["OPENAI_API_KEY"] = "sk-bench"

        def floor(url: str) -> list[str]:
            return [sys.executable, "-c", _FLOOR, url, "lean"]

        def plain_floor(url: str) -> list[str]:
            return [sys.executable, "-c", _FLOOR, url, "plain"]

        def auger(url: str) -> list[str]:
            return [*cmd, "exec", "--base-url", url, "-m", "bench", "hi"]

        one(auger, {**base, "AUGER_HOME": str(warm)}, project)  # the warm home's first use
        for n in range(runs):
            fresh = tmp_path / f"fresh-{n}"
            results["floor"].append(one(floor, base, project))
            results["auger exec, fresh home"].append(one(auger, {**base, "AUGER_HOME": str(fresh)}, project))
            results["floor"].append(one(floor, base, project))
            results["auger exec, warm home"].append(one(auger, {**base, "AUGER_HOME": str(warm)}, project))
            results["floor, plain import httpx"].append(one(plain_floor, base, project))
        counts = {}
        for name, home in (("auger exec, fresh home", tmp_path / "fresh-counted"), ("auger exec, warm home", warm)):
            with MockChatServer([Reply(text="done")]) as server:
                counts[name] = at_first_request(["exec", "--base-url", server.base_url, "-m", "bench", "hi"],
                                                env={**base, "AUGER_HOME": str(home)}, cwd=project)
    return results, counts


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    results, counts = bench(args.runs)
    floor_wall = statistics.median(r[0] for r in results["floor"])
    print(f"auger exec: spawn -> first model request ({args.runs} runs each, floor twice as often; medians; "
          f"{sys.platform}, {os.cpu_count()} cpus, python {sys.version.split()[0]})")
    print(f"{'':<24} {'wall ms':>8} {'ratio':>6} {'cpu@req ms':>11} {'cpu ms':>8}")
    for name, rows in results.items():
        wall, cpu_req, cpu = (statistics.median(r[i] for r in rows) for i in range(3))
        print(f"{name:<24} {wall * 1000:>8.0f} {wall / floor_wall:>6.2f} {cpu_req * 1000:>11.0f} {cpu * 1000:>8.0f}")
    print(f"\n{'by the first request':<24} {'modules':>8} {'dataclasses':>12} {'regexes':>8}")
    for name, done in counts.items():
        print(f"{name:<24} {len(done.modules):>8} {done.dataclasses:>12} {done.regexes:>8}")


if __name__ == "__main__":
    main()
