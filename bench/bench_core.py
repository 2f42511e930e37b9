"""Engine core benchmark: start-up, time to first model request, per-step overhead, memory, request size.

Runs the real `auger` command against the scripted mock server (zero latency) on
loopback and prints a table. Not a test: nothing here is asserted.

Beside auger's step it measures mini-swe-agent's (PyPI `mini-swe-agent`) on the same three-step task
against the same mock server, reached through litellm as an `openai/` model with `api_base`; its only
tool is bash, so the steps are `printf … > hello.py`, `cat hello.py`, `echo ok`, then its own way to
finish (`echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`). Both are measured the same way, from the first
model request to the fourth, over three steps: auger with its sandbox and snapshots on, mini-swe-agent
with its default environment (commands as plain subprocesses, nothing recorded but its trajectory) and
with its bubblewrap one. auger's step with `diagnostics=false` and mini-swe-agent's in its default
environment run one after the other, round by round, so a shared machine's drift (its speed moves by a
fifth within minutes) moves both alike and not their ratio. auger's step is shown twice: as configured
by default, where the write of hello.py waits (up to `diagnostics_wait`) for what a Python language
server found in it when one is installed, and with `diagnostics=false`, which mini-swe-agent has no counterpart of.

mini-swe-agent is installed into a venv of its own in the benchmark's temp dir (never into auger's);
AUGER_BENCH_MINI_VENV names an existing one to reuse. When it cannot be installed or run, the table says
why on its row.

    python bench/bench_core.py [--runs N] [--no-mini]
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the tests' mock server and MCP server

from tests.support.mock_openai import MockChatServer, Reply, ToolCall  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TARGETS: dict[str, tuple[float | None, str]] = {
    "cold start: auger --version": (0.1, "s"),
    "exec: spawn -> first model request": (0.2, "s"),
    "exec: the same with sandbox=off": (None, "s"),
    "engine overhead per tool step": (0.02, "s"),
    "the same step with diagnostics=false": (None, "s"),
    "mini-swe-agent per tool step (local env)": (None, "s"),
    "mini-swe-agent per tool step (bubblewrap)": (None, "s"),
    "peak RSS of a short exec": (60.0, "MB"),
    "first request size (all tools)": (12.0, "KB"),
    "exec with 2 stdio MCP servers: first request": (None, "s"),
    "HTTPS client ready, TLS context built inline": (None, "s"),
    "HTTPS client ready, TLS context built ahead": (None, "s"),
    "sandboxed shell command (true), bwrap": (0.03, "s"),
    "sandboxed shell command (true), landlock": (0.03, "s"),
}


def auger_cmd() -> list[str]:
    exe = shutil.which("auger", path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    return [exe] if exe else [sys.executable, "-m", "auger"]


def env_for(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AUGER_", "OPENAI_"))}
    env.update({"AUGER_HOME": str(home), "OPENAI_API_KEY": "sk-bench"})
    return env


def run_child(cmd: list[str], env: dict[str, str], cwd: Path) -> tuple[float, int, float]:
    """(wall seconds, exit status, peak RSS in MB) of one child process."""
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return time.perf_counter() - started, proc.returncode, usage.ru_maxrss / 1024


def three_step_script(arrivals: list[float]) -> list:
    """write → read → shell → answer: the same small task used to compare agents."""

    def stamp(reply):
        def step(body):
            arrivals.append(time.perf_counter())
            return reply
        return step

    return [
        stamp(Reply(tool_calls=[ToolCall("write_file", {"path": "hello.py", "content": "print('hello')\n"})])),
        stamp(Reply(tool_calls=[ToolCall("read_file", {"path": "hello.py"})])),
        stamp(Reply(tool_calls=[ToolCall("shell", {"command": "echo ok"})])),
        stamp(Reply(text="done")),
    ]


def precompile() -> None:
    """Measure auger as installed: `pip install` writes bytecode, but an editable checkout under
    PYTHONDONTWRITEBYTECODE never would, and every run would pay to compile every module."""
    import compileall

    import auger

    compileall.compile_dir(os.path.dirname(auger.__file__), quiet=1)


STEP_RATIO_TARGET = 0.8  # auger's step against mini-swe-agent's (local env)

# One mini-swe-agent run, in its own venv: argv = base URL, project dir, environment ("local"|"bubblewrap").
_MINI_DRIVER = """
import sys
from pathlib import Path
import yaml
import minisweagent
from minisweagent.agents.default import DefaultAgent
from minisweagent.models.litellm_model import LitellmModel
base_url, project, kind = sys.argv[1:4]
config = yaml.safe_load((Path(minisweagent.__file__).parent / "config" / "mini.yaml").read_text())
model = LitellmModel(model_name="openai/bench", model_kwargs={"api_base": base_url, "api_key": "sk-bench"},
                     cost_tracking="ignore_errors")
