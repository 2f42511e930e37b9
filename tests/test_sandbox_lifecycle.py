"""A session's sandbox starts with its first command and stops when idle, transparently: judged by the
processes below auger's (from /proc), what commands print, and what survives a killed auger."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from auger.policy.listening import DEV_PORTS
from auger.protocol import events as ev
from auger.protocol.ops import RunShell, SetTurnContext, UserTurn
from tests.support.harness import cli_env, follow_session
from tests.support.mock_openai import Reply, ToolCall
from tests.support.redteam_sandbox import KINDS, all_gone, descendants, processes_with, require
from tests.support.sockets import free_dev_port

IDLE = "sandbox_idle_timeout=0.2"


def _why_stopped(session, serve: str) -> str:
    """What a failure needs to be told apart: the server's processes as /proc has them (state and parent),
    the supervisor's, and the end of its log."""
    def described(pid: int) -> str:
        try:
            fields = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()
            return f"{pid} ({fields[0].decode()}, parent {fields[1].decode()})"
        except (OSError, IndexError):
            return f"{pid} (gone)"

    confinement = session.confinement
    log = confinement.private_dir / "supervisor.log" if confinement.private_dir else None
    tail = log.read_text(errors="replace")[-800:] if log is not None and log.exists() else "(no log)"
    return (f"the sandbox stopped; server processes: {[described(p) for p in processes_with(serve)]}; "
            f"box: {confinement.box!r}; supervisor log: {tail}")
# When the supervisor that started the command (bash's parent) started: another one, in a sandbox started again.
SUPERVISOR_STARTED = "$(cut -d' ' -f22 /proc/$PPID/stat)"


async def shell_turn(session, follow, command: str) -> str:
    """Run the user's own command in the session; what the model is shown of it."""
    session.submit(RunShell(command))
    ended = await follow.until(ev.ToolCallEnded)
    await follow.until(ev.TurnEnded)
    return ended.output


async def stopped(confinement, within: float = 10.0) -> None:
    """Wait until the session's sandbox has stopped; fail if it does not."""
    deadline = asyncio.get_running_loop().time() + within
    while confinement.running:
        assert asyncio.get_running_loop().time() < deadline, "the idle sandbox did not stop"
        await asyncio.sleep(0.05)


def helpers(before: set[int]) -> set[int]:
    """Processes below this one that were not there `before`, snapshots' git aside."""
    found = set()
    for pid in descendants(os.getpid()) - before:
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() != "git":
                found.add(pid)
        except OSError:
            pass
    return found


@pytest.mark.parametrize("kind", KINDS)
def test_a_session_that_runs_no_command_starts_no_process(project, server, kind):
    require(kind)
    (project / "a.txt").write_text("hello\n")
    server.add(Reply(tool_calls=[ToolCall("read_file", {"path": "a.txt"})]), Reply(text="done"))
    before = descendants(os.getpid())

    async def steps(session, follow):
        session.submit(UserTurn("read a.txt"))
        await follow.until(ev.TurnEnded)
        assert follow.events[0].sandbox == kind  # a sandbox is in use: it just was not needed
        assert helpers(before) == set()  # no bwrap, supervisor, template
        confinement = session.confinement
        assert not confinement.running and confinement.proxy is None and confinement.git is None

    follow_session(project, server, steps, f"sandbox={kind}")


