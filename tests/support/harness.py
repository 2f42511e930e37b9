"""The test harness: a scripted mock model server and two ways to drive the engine — the library API
in-process (open_session, run_session, drive: built on engine.sessions.run_prompt), and the real
`auger` command as a subprocess (auger_cli) — plus small readers of what they produced."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from auger.config import Config, home_dirs, load_config
from auger.engine.session.sessions import SessionManager, run_prompt
from auger.engine.workspace import Workspace
from auger.models.registry import client_for
from auger.protocol import events as ev
from auger.protocol.ops import Shutdown
from auger.store.sqlite import SqliteStore
from tests.support.mock_openai import MockChatServer
from tests.support.schema_check import check_envelope

# No background titles, quick retries, and no language servers after edits (a test of diagnostics turns them
# on: starting a type checker costs a session seconds, which every other test would pay for nothing).
FAST = ["model_retry_base_delay=0.01", "model_retry_max_delay=0.05", "generate_titles=false", "diagnostics=false"]


@dataclass
class Run:
    """What one session produced: its events, and the objects to look deeper."""

    events: list[ev.Event] = field(default_factory=list)
    session_id: str = ""

    def of(self, kind: type) -> list:
        return [e for e in self.events if isinstance(e, kind)]

    @property
    def ended(self) -> ev.TurnEnded:
        ends = self.of(ev.TurnEnded)
        assert ends, f"no turn ended; events: {[e.TYPE for e in self.events]}"
        return ends[-1]


def make_config(*overrides: str) -> Config:
    # A missing user config inside the test's own AUGER_HOME (see isolated_home): never a path whose
    # existence depends on the machine.
    config = load_config([*FAST, *overrides], env={}, config_file=home_dirs()["config"] / "absent-config.toml")
    assert not config.warnings, config.warnings
    return config


async def open_session(project: Path, server: MockChatServer, db: Path, *overrides: str, resume: str | None = None,
                       interactive: bool = False, provider_tables: dict | None = None, tools=None,
                       tables: dict | None = None):
    """A session on the mock server; `tables` are config tables (`hooks`, `mcp_servers`…) as a config file gives."""
    config = make_config("provider=openai-compatible", f"base_url={server.base_url}", "model=mock-model", *overrides)
    if provider_tables:
        config.tables["providers"] = provider_tables
    config.tables.update(tables or {})
    client = client_for(config, env={"OPENAI_API_KEY": "sk-test"})
    store = SqliteStore(db)
    sessions = SessionManager(Workspace.open(project, config, tools), store)
    if resume:
        session = await sessions.resume(resume, client=client, interactive=interactive)
    else:
        session = await sessions.create(client, interactive=interactive)
    return session, store


async def drive(session, *prompts: str, turns: int | None = None, on_event=None, until: type | None = None) -> Run:
    """Submit each prompt after the previous turn ended; collect events until `turns` turns ended
    (default: one per prompt) and, if given, an `until` event arrived; then shut down."""
    run = Run(session_id=session.id)

    def collect(session, event) -> None:
        run.events.append(event)
        if on_event is not None:
            on_event(session, event)

    await run_prompt(session, *prompts, turns=turns, on_event=collect, wait_for=until)
    return run


class Follow:
    """A session's events read as a test goes: each is kept in `events`; `until(kind)` reads on to the next
    event of that kind (the `count`-th) and returns it."""

    def __init__(self, session) -> None:
        self.events: list[ev.Event] = []
        self._stream = session.events()

    async def until(self, kind: type | tuple[type, ...], count: int = 1, where=lambda event: True) -> ev.Event:
        seen = 0
        async for event in self._stream:
            self.events.append(event)
            if isinstance(event, kind) and where(event):
                seen += 1
                if seen >= count:
                    return event
        raise AssertionError(f"the session ended before {count} {kind} event(s)")


def follow_session(project: Path, server: MockChatServer, steps, *overrides: str, timeout: float = 60,
                   resume: str | None = None, tables: dict | None = None) -> list[ev.Event]:
    """Open a session (`overrides` as config, `tables` as a config file's tables; `resume` a stored one), run
    `await steps(session, follow)`, shut it down; every event it emitted, in order."""

    async def main() -> list[ev.Event]:
        session, store = await open_session(project, server, project.parent / "sessions.db", *overrides,
                                            resume=resume, tables=tables)
        follow = Follow(session)
        try:
            await asyncio.wait_for(steps(session, follow), timeout)
            session.submit(Shutdown())
            await session.wait_closed()
        finally:
            await store.aclose()
        return follow.events

    return asyncio.run(main())


def run_session(project: Path, server: MockChatServer, *prompts: str, db: Path | None = None,
                overrides: tuple[str, ...] = (), resume: str | None = None, turns: int | None = None,
                on_event=None, interactive: bool = False, until: type | None = None,
                provider_tables: dict | None = None, tools=None, tables: dict | None = None) -> Run:
    db = db or project.parent / "sessions.db"

    async def main() -> Run:
        session, store = await open_session(project, server, db, *overrides, resume=resume, interactive=interactive,
                                            provider_tables=provider_tables, tools=tools, tables=tables)
        try:
            return await asyncio.wait_for(drive(session, *prompts, turns=turns, on_event=on_event, until=until), 60)
        finally:
            await store.aclose()

    return asyncio.run(main())


def run_configured(project: Path, *overrides: str, env: dict[str, str], prompt: str = "hi") -> tuple[Run, list]:
    """One turn on the provider the overrides name, its client built from the config as `auger` builds it
    (models/registry.py client_for, `env` holding its key); the run and the items stored."""

    async def main() -> tuple[Run, list]:
        config = make_config(*overrides)
        store = SqliteStore(project.parent / "sessions.db")
        try:
            session = await SessionManager(Workspace.open(project, config), store).create(client_for(config, env=env))
            run = await asyncio.wait_for(drive(session, prompt), 30)
            return run, [stored.item for stored in await store.load_items(session.id)]
        finally:
            await store.aclose()

    return asyncio.run(main())


def hook_command(tmp_path: Path, name: str, body: str) -> str:
    """A hook command: a python script that gets the event as JSON on stdin (`event`)."""
    path = tmp_path / f"hook_{name}.py"  # never a stdlib module name: the script's dir comes first on sys.path
    path.write_text("import json, sys\nevent = json.load(sys.stdin)\n" + body)
    return f"{sys.executable} {path}"


def cli_env(home: Path, env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a real `auger` process: this one's without AUGER_*/OPENAI_*, an isolated
    AUGER_HOME, a test key, then `env`."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("AUGER_", "OPENAI_"))}
    full_env.update({"AUGER_HOME": str(home), "OPENAI_API_KEY": "sk-test"})
    full_env.update(env or {})
    return full_env


def auger_cli(*args: str, home: Path, cwd: Path | None = None, env: dict[str, str] | None = None,
              input: str | None = None, timeout: float = 60, python: Path | None = None) -> subprocess.CompletedProcess:
    """Run the real `auger` command in a subprocess with an isolated AUGER_HOME; `python`: another
    interpreter to run it with (the `plain_python` fixture's plain install: no PYTHONPATH then)."""
    full_env = cli_env(home, env)
    if python is not None:
        full_env.pop("PYTHONPATH", None)
    return subprocess.run([str(python or sys.executable), "-m", "auger", *args], cwd=cwd, env=full_env, input=input,
                          capture_output=True, text=True, timeout=timeout)


CONTEXT_TAGS = ("<environment_context>", "<user_instructions>")


def is_context(text: object) -> bool:
    """Engine-recorded context (environment, instructions), as opposed to the conversation proper."""
    return isinstance(text, str) and text.startswith(CONTEXT_TAGS)


def conversation(messages: list[dict]) -> list[dict]:
    """Chat messages without the system prompt and the engine's context messages."""
    return [m for m in messages if m["role"] != "system" and not is_context(m.get("content"))]


def json_events(stdout: str) -> list[dict]:
    """The JSON lines a command printed; those with a `type` (the event envelopes of `--json` runs, as
    opposed to e.g. `auger sessions --json` rows) are checked against the protocol schema."""
    lines = [json.loads(line) for line in stdout.splitlines() if line.strip()]
    for line in lines:
        if isinstance(line, dict) and "type" in line:
            check_envelope(line)
    return lines


def process_alive(pid: int) -> bool:
    """True while `pid` runs; a zombie counts as dead."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def dies_soon(pid: int, within: float = 2.0) -> bool:
    """True once `pid` is gone; a signalled process may take a scheduling slice to die on a busy machine."""
    import time

    deadline = time.monotonic() + within
    while process_alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True
