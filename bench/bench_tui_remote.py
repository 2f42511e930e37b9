"""The terminal UI on a session of its own process and on one in `auger serve` (`auger --connect URL`), on
loopback, measured through tmux as a user would see it: from Enter on a prompt to the first character of the
streamed answer on the screen. The model is the mock server; the reply's first words come at once, so what
is measured is auger's own path (the op posted, the turn started, the delta stored and streamed, drawn).

    python bench/bench_tui_remote.py [--runs N]

Prints the median and p90 of each, the difference of the medians and their ratio.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.mock_openai import MockChatServer, Reply  # noqa: E402
from tests.support.serve import TOKEN, start_process, stop_process  # noqa: E402
from tests.tui.terminal import Terminal  # noqa: E402

MARK = "Zebra"


def poll(term: Terminal, predicate, timeout: float = 30.0) -> float:
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if predicate(term.screen()):
            return time.monotonic()
        time.sleep(0.002)
    raise SystemExit(f"timed out; the pane shows:\n{term.screen()}")


def enter_to_first_character(term: Terminal, mock: MockChatServer, runs: int) -> list[float]:
    """Send `runs` prompts in one session; for each, Enter → the reply's first characters on screen."""
    poll(term, lambda s: "auger · " in s and "\n›" in s)
    times = []
    for n in range(runs):
        mock.add(Reply(text=f"{MARK}{n} answers " + "word " * 40, chunk_chars=4))
        prompt = f"question number {n}"
        term.type(prompt)
        poll(term, lambda s, p=prompt: f"› {p}" in s)
        sent = time.monotonic()
        term.send("Enter")
        times.append(poll(term, lambda s, n=n: f"{MARK}{n}" in s) - sent)
        poll(term, lambda s: "esc to interrupt" not in s)
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    runs = parser.parse_args().runs
    with MockChatServer() as mock, tempfile.TemporaryDirectory() as tmp:
        home, project = Path(tmp, "home"), Path(tmp, "project")
        home.mkdir()
        project.mkdir()
        flags = ["--base-url", mock.base_url, "-m", "mock-model", "-c", "generate_titles=false", "--db",
                 str(Path(tmp, "local.db"))]
        term = Terminal(project, home, flags, width=120, height=40)
        try:
            local = enter_to_first_character(term, mock, runs)
        finally:
            term.close()
        proc, url, _ = start_process(project, home, mock, Path(tmp, "served.db"), "--mode", "auto",
                                     "-c", "generate_titles=false")
        try:
            term = Terminal(project, home, ["--connect", url], width=120, height=40, env={"AUGER_SERVER_TOKEN": TOKEN})
            try:
                remote = enter_to_first_character(term, mock, runs)
            finally:
                term.close()
        finally:
            stop_process(proc)

    def row(name: str, values: list[float]) -> str:
        ms = sorted(v * 1000 for v in values)
        return f"{name:<44} {statistics.median(ms):>9.0f} {ms[int(0.9 * (len(ms) - 1))]:>9.0f} {len(ms):>6}"

    print(f"{'Enter to the first streamed character':<44} {'median ms':>9} {'p90 ms':>9} {'n':>6}")
    print(row("local session", local))
    print(row("session in auger serve (--connect, loopback)", remote))
    difference = (statistics.median(remote) - statistics.median(local)) * 1000
    ratio = statistics.median(remote) / statistics.median(local)
    print(f"remote − local: {difference:+.0f} ms (median); remote / local: {ratio:.2f}")


if __name__ == "__main__":
    main()
