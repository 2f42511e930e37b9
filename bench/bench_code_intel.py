"""Code intelligence, measured: what diagnostics after edits save, what they cost, and the repository map.

1. A scripted multi-step task whose first edit breaks a caller in another file: `area(w, h)` gains a
   `depth` parameter, and `report.py` still calls it with two arguments. The model is scripted
   (tests/support/mock_openai.py) but reacts to what it reads, the same way with diagnostics on and off:
   it fixes a file a result names as broken; it runs the tests when nothing says what is broken; it reads
   a file a failing test names, then fixes it. Printed: model round trips and prompt tokens (the mock's
   estimate, 4 bytes a token) until the suite passes, with real pyright and ruff servers
   (tests/support/lsp_servers.py).
2. What a session pays for them, once: the first edit's wait (the servers start, analyse the files before
   and after), a later edit's, and the memory of the server processes and of auger's own.
3. The repository map of a 2,000-file repository (source files of this environment's installed
   packages, copied): time to build its index cold, to bring it up to date when nothing changed and when
   one file did, the map's size per budget, and the index's size on disk.
4. The first request's size: the default catalog (code_nav and repo_map offered, no map sent), without
   the two tools, and with `repo_map = "auto"` in a large unfamiliar project (the map in the first turn).

Not a test: nothing here is asserted.

    python bench/bench_code_intel.py [--files 2000] [--skip-map]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the tests' mock server and harness

from tests.support.harness import drive, open_session  # noqa: E402
from tests.support.mock_openai import MockChatServer, Reply, ToolCall  # noqa: E402

GEOMETRY = "def area(width: int, height: int) -> int:\n    return width * height\n"
REPORT = "from geometry import area\n\n\ndef floor_report() -> str:\n    return f\"floor: {area(2, 3)}\"\n"
TESTS = ("from geometry import area\nfrom report import floor_report\n\n"
         "assert area(2, 3, 4) == 24\nassert floor_report() == 'floor: 6'\nprint('all tests passed')\n")
FIXED_REPORT = REPORT.replace("area(2, 3)", "area(2, 3, 1)")
RUN_TESTS = ToolCall("shell", {"command": "python test_all.py"})


def task_project(root: Path) -> None:
    root.mkdir(parents=True)
    (root / "geometry.py").write_text(GEOMETRY)
    (root / "report.py").write_text(REPORT)
    (root / "test_all.py").write_text(TESTS)


def reacting_model(body: dict) -> Reply:
    """The scripted model: the same policy whatever it is told; it acts on the last tool result."""
    messages = body["messages"]
    last = messages[-1]
    said = str(last.get("content", "")) if last["role"] == "tool" else ""
    done = [m for m in messages if m["role"] == "tool"]
    calls = [c["function"] for m in messages if m["role"] == "assistant" for c in m.get("tool_calls") or []]
    asked = calls[-1]["name"] if calls else ""
    if not done:  # the task's first step: the edit that breaks the caller
        return Reply(tool_calls=[ToolCall("edit_file", {
            "path": "geometry.py", "old_string": "height: int) -> int:\n    return width * height",
            "new_string": "height: int, depth: int) -> int:\n    return width * height * depth"})])
    if "all tests passed" in said:
        return Reply(text="Done: area takes a depth, and every caller passes one.")
    named = re.search(r"^report\.py:\d+:\d+: error", said, re.M)  # a diagnostic names the broken caller
    if named or asked == "read_file":  # ... or the model has just read it
        return Reply(tool_calls=[ToolCall("edit_file", {"path": "report.py", "old_string": "area(2, 3)",
                                                        "new_string": "area(2, 3, 1)"})])
    if "Traceback" in said and "report.py" in said:  # a failing test names it: read it first
        return Reply(tool_calls=[ToolCall("read_file", {"path": "report.py"})])
    return Reply(tool_calls=[RUN_TESTS])  # nothing says what is broken: run the tests


async def task_run(diagnostics: bool, path: str) -> tuple[int, int, bool, float]:
    """(round trips, prompt tokens, suite passing, seconds)."""
    with tempfile.TemporaryDirectory() as tmp, MockChatServer([reacting_model] * 20) as server:
        project = Path(tmp) / "project"
        task_project(project)
        settings = (f"diagnostics={'true' if diagnostics else 'false'}", "diagnostics_wait=60", "mode=auto",
                    "approve_all=true")
        os.environ["PATH"] = path
        session, store = await open_session(project, server, Path(tmp) / "s.db", *settings)
        started = time.perf_counter()
        try:
            await drive(session, "Give area() a depth parameter (a volume), and keep the test suite passing.")
        finally:
            await store.aclose()
        elapsed = time.perf_counter() - started
        sizes = [len(request.raw) for request in server.chat_requests]
        passing = "all tests passed" in os.popen(f"cd {project} && python test_all.py 2>&1").read()
        return len(sizes), sum(size // 4 for size in sizes), passing, elapsed


def task_table(path: str) -> None:
    print("\n1. first edit breaks a caller in another file: model round trips and prompt tokens to a passing suite")
    print("| diagnostics | round trips | prompt tokens, all requests | suite passes | wall |")
    print("| --- | --- | --- | --- | --- |")
    for on in (False, True):
        trips, tokens, passing, seconds = asyncio.run(task_run(on, path))
        print(f"| {'on' if on else 'off'} | {trips} | {tokens:,} | {'yes' if passing else 'no'} | {seconds:.1f} s |")


# --- 2. what a session pays -------------------------------------------------------------------------------


def rss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def servers_rss_kb() -> dict[str, int]:
    """RSS of the language server processes running now, by program (a server's children included)."""
    found: dict[str, int] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{name}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        for program in ("pyright", "ruff server", "tsserver", "typescript-language-server"):
            if program in cmdline and "bench_code_intel" not in cmdline:
                found[program] = found.get(program, 0) + rss_kb(int(name))
    return found


async def cost_run(path: str) -> None:
    os.environ["PATH"] = path
    edits = [ToolCall("edit_file", {"path": "geometry.py", "old_string": "width * height",
                                    "new_string": f"width * height * {n + 1}"}) for n in range(3)]
    with tempfile.TemporaryDirectory() as tmp, MockChatServer([Reply(tool_calls=[e]) for e in edits]
                                                             + [Reply(text="done")]) as server:
        project = Path(tmp) / "project"
        task_project(project)
        before = rss_kb(os.getpid())
        session, store = await open_session(project, server, Path(tmp) / "s.db", "diagnostics_wait=60",
                                            "mode=auto", "approve_all=true")
        servers: dict[str, int] = {}

        def seen(_session, event) -> None:
            if type(event).__name__ == "ToolCallEnded":
                servers.update(servers_rss_kb())

        try:
            run = await drive(session, "edit", on_event=seen)
        finally:
            await store.aclose()
        after = rss_kb(os.getpid())
    durations = [e.duration_ms for e in run.events if type(e).__name__ == "ToolCallEnded"]
    print("\n2. what diagnostics cost a session (pyright + ruff, a 3-file project)")
    print("| measure | value |")
    print("| --- | --- |")
    print(f"| first edit (servers start, files analysed before and after) | {durations[0] / 1000:.2f} s |")
    print(f"| each later edit | {max(durations[1:]) / 1000:.2f} s at most |")
    for program, kb in sorted(servers.items()):
        print(f"| RSS of the {program} processes | {kb / 1024:.1f} MB |")
    growth = (after - before) / 1024
    print(f"| auger's own RSS growth over the session (lsp/ loaded, the session's state) | {growth:.1f} MB |")


# --- 3. the repository map ----------------------------------------------------------------------------------


def copied_sources(root: Path, count: int) -> int:
    """`count` Python source files of this environment's packages copied under `root`; their bytes."""
    site = Path(sysconfig.get_paths()["purelib"])
    copied = size = 0
    for path in sorted(site.rglob("*.py")):
        if copied >= count:
            break
        if "__pycache__" in path.parts or path.stat().st_size > 256 * 1024:
            continue
        target = root / path.relative_to(site)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
        copied += 1
        size += path.stat().st_size
    return size


def map_table(files: int) -> None:
    from auger.lsp.files import Project
    from auger.lsp.repo_map import RepoMap, parse_focus

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "repo"
        size = copied_sources(root, files)
        cache = Path(tmp) / "cache"
        print(f"\n3. the repository map of {files:,} Python files ({size / 1e6:.1f} MB of source)")
        print("| measure | value |")
        print("| --- | --- |")
        repo_map = RepoMap(Project(root), cache)
        before = rss_kb(os.getpid())
        started = time.perf_counter()
        text = asyncio.run(repo_map.render(1024))
        print(f"| index built cold ({repo_map.parsed:,} files parsed) and a 1,024-token map | "
              f"{time.perf_counter() - started:.1f} s |")
        print(f"| auger's RSS growth for it (grammar, index) | {(rss_kb(os.getpid()) - before) / 1024:.1f} MB |")
        print(f"| index on disk | {sum(p.stat().st_size for p in cache.iterdir()) / 1e6:.1f} MB |")
        later = RepoMap(Project(root), cache)
        started = time.perf_counter()
        asyncio.run(later.render(1024))
        print(f"| a later session, nothing changed (index read, tree walked, ranked) | "
              f"{time.perf_counter() - started:.2f} s ({later.parsed} parsed) |")
        touched = next(root.rglob("*.py"))
        touched.write_text(touched.read_text() + "\n\ndef added_by_the_benchmark():\n    return 1\n")
        started = time.perf_counter()
        asyncio.run(later.render(1024))
        print(f"| after one file changed | {time.perf_counter() - started:.2f} s ({later.parsed} parsed) |")
        for budget in (512, 1024, 2048, 4096):
            shown = asyncio.run(later.render(budget))
            entries = sum(1 for line in shown.splitlines() if line.startswith("  "))
            size = (len(shown.encode()) + 3) // 4
            print(f"| map within {budget:,} tokens | {size:,} tokens, {entries} definitions |")
        focused = asyncio.run(later.render(1024, parse_focus(str(touched.relative_to(root)))))
        print(f"| with a focus file, its definitions first | {focused.splitlines()[0]} |")
        del text


# --- 4. the first request ----------------------------------------------------------------------------------


async def first_request(project: Path, db: Path, *settings: str) -> int:
    with MockChatServer([Reply(text="done")]) as server:
        session, store = await open_session(project, server, db, *settings)
        try:
            await drive(session, "hi")
        finally:
            await store.aclose()
        return len(server.chat_requests[0].raw)


def request_table() -> None:
    from auger.config import home_dirs
    from auger.lsp.files import Project
    from auger.lsp.repo_map import RepoMap

    with tempfile.TemporaryDirectory() as tmp:
        small = Path(tmp) / "small"
        task_project(small)
        large = Path(tmp) / "large"
        copied_sources(large, 400)
        rows = [("default: code_nav and repo_map offered, no map sent", small, ()),
                ("code_nav = false, repo_map = \"off\" (the catalog before them)", small,
                 ("code_nav=false", "repo_map=off")),
                ("default, in a 400-file project", large, ()),
                ("repo_map = \"auto\", that unfamiliar project, its map not built yet (not ready within 3 s)", large,
                 ("repo_map=auto",)),
                ("repo_map = \"auto\", the map built by an earlier run (the map in the first turn)", large,
                 ("repo_map=auto",))]
        print("\n4. the first request (Chat Completions)")
        print("| configuration | bytes |")
        print("| --- | --- |")
        sizes = []
        for n, (label, project, settings) in enumerate(rows):
            if n == len(rows) - 1:  # what a first session left in the cache dir
                asyncio.run(RepoMap(Project(project), home_dirs()["cache"] / "repo-map").render(1024))
            sizes.append(asyncio.run(first_request(project, Path(tmp) / f"s{n}.db", *settings)))
            print(f"| {label} | {sizes[-1]:,} |")
        carried = (sizes[-1] - sizes[2]) // 4
        print(f"\nThe map costs {carried:,} tokens on every request of the session (it stays in the history); asked "
              "for with the tool it costs one round trip, and the same tokens from then on. So `auto` pays only "
              "where the model would have asked for a map, or explored with round trips of its own, in the first "
              f"turn: in a 20-request session an unused map costs {20 * carried:,} tokens.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--skip-map", action="store_true")
    args = parser.parse_args()
    os.environ.setdefault("AUGER_HOME", tempfile.mkdtemp(prefix="auger-bench-"))
    from tests.support.lsp_servers import servers_path

    path = servers_path()
    task_table(path)
    asyncio.run(cost_run(path))
    if not args.skip_map:
        map_table(args.files)
    request_table()


if __name__ == "__main__":
    main()
