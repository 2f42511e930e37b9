"""`auger demo`: watch the real engine fix a bug, with no API key and no network.

A bundled sample project (`sample/`, a tiny library with a failing unittest) is copied into a fresh
temporary directory, and the real engine — Workspace, Session, tools, tool runtime, sandbox, SQLite store —
runs one turn in it. Only the model is replaced: a `ReplayClient` plays the bundled `cassette.jsonl`,
whose replies run the tests, grep, read the file, edit the fix and run the tests again. Everything
the demo shows is real tool output; nothing outside the temporary directory is touched (AUGER_HOME
points into it, and no user config file or environment variable is read).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, TextIO

DEMO_DIR = Path(__file__).resolve().parent
SAMPLE_DIR = DEMO_DIR / "sample"
CASSETTE = DEMO_DIR / "cassette.jsonl"
PROJECT_NAME = "booklist"
PROMPT = ("The shelf drops its last page when that page is only partly filled: 25 books at 10 per page show "
          "as 2 pages. Find the bug and fix it.")
LABEL = "auger demo — a scripted session replayed from a cassette; no model is called"
TEST_ARGS = ["-m", "unittest", "discover", "-s", "tests", "-q"]


def run_demo(*, json_output: bool = False, keep: bool = False, out: TextIO = sys.stdout, err: TextIO = sys.stderr,
             delay: float = 0.02) -> int:
    """Run the scripted demo; 0 when the turn completed and the sample's tests pass afterwards, else 1.

    `json_output` prints the session's events as JSON lines on `out` (labels go to `err`); `keep`
    leaves the temporary directory (and the fixed project in it) in place; `delay` is the pause in
    seconds between the replayed model's stream events.
    """
    import asyncio

    info = out if not json_output else err  # JSON output keeps `out` machine-readable
    style = _Style(info)
    tmp = Path(tempfile.mkdtemp(prefix="auger-demo-"))
    project = tmp / PROJECT_NAME
    saved_home = os.environ.get("AUGER_HOME")
    try:
        shutil.copytree(SAMPLE_DIR, project, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        home = tmp / "home"
        home.mkdir()
        os.environ["AUGER_HOME"] = str(home)  # rules, skills, config dir: all inside the temp dir
        print(style.bold(LABEL), file=info, flush=True)
        render = _JsonRenderer(out) if json_output else _PlainRenderer(out, style)
        try:
            ended = asyncio.run(_session(project, tmp / "sessions.db", home, render, delay))
        except Exception as exc:  # the demo is a user-facing command: one line, not a traceback
            print(f"auger demo: failed: {type(exc).__name__}: {exc}", file=err)
            return 1
        if ended is None:
            print("auger demo: the session ended without finishing its turn", file=err)
            return 1
        if ended.reason != "complete":
            print(f"auger demo: the scripted turn ended with {ended.reason}: {ended.message or 'no reason given'}",
                  file=err)
            return 1
        check = _run_tests(project)
        if check.returncode != 0:
            last = (check.stderr.strip().splitlines() or ["no output"])[-1]
            print(f"auger demo: the sample project's tests still fail after the session ({last})", file=err)
            return 1
        print(style.green("✓ The sample project's tests now pass (checked by running them again after the session)."),
              file=info)
        if keep:
            print(f"  The fixed project is kept in {project}", file=info)
        print(style.bold(LABEL.replace("is called", "was called")), file=info)
        print('  Run it for real: export OPENAI_API_KEY=... (or use --provider ollama) and '
              'auger exec "describe the task"', file=info, flush=True)
        return 0
    finally:
        if saved_home is None:
            os.environ.pop("AUGER_HOME", None)
        else:
            os.environ["AUGER_HOME"] = saved_home
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)


async def _session(project: Path, db: Path, home: Path, render: Any, delay: float):
    """One headless turn of the real engine, driven by the cassette; returns its TurnEnded event."""
    from auger.config import load_config
    from auger.engine.session.sessions import SessionManager, run_prompt
    from auger.engine.workspace import Workspace
    from auger.models.replay import ReplayClient, load_cassette
    from auger.protocol.events import TurnEnded
    from auger.store.sqlite import SqliteStore

    # Only explicit values: whatever the user's config file or environment says does not apply.
    config = load_config(["mode=auto", "approve_all=true", "generate_titles=false"], env={},
                         config_file=home / "config.toml")
    config.shell_env_set = _python3_path()
    client = ReplayClient(replies=load_cassette(CASSETTE), delay=delay)
    store = SqliteStore(db)
    ended: TurnEnded | None = None
    try:
        session = await SessionManager(Workspace.open(project, config), store).create(client)
        ended = (await run_prompt(session, PROMPT, on_event=lambda _session, event: render(event)))[-1]
    finally:
        await store.aclose()
    return ended


def _python3_path() -> dict[str, str]:
    """The cassette's commands run `python3`; when none is on PATH, offer this interpreter's directory."""
    bindir = os.path.dirname(sys.executable)
    if shutil.which("python3") is None and os.path.exists(os.path.join(bindir, "python3")):
        return {"PATH": os.pathsep.join(p for p in (bindir, os.environ.get("PATH", "")) if p)}
    return {}


def _run_tests(project: Path) -> subprocess.CompletedProcess:
    """The sample's tests, run by this Python outside the engine: the demo's own proof of the fix."""
    return subprocess.run([sys.executable, *TEST_ARGS], cwd=project, capture_output=True, text=True, timeout=120)


class _Style:
    """ANSI styling when the stream is a terminal, plain text otherwise."""

    def __init__(self, stream: TextIO) -> None:
        isatty = getattr(stream, "isatty", None)
        self.on = bool(isatty and isatty()) and not os.environ.get("NO_COLOR")

    def _wrap(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.on else text

    def bold(self, text: str) -> str:
        return self._wrap("1", text)

    def dim(self, text: str) -> str:
        return self._wrap("2", text)

    def green(self, text: str) -> str:
        return self._wrap("32", text)

    def yellow(self, text: str) -> str:
        return self._wrap("33", text)


class _JsonRenderer:
    def __init__(self, out: TextIO) -> None:
        self.out = out

    def __call__(self, event: Any) -> None:
        import json

        self.out.write(json.dumps(event.to_json(), ensure_ascii=False) + "\n")
        self.out.flush()


class _PlainRenderer:
    """Progress as it happens: the model's text as it streams, ▸ each tool call, the first line of its result."""

    KEY_ARGUMENTS = ("command", "pattern", "path", "query")

    def __init__(self, out: TextIO, style: _Style) -> None:
        self.out = out
        self.style = style
        self.streaming = False  # a model message is being written

    def _line(self, text: str) -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def __call__(self, event: Any) -> None:
        from auger.protocol import events as ev

        s = self.style
        if isinstance(event, ev.SessionConfigured):
            self._line(f"  project  {event.cwd}  (a fresh copy of a small sample project with a failing test)")
            self._line(f"  sandbox  {event.sandbox}")
            self._line(f"  task     {PROMPT}\n")
        elif isinstance(event, ev.MessageDelta):
            self.out.write(event.delta)
            self.out.flush()
            self.streaming = True
        elif isinstance(event, ev.AgentMessage):
            if self.streaming:
                self._line("")
            else:
                self._line(event.text)
            self.streaming = False
        elif isinstance(event, ev.ToolCallStarted):
            args = event.arguments if isinstance(event.arguments, dict) else {}
            detail = next((str(args[k]) for k in self.KEY_ARGUMENTS if args.get(k)), "")
            self._line(s.bold(f"▸ {event.name}") + f" {detail[:100]}".rstrip())
        elif isinstance(event, ev.ToolCallEnded):
            if event.name != "read_file" or not event.ok:  # a file's first line says nothing
                first = (event.output.strip().splitlines() or [""])[0]
                self._line(s.dim(f"  {first[:120]}"))
        elif isinstance(event, (ev.WarningEvent, ev.LoopDetected)):
            text = event.message if isinstance(event, ev.WarningEvent) else f"{event.tool} repeated {event.repeats}x"
            self._line(s.yellow(f"! {text}"))
        elif isinstance(event, ev.TurnEnded):
            self._line("")