@pytest.mark.parametrize("kind", KINDS)
def test_an_idle_sandbox_stops_and_the_next_command_runs_as_before(project, server, upstream, kind):
    """Same working directory, environment and egress rules in the sandbox started again; a new sandbox
    all the same (its supervisor started later)."""
    require(kind)
    (project / "sub").mkdir()
    command = (f"pwd; echo var=$LIFECYCLE; curl -sS --max-time 5 http://mirror.test:{upstream}/; "
               f"curl -sS --max-time 5 http://evil.test:{upstream}/; echo sandbox={SUPERVISOR_STARTED}")
    before = descendants(os.getpid())
    outs: list[str] = []

    async def steps(session, follow):
        session.submit(SetTurnContext(cwd="sub"))
        await follow.until(ev.TurnContextChanged)
        outs.append(await shell_turn(session, follow, command))
        assert session.confinement.running and helpers(before)
        await stopped(session.confinement)
        assert helpers(before) == set()  # every helper went with it
        watch = session.confinement.git
        assert watch is not None and watch.sweep._notify is None and watch.sweep._handle is None  # nothing held
        outs.append(await shell_turn(session, follow, command))

    follow_session(project, server, steps, f"sandbox={kind}", IDLE, "approve_all=true",
                   'shell_env_set={ LIFECYCLE = "kept" }', 'egress_allow=["mirror.test"]',
                   'egress_hosts={ "mirror.test" = "127.0.0.1", "evil.test" = "127.0.0.1" }')
    first, again = outs
    for out in outs:
        assert f"{project.resolve()}/sub" in out and "var=kept" in out, out
        assert "hello from upstream" in out, out  # allowed host, through the proxy started again
        assert "proxy refused evil.test" in out, out
    assert _line(first, "sandbox=") != _line(again, "sandbox="), (first, again)


def _line(output: str, prefix: str) -> str:
    return next(line for line in output.splitlines() if line.startswith(prefix))


@pytest.mark.xdist_group("dev-port-8000")  # under Landlock the server binds the host's port: one test at a time
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("how", ["background", "left behind"])
def test_a_server_keeps_its_sandbox_alive_and_reachable(project, server, kind, how):
    """Started with `background: true`, or left behind by a foreground command (in a session of its own):
    either way something runs in the sandbox, so it does not stop, and a later command reaches it."""
    require(kind)
    marker = f"lifecycle-{uuid.uuid4().hex[:8]}"
    (project / "site").mkdir()
    (project / "site" / "index.html").write_text(f"{marker}\n")
    port = free_dev_port()  # a dev port: Landlock lets a session bind those
    assert port is not None, f"every dev port {DEV_PORTS} is taken on this machine; the test needs one free"
    serve = f"python3 -m http.server {port} --bind 127.0.0.1 --directory site"
    if how == "background":
        server.add(Reply(tool_calls=[ToolCall("shell", {"command": f"exec {serve}", "background": True})]),
                   Reply(text="started"))
    outs: list[str] = []

    async def steps(session, follow):
        if how == "background":
            session.submit(UserTurn("start the server"))
            await follow.until(ev.TurnEnded)
        else:
            # (the wait: the command's group is killed when it ends, so it ends once this test's server answers)
            started = await shell_turn(session, follow, f"setsid {serve} >/dev/null 2>&1 </dev/null & for i in "
                                                        f"$(seq 200); do curl -s http://127.0.0.1:{port}/ | grep -q "
                                                        f"{marker} && echo SERVED && break; sleep 0.05; done")
            assert "SERVED" in started, f"the server never answered with this test's page: {started}"
        await asyncio.sleep(1.0)  # five idle timeouts
        assert session.confinement.running, _why_stopped(session, serve)
        outs.append(await shell_turn(session, follow, f"for i in $(seq 50); do curl -s http://127.0.0.1:{port}/ && "
                                                      "break; sleep 0.1; done"))

    follow_session(project, server, steps, f"sandbox={kind}", IDLE, "approve_all=true")
    assert marker in outs[0], outs[0]


