"""Protected files: what finding and hiding them costs.

For a project holding N protected files (N = 0, 10, 100, 1000; each `kN/x.pem` in a directory of its own):

* the scan a sandbox start makes (secrets/protected.py `ProtectedFiles.scan`), and the look before each command;
* bubblewrap: the session sandbox's start (first command, which starts it, minus a later one): one mount each;
* Landlock: a command with the protected files left out of its own ruleset, against one without any;

and the scan of a large tree (its bound: SCAN_LIMIT entries). Runs the real sandbox through the session's
Confinement; prints a table. Not a test: nothing here is asserted.

    python bench/bench_protected_files.py [--runs N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from auger.config import home_dirs, load_config  # noqa: E402
from auger.policy.confinement import confine  # noqa: E402
from auger.secrets.protected import SCAN_LIMIT, ProtectedFiles  # noqa: E402

COUNTS = (0, 10, 100, 1000)


def project_with(root: Path, count: int) -> None:
    root.mkdir()
    (root / "README.md").write_text("hello\n")
    for n in range(count):
        (root / f"k{n}").mkdir()
        (root / f"k{n}" / "x.pem").write_text("secret\n")
        (root / f"k{n}" / "ok.txt").write_text("fine\n")


async def command(confinement, root: Path) -> float:
    """Seconds from asking for `true` to its end."""
    started = time.perf_counter()
    proc = await confinement.spawn(["/bin/true"], root, dict(os.environ), (0, 1, 2), "local_mutation")
    await proc.wait()
    return time.perf_counter() - started


async def sandbox_costs(kind: str, root: Path, runs: int) -> tuple[float, float]:
    """(median start cost, median cost of a command once started) of the session sandbox of `kind`."""
    starts, commands = [], []
    for _ in range(runs):
        config = load_config([f"sandbox={kind}", "sandbox_network=none"], env={})
        scratch = Path(tempfile.mkdtemp(prefix="bench-scratch-"))
        confinement = await confine(config, root, scratch, (), lambda message: None, dirs=home_dirs(),
                                    secrets=[ProtectedFiles(root)])
        assert confinement is not None, f"no {kind} sandbox here"
        try:
            first = await command(confinement, root)
            later = statistics.median([await command(confinement, root) for _ in range(5)])
        finally:
            await confinement.close()
        starts.append(first - later)
        commands.append(later)
    return statistics.median(starts), statistics.median(commands)


def timed(fn, runs: int) -> float:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench-secrets-"))
    os.environ.setdefault("AUGER_HOME", str(base / "home"))
    rows = []
    for count in COUNTS:
        root = base / f"p{count}"
        project_with(root, count)
        protected = ProtectedFiles(root)
        scan = timed(lambda: protected.scan(again=True), args.runs)
        look = timed(protected.look_again, args.runs)
        bwrap_start, bwrap_cmd = asyncio.run(sandbox_costs("bwrap", root, args.runs))
        landlock_start, landlock_cmd = asyncio.run(sandbox_costs("landlock", root, args.runs))
        rows.append((count, scan, look, bwrap_start, bwrap_cmd, landlock_start, landlock_cmd))
    print(f"{'protected':>9} {'scan':>8} {'look':>8} {'bwrap start':>12} {'bwrap cmd':>10} "
          f"{'landlock start':>15} {'landlock cmd':>13}")
    for count, scan, look, b_start, b_cmd, l_start, l_cmd in rows:
        print(f"{count:>9} {scan * 1000:>6.1f}ms {look * 1000:>6.2f}ms {b_start * 1000:>10.1f}ms "
              f"{b_cmd * 1000:>8.1f}ms {l_start * 1000:>13.1f}ms {l_cmd * 1000:>11.1f}ms")
    big = base / "big"
    big.mkdir()
    for d in range(100):
        (big / "node_modules" / f"m{d}").mkdir(parents=True)
        for f in range(600):
            (big / "node_modules" / f"m{d}" / f"f{f}.js").write_text("")
    (big / ".env").write_text("x")
    protected = ProtectedFiles(big)
    seconds = timed(lambda: protected.scan(again=True), args.runs)
    scan = protected.scan()
    print(f"a tree of 60,000 files: scan {seconds * 1000:.0f} ms, {scan.entries:,} entries looked at "
          f"(bound {SCAN_LIMIT:,}; complete: {scan.complete}; .env found: {'.env' in scan.paths})")


if __name__ == "__main__":
    main()
