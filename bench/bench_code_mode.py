"""Code mode against direct tool calls: one 40-file chore, three ways, on the mock model server.

The chore: read 40 small source files, count their lines and the TODO lines in each, and report. The model
is scripted (tests/support/mock_openai.py), so only what auger sends and how often is measured:

    sequential   one read_file call per reply (a model that takes one step at a time): 41 round trips
    parallel     all 40 read_file calls in one reply: 2 round trips, every file's text in the next prompt
    run_code     one program calling read_file 40 times, printing a 40-line summary: 2 round trips

Printed per way: model round trips, the prompt tokens of all requests together (the mock's estimate, 4
bytes a token, as it reports usage), the largest request and the wall time. Every session has the same
catalog (code_mode = true), in the real sandbox. Not a test: nothing here is asserted.

    python bench/bench_code_mode.py [--files N] [--lines N]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the tests' mock server and harness

from tests.support.harness import drive, open_session  # noqa: E402
from tests.support.mock_openai import MockChatServer, Reply, ToolCall  # noqa: E402

ANSWER = "Counted: see the table above."
PROGRAM = """
rows = []
for i in range({files}):
    text = read_file(f"src/mod{{i:02}}.py")
    lines = [line for line in text.splitlines() if line.strip()]
    rows.append((i, len(lines), sum("TODO" in line for line in lines)))
for i, n, todo in rows:
    print(f"src/mod{{i:02}}.py: {{n}} lines, {{todo}} TODO")
print("total:", sum(n for _, n, _ in rows), "lines,", sum(t for _, _, t in rows), "TODO")
"""


def make_project(root: Path, files: int, lines: int) -> None:
    src = root / "src"
    src.mkdir(parents=True)
    for i in range(files):
        body = [f"def function_{i}_{n}(value):  # {'TODO: handle None' if n % 7 == 0 else 'plain'}"
                for n in range(lines)]
        (src / f"mod{i:02}.py").write_text("\n".join(body) + "\n")


def script(way: str, files: int) -> list[Reply]:
    reads = [ToolCall("read_file", {"path": f"src/mod{i:02}.py"}) for i in range(files)]
    if way == "sequential":
        return [*(Reply(tool_calls=[call]) for call in reads), Reply(text=ANSWER)]
    if way == "parallel":
        return [Reply(tool_calls=reads), Reply(text=ANSWER)]
    return [Reply(tool_calls=[ToolCall("run_code", {"code": PROGRAM.format(files=files)})]), Reply(text=ANSWER)]


async def one_way(way: str, files: int, lines: int) -> tuple[int, int, int, float]:
    """(round trips, prompt tokens of all requests, bytes of the largest request, seconds)."""
    with tempfile.TemporaryDirectory() as tmp, MockChatServer(script(way, files)) as server:
        project = Path(tmp) / "project"
        make_project(project, files, lines)
        session, store = await open_session(project, server, Path(tmp) / "s.db", "code_mode=true")
        started = time.perf_counter()
        try:
            await drive(session, "Count the lines and TODOs of every file under src/.")
        finally:
            await store.aclose()
        elapsed = time.perf_counter() - started
        sizes = [len(request.raw) for request in server.chat_requests]
        return len(sizes), sum(size // 4 for size in sizes), max(sizes), elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=40)
    parser.add_argument("--lines", type=int, default=30)
    args = parser.parse_args()
    print(f"{args.files} files of {args.lines} lines; same catalog (code_mode = true), bubblewrap sandbox\n")
    print(f"{'way':<12} {'round trips':>11} {'prompt tokens':>14} {'largest request':>16} {'wall':>7}")
    for way in ("sequential", "parallel", "run_code"):
        trips, tokens, largest, elapsed = asyncio.run(one_way(way, args.files, args.lines))
        print(f"{way:<12} {trips:>11} {tokens:>14,} {largest:>14,} B {elapsed:>6.2f}s")


if __name__ == "__main__":
    main()