@pytest.mark.parametrize("kind", KINDS)
def test_nothing_outlives_auger_killed_after_its_sandbox_started_again(tmp_path, project, server, kind):
    """auger killed with SIGKILL while a background command runs in a sandbox started after the first one
    stopped: the template, the supervisors, bwrap, the holder and the command all end."""
    require(kind)
    marker = f"lifecycle-k-{uuid.uuid4().hex[:8]}"
    identity = f"echo {SUPERVISOR_STARTED}"
    server.add(Reply(tool_calls=[ToolCall("shell", {"command": f"{identity} > first"})]),
               Reply(tool_calls=[ToolCall("shell", {"command": f"{identity} > second; exec bash -c 'sleep 300; :' "
                                                              f"{marker}", "background": True})], delay=1.5),
               Reply(text="never sent", delay=60))
    proc = subprocess.Popen([sys.executable, "-m", "auger", "exec", "--base-url", server.base_url, "-m", "mock",
                             "-c", f"sandbox={kind}", "-c", "approve_all=true", "-c", IDLE, "go"],
                            cwd=project, env=cli_env(tmp_path / "auger-home"), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        limit = time.monotonic() + 30
        while not ((project / "second").exists() and processes_with(marker)):
            assert time.monotonic() < limit and proc.poll() is None, "the background command did not start"
            time.sleep(0.05)
        running = descendants(proc.pid)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert (project / "first").read_text() != (project / "second").read_text()  # a sandbox started again
    assert len(running) >= 4  # template, supervisor, the command (and bwrap and its holder)
    assert all_gone(running) == set(), "helpers outlived auger"


def test_live_sandboxes_share_one_template_and_each_costs_little(tmp_path):
    """Each live sandbox has one supervisor, forked from the process's one template (no interpreter of its
    own; the template starts bwrap too): a sandbox beyond the first adds at most 3 MB (PSS) of helpers;
    the template is paid once per process. When the last sandbox stops, the template goes too."""
    require("bwrap")
    from auger.config import Config
    from auger.policy.confinement import confine
    from auger.policy.template import TEMPLATE
    from auger.tools.base import SessionToolState, ToolContext
    from auger.tools.shell import SHELL

    project = tmp_path / "project"
    project.mkdir()
    home = tmp_path / "auger-home"
    dirs = {"config": home, "data": home, "cache": home / "cache"}
    before = descendants(os.getpid())

    async def main() -> tuple[set[int], int | None, set[int], list[int]]:
        confinements, pss_kb = [], []
        try:
            for n in range(4):
                scratch = tmp_path / f"scratch-{n}"
                confinement = await confine(Config(sandbox="bwrap"), project, scratch, (), print, dirs=dirs)
                ctx = ToolContext(root=project, state=SessionToolState(scratch_dir=scratch), call_id="c",
                                  archive=None, env=dict(os.environ), sandbox=confinement)
                confinements.append(confinement)
                result = await SHELL.handler({"command": "true"}, ctx)
                assert result.ok, result.output
                pss_kb.append(sum(_pss_kb(pid) for pid in helpers(before)))
            live = helpers(before)
            # forked from the template (its command line), a child of its sandbox's holder, which bwrap started
            # as the template's child
            supervisors = {pid for pid in live if pid != TEMPLATE.pid and _cmdline(pid) == _cmdline(TEMPLATE.pid)
                           and _parent(_parent(_parent(pid))) == TEMPLATE.pid}
            return live, TEMPLATE.pid, supervisors, pss_kb
        finally:
            for confinement in confinements:
                await confinement.close()

    live, template, supervisors, pss_kb = asyncio.run(main())
    assert template in live and len(supervisors) == 4
    assert len(live) == 1 + 4 * 3  # the template; bwrap, its holder and a supervisor per sandbox
    added = (pss_kb[-1] - pss_kb[0]) / 3
    assert added <= 3 * 1024, f"{added:.0f} KB of helpers per sandbox beyond the first ({pss_kb} KB in all)"
    assert TEMPLATE.pid is None and all_gone(live) == set()


def _importing_tests(env: dict[str, str]) -> dict[str, str]:
    """`env` for a Python process that imports `tests.support`: the checkout first on its path."""
    path = [str(Path(__file__).parents[1]), *filter(None, [env.get("PYTHONPATH")])]
    return {**env, "PYTHONPATH": os.pathsep.join(path)}


def _parent(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_bytes()
    return int(stat[stat.rfind(b")") + 2:].split()[1])


def _cmdline(pid: int) -> bytes:
    return Path(f"/proc/{pid}/cmdline").read_bytes()


def _pss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1])
    return 0