if kind == "bubblewrap":
    from minisweagent.environments.extra.bubblewrap import BubblewrapEnvironment
    env = BubblewrapEnvironment(cwd=project)
else:
    from minisweagent.environments.local import LocalEnvironment
    env = LocalEnvironment(cwd=project)
agent = DefaultAgent(model, env, system_template=config["agent"]["system_template"],
                     instance_template=config["agent"]["instance_template"], cost_limit=0)
result = agent.run("write hello.py, read it, run echo")
sys.exit(0 if result.get("exit_status") == "Submitted" else 1)
"""


def mini_script(arrivals: list[float]) -> list:
    """three_step_script's task in mini-swe-agent's one tool, bash."""

    def stamp(command: str):
        def step(body):
            arrivals.append(time.perf_counter())
            return Reply(text="next", tool_calls=[ToolCall("bash", {"command": command})])
        return step

    return [stamp("printf \"print('hello')\\n\" > hello.py"), stamp("cat hello.py"), stamp("echo ok"),
            stamp("echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT")]


@functools.cache
def mini_python(tmp_path: Path) -> tuple[str | None, str]:
    """(the python of a venv holding mini-swe-agent, or None; why not)."""
    given = os.environ.get("AUGER_BENCH_MINI_VENV")
    venv = Path(given) if given else tmp_path / "mini-venv"
    python = venv / "bin" / "python"
    if not python.exists():
        made = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True, text=True)
        if made.returncode != 0:
            return None, f"cannot make a venv: {made.stderr.strip()[-200:]}"
    if subprocess.run([str(python), "-c", "import minisweagent"], capture_output=True).returncode != 0:
        got = subprocess.run([str(python), "-m", "pip", "install", "-q", "mini-swe-agent"], capture_output=True,
                             text=True, timeout=900)
        if got.returncode != 0:
            return None, f"pip install mini-swe-agent failed: {got.stderr.strip().splitlines()[-1:]}"
    return str(python), ""


def mini_steps(tmp_path: Path, runs: int, kind: str) -> tuple[list[float], str]:
    """mini-swe-agent's time per tool step (first model request to fourth, over three), or why not."""
    python, why = mini_python(tmp_path)
    if python is None:
        return [], why
    project = tmp_path / f"mini-project-{kind}"
    project.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "PYTHONPATH", "LITELLM_"))}
    env.update({"MSWEA_CONFIGURED": "true", "MSWEA_SILENT_STARTUP": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True",
                "MSWEA_GLOBAL_CONFIG_DIR": str(tmp_path / "mini-config")})
    times = []
    for _ in range(runs):
        arrivals: list[float] = []
        with MockChatServer(mini_script(arrivals)) as server:
            done = subprocess.run([python, "-c", _MINI_DRIVER, server.base_url, str(project), kind], env=env,
                                  cwd=project, capture_output=True, text=True, timeout=300)
        if done.returncode != 0 or len(arrivals) != 4:
            tail = (done.stderr.strip().splitlines() or ["no output"])[-1][:200]
            return [], f"mini-swe-agent run failed (exit {done.returncode}, {len(arrivals)} requests): {tail}"
        times.append((arrivals[-1] - arrivals[0]) / 3)
        (project / "hello.py").unlink(missing_ok=True)
    return times, ""


