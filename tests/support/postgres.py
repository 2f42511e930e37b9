"""A real PostgreSQL server for the tests, started from the installed binaries on a Unix socket in a temp dir.

PostgreSQL refuses to run as root, so when the tests run as root its programs run as the `postgres` user
(or `nobody`) through `runuser`, in a directory that user owns. The server listens on no TCP port and is
tuned for tests (no fsync); each test gets a database of its own (`fresh_database`). pg_stat_statements is
loaded, so a test (or the fleet benchmark) can count what one database was sent, once it has run
`CREATE EXTENSION pg_stat_statements` there."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path


def pg_bindir() -> Path | None:
    """Where initdb and pg_ctl are: `pg_config --bindir`, else the newest /usr/lib/postgresql/*/bin."""
    found = shutil.which("pg_config")
    if found:
        out = subprocess.run([found, "--bindir"], capture_output=True, text=True).stdout.strip()
        if out and (Path(out) / "initdb").exists():
            return Path(out)
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    return Path(candidates[-1]).parent if candidates else None


class PostgresServer:
    """initdb + pg_ctl start in a temp dir; `url(db)` connects over the socket; `stop()` removes it all."""

    def __init__(self, extra: str = "") -> None:
        """`extra`: more server options (`-c name=value …`), e.g. a preloaded extension for a benchmark."""
        bindir = pg_bindir()
        self.extra = extra
        if bindir is None:
            raise RuntimeError("PostgreSQL is not installed (scripts/install-system-deps installs it)")
        self.bindir = bindir
        self.dir = Path(tempfile.mkdtemp(prefix="augerpg-"))
        self.data = self.dir / "data"
        self.socket_dir = self.dir  # short: a Unix socket path is limited to ~100 bytes
        self.user = None if os.geteuid() != 0 else _unprivileged_user()
        if self.user is not None:
            os.chown(self.dir, *_ids(self.user))
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "auger", "--no-sync", "-E", "UTF8",
                  "--locale", "C")
        self.start()

    def _run(self, program: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        argv = [str(self.bindir / program), *args]
        if self.user is not None:
            argv = ["runuser", "-u", self.user, "--", *argv]
        done = subprocess.run(argv, capture_output=True, text=True, cwd=self.dir, timeout=60)
        if check and done.returncode != 0:
            raise RuntimeError(f"{program} failed: {done.stderr or done.stdout}")
        return done

    def start(self) -> None:
        options = (f"-k {self.socket_dir} -c listen_addresses='' -c fsync=off -c synchronous_commit=off "
                   "-c full_page_writes=off -c max_connections=300 -c shared_buffers=64MB "
                   "-c shared_preload_libraries=pg_stat_statements " + self.extra)
        self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.dir / "log"), "-w", "start")

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop", check=False)

    def restart(self) -> None:
        self.stop("immediate")
        self.start()

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://auger@/{database}?host={self.socket_dir}"

    def fresh_database(self) -> str:
        """A new empty database's URL."""
        import psycopg

        name = "t_" + uuid.uuid4().hex[:12]
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def cpu_seconds(self) -> float:
        """CPU time the server has used so far: the postmaster, its live processes, and those it reaped."""
        postmaster = int((self.data / "postmaster.pid").read_text().split()[0])
        total = process_cpu_seconds(postmaster, children=True)
        for stat in glob.glob("/proc/[0-9]*/stat"):
            try:
                fields = Path(stat).read_text().rsplit(")", 1)[1].split()
            except OSError:  # gone meanwhile
                continue
            if int(fields[1]) == postmaster:
                total += process_cpu_seconds(int(Path(stat).parent.name))
        return total

    def close(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.dir, ignore_errors=True)


def process_cpu_seconds(pid: int, children: bool = False) -> float:
    """User and system CPU time of a process (and of the children it reaped, with `children`); 0 once gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    ticks = sum(int(f) for f in fields[11:15 if children else 13])  # utime stime [cutime cstime]
    return ticks / os.sysconf("SC_CLK_TCK")


def _unprivileged_user() -> str:
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    raise RuntimeError("no unprivileged user (postgres or nobody) to run PostgreSQL as")


def _ids(user: str) -> tuple[int, int]:
    entry = pwd.getpwnam(user)
    return entry.pw_uid, entry.pw_gid
