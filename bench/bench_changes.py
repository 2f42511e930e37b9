"""Change-tracking benchmark: a snapshot plus a diff per turn on generated repositories.

For each size, a git repository of small files is generated and committed, beside ignored files
as a real project has them (a `.env`, logs, and a `node_modules/` of IGNORED_FILES files); the first snapshot
(which hashes every file) is timed on its own; then each turn changes 20 files (edits, a few new
files, a deletion, a rename, a chmod) and is timed as snapshot + structured changes + unified diff
(`diff_since`); a snapshot alone is timed after another 20 changes.
Prints a table with the median per-turn time. Not a test: nothing here is asserted.

    python bench/bench_changes.py [--turns N] [--sizes 50000,5000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from auger.changes.diff import diff_since  # noqa: E402
from auger.changes.snapshots import SnapshotStore  # noqa: E402

TARGET_PER_TURN = 0.3  # seconds, for 50,000 files
FILES_PER_DIR = 100
CHANGED_PER_TURN = 20
IGNORED_FILES = 20000  # in node_modules/: an ignored tree too big to snapshot, walked at every snapshot


def generate(root: Path, count: int) -> list[str]:
    """`count` small source-like files in directories of FILES_PER_DIR, committed to a git repo."""
    paths = []
    for i in range(count):
        rel = f"pkg{i // (FILES_PER_DIR * 50)}/mod{i // FILES_PER_DIR}/f{i}.py"
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(f"line {n} of file {i}\n" for n in range(20)))
        paths.append(rel)
    (root / ".gitignore").write_text("node_modules/\n.env\n*.log\n")
    (root / ".env").write_text("TOKEN=secret\n")
    (root / "build.log").write_text("ok\n")
    for i in range(IGNORED_FILES):
        path = root / f"node_modules/pkg{i // 200}/lib/f{i}.js"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"module.exports = {i};\n")
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@x", "GIT_COMMITTER_NAME": "b",
           "GIT_COMMITTER_EMAIL": "b@x"}
    subprocess.run("git init -q && git add -A && git -c gc.auto=0 commit -qm init", shell=True, cwd=root, env=env, check=True)
    return paths


def change(root: Path, paths: list[str], rnd: random.Random, turn: int) -> None:
    """One turn's 20 file changes: 15 edits, 2 new files, 1 deletion, 1 rename, 1 chmod."""
    picked = rnd.sample(paths, CHANGED_PER_TURN)
    for rel in picked[:15]:
        with open(root / rel, "a") as f:
            f.write(f"edited in turn {turn}\n")
    for k in range(2):
        (root / f"new_{turn}_{k}.py").write_text(f"new {turn} {k}\n")
    (root / picked[15]).unlink()
    paths.remove(picked[15])
    renamed = picked[16] + ".moved"
    (root / picked[16]).rename(root / renamed)
    paths[paths.index(picked[16])] = renamed
    os.chmod(root / picked[17], 0o755)


async def run(count: int, turns: int, tmp: Path) -> dict[str, float]:
    root = tmp / f"repo{count}"
    root.mkdir()
    paths = generate(root, count)
    store = SnapshotStore(root, tmp / f"snap{count}")
    started = time.perf_counter()
    previous = await store.snapshot("first")
    first = time.perf_counter() - started
    rnd = random.Random(count)
    per_turn, snap_only, files = [], [], 0
    for turn in range(turns):
        change(root, paths, rnd, turn)
        started = time.perf_counter()
        got = await diff_since(store, previous)
        per_turn.append(time.perf_counter() - started)
        files = len(got.changes)
        change(root, paths, rnd, turn + turns)
        started = time.perf_counter()
        previous = await store.snapshot(f"turn {turn}")
        snap_only.append(time.perf_counter() - started)
    return {"files": count, "first": first, "turn": statistics.median(per_turn),
            "snapshot": statistics.median(snap_only), "changed": files}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=7)
    parser.add_argument("--sizes", default="50000,5000")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="auger-bench-changes-") as tmp:
        for size in (int(s) for s in args.sizes.split(",")):
            rows.append(asyncio.run(run(size, args.turns, Path(tmp))))
    print(f"{'files':>8}  {'first snapshot':>14}  {'snapshot/turn':>13}  {'snapshot+diff/turn':>18}  "
          f"{'changes seen':>12}  target")
    for r in rows:
        target = f"< {TARGET_PER_TURN} s" if r["files"] >= 50000 else ""
        print(f"{r['files']:>8}  {r['first']:>12.3f} s  {r['snapshot']:>11.3f} s  {r['turn']:>16.3f} s  "
              f"{r['changed']:>12}  {target}")
    print(f"(median of {args.turns} turns, {CHANGED_PER_TURN} changed files per turn)")


if __name__ == "__main__":
    main()