def bench(runs: int, mini: bool = True) -> tuple[dict[str, list[float]], dict[str, str]]:
    """The measures, and why any of them could not be had."""
    precompile()
    results: dict[str, list[float]] = {k: [] for k in TARGETS}
    missing: dict[str, str] = {}
    cmd = auger_cmd()
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        home, project = tmp_path / "home", tmp_path / "project"
        home.mkdir()
        project.mkdir()
        env = env_for(home)
        for _ in range(runs):
            wall, code, _ = run_child([*cmd, "--version"], env, project)
            assert code == 0
            results["cold start: auger --version"].append(wall)
        for _ in range(runs):
            arrivals: list[float] = []
            with MockChatServer(three_step_script(arrivals)) as server:
                started = time.perf_counter()
                wall, code, rss = run_child([*cmd, "exec", "--base-url", server.base_url, "-m", "bench",
                                             "write hello.py, read it, run echo"], env, project)
                if code != 0 or len(arrivals) != 4:
                    raise SystemExit(f"benchmark run failed (exit {code}, {len(arrivals)} requests)")
                results["exec: spawn -> first model request"].append(arrivals[0] - started)
                results["engine overhead per tool step"].append((arrivals[-1] - arrivals[0]) / 3)
                results["peak RSS of a short exec"].append(rss)
                results["first request size (all tools)"].append(len(server.chat_requests[0].raw) / 1024)
            (project / "hello.py").unlink()
        # auger's step and mini-swe-agent's, one run of each in turn: the ratio of their medians is not moved
        # by the machine getting busier or quieter between the two (a shared machine's speed drifts by 20 %)
        ours, theirs = "the same step with diagnostics=false", "mini-swe-agent per tool step (local env)"
        for _ in range(runs):
            results[ours].append(exec_step(cmd, env, project, "-c", "diagnostics=false"))
            if mini and theirs not in missing:
                got, why = mini_steps(tmp_path, 1, "local")
                results[theirs] += got
                if why:
                    missing[theirs], results[theirs] = why, []
        if not mini:
            missing[theirs] = "--no-mini"
        results["exec: the same with sandbox=off"] = [first_request(cmd, env, project, "-c", "sandbox=off")
                                                      for _ in range(runs)]
        results["exec with 2 stdio MCP servers: first request"] = first_request_with_mcp(cmd, tmp_path, project, runs)
        for label, times in https_client_ready(env, project, runs).items():
            results[f"HTTPS client ready, TLS context built {label}"] = times
        for kind in ("bwrap", "landlock"):
            results[f"sandboxed shell command (true), {kind}"] = sandboxed_command_times(kind, project, runs)
        name = "mini-swe-agent per tool step (bubblewrap)"
        results[name], why = mini_steps(tmp_path, runs, "bubblewrap") if mini else ([], "--no-mini")
        if why:
            missing[name] = why
    return results, missing


def exec_step(cmd: list[str], env: dict[str, str], project: Path, *options: str) -> float:
    """auger's time per tool step (first model request to fourth, over three) of the three-step task."""
    arrivals: list[float] = []
    with MockChatServer(three_step_script(arrivals)) as server:
        _, code, _ = run_child([*cmd, "exec", "--base-url", server.base_url, "-m", "bench", *options,
                                "write hello.py, read it, run echo"], env, project)
    (project / "hello.py").unlink(missing_ok=True)
    if code != 0 or len(arrivals) != 4:
        raise SystemExit(f"benchmark run failed (exit {code}, {len(arrivals)} requests) with {' '.join(options)}")
    return (arrivals[-1] - arrivals[0]) / 3


def first_request(cmd: list[str], env: dict[str, str], project: Path, *options: str) -> float:
    """Spawn → first model request of `auger exec OPTIONS hi`."""
    arrivals: list[float] = []

    def answer(body: dict) -> Reply:
        arrivals.append(time.perf_counter())
        return Reply(text="done")

    with MockChatServer([answer]) as server:
        started = time.perf_counter()
        _, code, _ = run_child([*cmd, "exec", "--base-url", server.base_url, "-m", "bench", *options, "hi"], env,
                               project)
    if code != 0 or not arrivals:
        raise SystemExit(f"benchmark run failed (exit {code}) with {' '.join(options)}")
    return arrivals[0] - started


def first_request_with_mcp(cmd: list[str], tmp_path: Path, project: Path, runs: int) -> list[float]:
    """Spawn → first model request when the user config names two stdio MCP servers (the tests' own
    server, run twice under two names): what starting them in parallel costs before the first request."""
    home = tmp_path / "home-mcp"
    home.mkdir()
    tables = "".join(
        f'[mcp_servers.{name}]\ncommand = "{sys.executable}"\nargs = ["-m", "tests.support.mcp_server"]\n'
        f'cwd = "{ROOT}"\ntrusted = true\nenv = {{ MCP_TEST_SERVER_NAME = "{name}" }}\n\n' for name in ("one", "two"))
    (home / "config.toml").write_text(tables)
    env = env_for(home)
    times = []
    for _ in range(runs):
        arrivals: list[float] = []
        with MockChatServer([lambda body: arrivals.append(time.perf_counter()) or Reply(text="done")]) as server:
            started = time.perf_counter()
            _, code, _ = run_child([*cmd, "exec", "--base-url", server.base_url, "-m", "bench", "hi"], env, project)
            tools = [t["function"]["name"] for t in server.chat_requests[0].body.get("tools", [])] if arrivals else []
            if code != 0 or not arrivals or not any(t.startswith("mcp__two__") for t in tools):
                raise SystemExit(f"MCP benchmark run failed (exit {code}, tools {tools})")
            times.append(arrivals[0] - started)
    return times


