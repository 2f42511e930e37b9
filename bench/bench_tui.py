"""Terminal UI benchmark, measured through tmux as a user would see it:

1. start-up: from launching `auger` to the prompt drawn (ready for typing), and to the session open
   (its header printed), against the mock model server;
2. keypress-to-echo: from `tmux send-keys` of one character to that character on the screen;
3. the import cost of the UI libraries (prompt_toolkit, rich) in a fresh interpreter.

    python bench/bench_tui.py [--runs N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.mock_openai import MockChatServer, Reply  # noqa: E402
from tests.tui.terminal import Terminal  # noqa: E402


def poll(term: Terminal, predicate, timeout: float = 30.0) -> float:
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if predicate(term.screen()):
            return time.monotonic()
        time.sleep(0.005)
    raise SystemExit(f"timed out; the pane shows:\n{term.screen()}")


def startup(base_url: str, home: Path, project: Path) -> tuple[float, float, list[float]]:
    term = Terminal(project, home, ["--base-url", base_url, "-m", "mock-model"], width=100, height=30)
    try:
        drawn = poll(term, lambda s: any(line.startswith(("› ", "… ", "›", "…")) for line in s.splitlines()))
        opened = poll(term, lambda s: "auger · " in s and "\n›" in s)
        echoes = []
        for i, ch in enumerate("abcdefghij"):
            sent = time.monotonic()
            term.type(ch)
            typed = "abcdefghij"[: i + 1]
            echoes.append(poll(term, lambda s, typed=typed: f"› {typed}" in s) - sent)
        return drawn - term.started, opened - term.started, echoes
    finally:
        term.close()


def import_time(module: str) -> float:
    code = f"import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
    return float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    runs = parser.parse_args().runs
    drawn, opened, echoes = [], [], []
    with MockChatServer([Reply(text="unused")] * 0) as server, tempfile.TemporaryDirectory() as tmp:
        home, project = Path(tmp, "home"), Path(tmp, "project")
        home.mkdir()
        project.mkdir()
        for _ in range(runs):
            d, o, e = startup(server.base_url, home, project)
            drawn.append(d)
            opened.append(o)
            echoes.extend(e)
    imports = {m: statistics.median(import_time(m) for _ in range(3))
               for m in ("prompt_toolkit.shortcuts", "rich.markdown", "textual.app")
               if subprocess.run([sys.executable, "-c", f"import {m}"], capture_output=True).returncode == 0}

    def row(name: str, values: list[float]) -> str:
        ms = sorted(v * 1000 for v in values)
        return f"{name:<34} {statistics.median(ms):>9.0f} {ms[int(0.9 * (len(ms) - 1))]:>9.0f} {len(ms):>6}"

    print(f"{'measure':<34} {'median ms':>9} {'p90 ms':>9} {'n':>6}")
    print(row("start-up to prompt drawn", drawn))
    print(row("start-up to session open", opened))
    print(row("keypress to echo", echoes))
    for module, seconds in imports.items():
        print(f"{'import ' + module:<34} {seconds * 1000:>9.0f} {'':>9} {3:>6}")


if __name__ == "__main__":
    main()