def _inotify_instances() -> int:
    """inotify instances this process holds open."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{fd}") == "anon_inode:inotify"
        except OSError:
            pass
    return count


def test_every_watch_of_a_process_shares_one_inotify_instance(tmp_path):
    """More sessions than a user may have inotify instances (fs.inotify.max_user_instances, shared with
    the user's editors) watch their projects for planted repositories: one instance serves them all,
    and each watch hears of its own project's changes."""
    from auger.policy.gitsweep import GitSweep

    limit = int(Path("/proc/sys/fs/inotify/max_user_instances").read_text())
    before = _inotify_instances()
    sweeps = []
    try:
        for n in range(limit + 8):
            root = tmp_path / f"project-{n}"
            (root / "src").mkdir(parents=True)
            sweeps.append(GitSweep(root))
            sweeps[-1].start()
        assert _inotify_instances() == before + 1
        assert all(sweep._notify is not None for sweep in sweeps)  # none fell back to reading every directory
        last = sweeps[-1]
        subprocess.run(["git", "init", "-q", "src/sub"], cwd=last.root, check=True)
        (last.root / "src/sub/.git/hooks/pre-commit").write_text("#!/bin/sh\ntouch PWNED\n")
        assert sweeps[0].sweep() == []
        notes = last.sweep()
        assert any("removed hooks pre-commit" in note for note in notes), notes
    finally:
        for sweep in sweeps:
            sweep.close()
    assert _inotify_instances() == before


def test_exec_starts_its_sandbox_while_the_model_replies(tmp_path, project, server):
    """`auger exec` runs a task, which runs commands: its sandbox starts while the first reply is awaited,
    so the first command does not wait for it."""
    require("bwrap")
    server.add(Reply(text="done", delay=3.0))
    proc = subprocess.Popen([sys.executable, "-m", "auger", "exec", "--base-url", server.base_url, "-m", "mock",
                             "-c", "sandbox=bwrap", "go"], cwd=project, env=cli_env(tmp_path / "auger-home"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        limit = time.monotonic() + 20
        while not server.chat_requests:
            assert time.monotonic() < limit and proc.poll() is None, "no model request"
            time.sleep(0.05)
        while len(descendants(proc.pid)) < 4:  # bwrap, its holder, the template, the supervisor
            assert time.monotonic() < limit and proc.poll() is None, "the sandbox did not start"
            time.sleep(0.05)
    finally:
        assert proc.wait(timeout=30) == 0


@pytest.mark.parametrize("kind", KINDS)
def test_nothing_outlives_auger_killed_while_its_sandbox_starts(tmp_path, project, server, kind):
    """auger (and its process group: the template with it) killed with SIGKILL at moments spread over its
    sandbox's start, which exec begins as the session opens: no bwrap, holder or supervisor is left
    behind, half-started or not. (A bwrap ended between making its namespaces and letting its child run
    would leave that child waiting for it forever.)"""
    require(kind)
    server.add(*[Reply(text="never read", delay=60) for _ in range(24)])
    argv = [sys.executable, "-m", "auger", "exec", "--json", "--base-url", server.base_url, "-m", "mock",
            "-c", f"sandbox={kind}", "go"]
    for i in range(24):
        proc = subprocess.Popen(argv, cwd=project, env=cli_env(tmp_path / "auger-home"), stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        assert proc.stdout is not None and proc.stdout.readline()  # the session is open: its sandbox starts
        time.sleep(0.003 * i)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
    deadline = time.monotonic() + 5
    while processes_with(str(project)) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = processes_with(str(project))
    assert not left, f"{len(left)} processes outlived auger, e.g. " + Path(f"/proc/{left[0]}/cmdline").read_bytes()[
        :60].decode(errors="replace")


# Run as a process of its own that is a child subreaper and never reaps (a container's pid 1 that does not wait
# for orphans): it starts auger, kills auger's process group once the sandbox is up, and prints the processes of
# the sandbox still running after 3 s (zombies are not); then ends and reaps them all.
UNREAPED_ORPHANS = """
import ctypes, json, os, signal, subprocess, sys, time
from tests.support.redteam_sandbox import all_gone, descendants
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: auger's orphans come here, and stay unreaped
argv, cwd = json.loads(sys.argv[1]), sys.argv[2]
proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
limit = time.monotonic() + 30
while len(descendants(proc.pid)) < 4:  # the template, bwrap, its holder, the supervisor
    assert time.monotonic() < limit and proc.poll() is None, "the sandbox did not start"
    time.sleep(0.05)
time.sleep(0.2)
running = descendants(proc.pid)
os.killpg(proc.pid, signal.SIGKILL)
proc.wait()
left = all_gone(running)
print(json.dumps({pid: open(f"/proc/{pid}/cmdline", "rb").read()[:60].decode(errors="replace") for pid in left}))
for pid in left:
    os.kill(pid, signal.SIGKILL)
limit = time.monotonic() + 10
while time.monotonic() < limit:
    try:
        os.waitpid(-1, os.WNOHANG)
    except ChildProcessError:
        break
    time.sleep(0.01)
"""


def test_nothing_outlives_auger_killed_where_nothing_reaps_its_orphans(tmp_path, project, server):
    """auger killed with SIGKILL once its sandbox is up, where the orphans it leaves are never reaped (a
    container whose pid 1 does not wait for them): the sandbox still ends, bwrap and its holder with it. (A
    PID namespace ends only when each of its processes is reaped: a supervisor whose parent were outside it
    would keep its pid 1, and bwrap, waiting for whatever reaps auger's orphans.)"""
    require("bwrap")
    server.add(Reply(text="never read", delay=60))
    argv = [sys.executable, "-m", "auger", "exec", "--base-url", server.base_url, "-m", "mock", "-c", "sandbox=bwrap",
            "go"]
    env = _importing_tests(cli_env(tmp_path / "auger-home"))
    done = subprocess.run([sys.executable, "-c", UNREAPED_ORPHANS, json.dumps(argv), str(project)], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {}, f"still running after auger was killed: {done.stdout}"


# Run as auger: start a session's sandbox with `bwrap` standing for one whose start never ends, then die.
STUCK_START = """
import asyncio, os, signal, sys
from pathlib import Path
from auger.policy.sandbox import BwrapSandbox, SandboxPolicy
from auger.policy.supervised import SessionSandbox
from tests.support.redteam_sandbox import processes_with
bwrap, project, log, marker = sys.argv[1:]

async def main():
    sandbox, policy = BwrapSandbox(bwrap, (0, 8, 0)), SandboxPolicy(root=Path(project))
    start = asyncio.ensure_future(SessionSandbox.start(sandbox, policy, dict(os.environ), Path(log)))
    while len(processes_with(marker)) < 2:  # the fake bwrap and its child
        if start.done():
            sys.exit(f"the start ended: {start.exception()!r}")
        await asyncio.sleep(0.02)
    os.kill(os.getpid(), signal.SIGKILL)

asyncio.run(main())
"""


def test_a_sandbox_start_that_never_ends_ends_with_auger(tmp_path, project):
    """auger killed while its sandbox's bwrap has not let the holder run yet — and never would (a `bwrap`
    whose start hangs, it and a child of its): both end with auger, instead of running on."""
    marker = f"stuck-bwrap-{uuid.uuid4().hex[:8]}"
    bwrap = tmp_path / marker / "bwrap"
    bwrap.parent.mkdir()
    bwrap.write_text(f"#!/bin/sh\nsh -c 'sleep 300; :' {marker} &\nwait\n")
    bwrap.chmod(0o755)
    env = _importing_tests(dict(os.environ))
    try:
        done = subprocess.run([sys.executable, "-c", STUCK_START, str(bwrap), str(project), str(tmp_path / "log"),
                               marker], env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == -signal.SIGKILL, done.stderr
        deadline = time.monotonic() + 3
        while processes_with(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert processes_with(marker) == [], "the stuck bwrap outlived auger"
    finally:
        for pid in processes_with(marker):  # with its `sleep`: the fake is a process group of its own
            try:
                os.killpg(os.getpgid(pid), signal.SIGKILL)
            except OSError:
                pass