_HTTPS_CLIENT = """
import sys, time
started = time.perf_counter()
from auger.config import load_config
config = load_config(["base_url=https://api.example.test/v1", "model=m", "provider=openai-compatible"], {})
if sys.argv[1] == "ahead":
    from auger.models.registry import prepare_tls
    prepare_tls(config)
import auger.engine.session.sessions, auger.engine.workspace, auger.store.sqlite
from auger.models.registry import client_for
client_for(config, env={"OPENAI_API_KEY": "k"})
print(time.perf_counter() - started)
"""


def https_client_ready(env: dict[str, str], project: Path, runs: int) -> dict[str, list[float]]:
    """Process start (after the interpreter's) → engine imported and an HTTPS provider's client made, with
    certifi's CA bundle loaded inline, or on the thread `exec` starts before its imports (models/tls.py).
    The two alternate, so a busy moment of the machine costs both alike."""
    env = {k: v for k, v in env.items() if k not in ("SSL_CERT_FILE", "SSL_CERT_DIR")}
    times: dict[str, list[float]] = {"inline": [], "ahead": []}
    for _ in range(runs):
        for label, found in times.items():
            found.append(float(subprocess.run([sys.executable, "-c", _HTTPS_CLIENT, label], env=env, cwd=project,
                                              capture_output=True, text=True, check=True).stdout))
    return times


def sandboxed_command_times(kind: str, project: Path, runs: int) -> list[float]:
    """Wall time of `true` through the shell tool in a session's sandbox (proxy network on):
    what every sandboxed command costs on top of the command itself."""
    import asyncio

    from auger.config import Config
    from auger.policy.confinement import confine
    from auger.tools.base import SessionToolState, ToolContext
    from auger.tools.shell import SHELL

    async def measure() -> list[float]:
        scratch = project.parent / f"scratch-{kind}"
        home = project.parent / "auger-home"
        dirs = {"config": home, "data": home, "cache": home / "cache"}
        confinement = await confine(Config(sandbox=kind), project, scratch, (), print, dirs=dirs)
        if confinement is None:
            return [float("nan")]
        ctx = ToolContext(root=project, state=SessionToolState(scratch_dir=scratch), call_id="bench",
                          archive=None, env=dict(os.environ), sandbox=confinement)
        times = []
        try:
            for _ in range(runs * 2):
                started = time.perf_counter()
                result = await SHELL.handler({"command": "true"}, ctx)
                times.append(time.perf_counter() - started)
                assert result.ok, result.output
        finally:
            await confinement.close()
        return times[1:]

    return asyncio.run(measure())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--no-mini", action="store_true", help="do not install and measure mini-swe-agent")
    args = parser.parse_args()
    results, missing = bench(args.runs, mini=not args.no_mini)
    print(f"auger engine core benchmark ({args.runs} runs each, median; {sys.platform}, "
          f"{os.cpu_count()} cpus, python {sys.version.split()[0]})")
    print(f"{'measure':<46} {'median':>9} {'min':>9} {'max':>9} {'target':>9}")
    for name, values in results.items():
        target, unit = TARGETS[name]
        fmt = (lambda v: f"{v:.3f}") if unit == "s" else (lambda v: f"{v:.1f}")
        goal = "-" if target is None else "<= " + fmt(target) + unit
        if not values:
            print(f"{name:<46} {'-':>9}  not measured: {missing.get(name, 'no value')}")
            continue
        print(f"{name:<46} {fmt(statistics.median(values)):>9} {fmt(min(values)):>9} {fmt(max(values)):>9} "
              f"{goal:>9}")
    theirs = results["mini-swe-agent per tool step (local env)"]
    for label, ours in (("", results["engine overhead per tool step"]),
                        (" (diagnostics=false)", results["the same step with diagnostics=false"])):
        if ours and theirs:
            ratio = statistics.median(ours) / statistics.median(theirs)
            verdict = "met" if ratio <= STEP_RATIO_TARGET else "NOT met"
            print(f"auger's step{label} / mini-swe-agent's (local env): {ratio:.2f} "
                  f"(target <= {STEP_RATIO_TARGET}): {verdict}")


if __name__ == "__main__":
    main()
