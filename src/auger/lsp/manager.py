"""A session's language servers as a managed resource: each started on first need, shared by the session's
turns and sub-agents, started again when it died, stopped when unused for `lsp_idle_timeout` and when the
session ends.

Which servers a file gets: those configured for its extension whose program is found (servers.py), the
first of each `group`. A language with servers auger knows but none found is told once, in one line
naming what to install; a server that cannot start is told once, and after three failed starts it is not
tried again in this session. Nothing here raises to a caller for a server's sake: a missing or broken
server is a notice, never a failure.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from pathlib import Path
from typing import Callable

from auger.lsp.client import LanguageServer, ServerFailed
from auger.lsp.servers import LANGUAGES, ServerSpec, find_program, language_name, search_path
from auger.tools.base import CommandSandbox

log = logging.getLogger("auger.lsp")

MAX_STARTS = 3  # failed or dead starts of one server before the session stops trying it


class LanguageServers:
    def __init__(self, specs: list[ServerSpec], root: Path, *, sandbox: CommandSandbox | None,
                 env: dict[str, str] | None, scratch: Path, idle_timeout: float = 600.0) -> None:
        self.specs = specs
        self.root = root
        self.sandbox = sandbox
        self.env = dict(env if env is not None else os.environ)
        self.scratch = scratch
        self.idle_timeout = idle_timeout
        self._path = search_path(env)
        self._programs: dict[str, str | None] = {}  # server name -> its program, looked up once
        self._running: dict[str, LanguageServer] = {}
        self._starting: dict[str, asyncio.Task[LanguageServer]] = {}
        self._failures: dict[str, int] = {}
        self._used: dict[str, float] = {}
        self._told: set[str] = set()
        self._idle: asyncio.TimerHandle | None = None
        self._closed = False
        self.starts = 0  # servers started in this session (for tests and the measurements)
        self.notice: Callable[[str], None] = lambda message: None  # set by whoever reports (once per cause)

    # --- which servers ---------------------------------------------------------------------------

    def program(self, spec: ServerSpec) -> str | None:
        if spec.name not in self._programs:
            self._programs[spec.name] = find_program(spec.command[0], self._path) if spec.command else None
        return self._programs[spec.name]

    def specs_for(self, rel: str) -> list[ServerSpec]:
        """The servers that would read this file, found on this machine, one per group."""
        chosen, groups = [], set()
        for spec in self.specs:
            if spec.serves(rel) is None or (spec.group and spec.group in groups) or self.program(spec) is None:
                continue
            if self._failures.get(spec.name, 0) >= MAX_STARTS:
                continue
            chosen.append(spec)
            if spec.group:
                groups.add(spec.group)
        if not chosen:
            self._tell_missing(rel)
        return chosen

    def extensions(self, spec: ServerSpec) -> frozenset[str]:
        return frozenset(ext for language in spec.languages for ext in LANGUAGES.get(language, ())) | \
            frozenset(spec.extensions)

    def available(self) -> bool:
        """Whether any server at all could run here (else nothing needs looking at)."""
        return any(self.program(spec) is not None for spec in self.specs)

    def _tell_missing(self, rel: str) -> None:
        known = [spec for spec in self.specs if spec.serves(rel) is not None]
        if not known:
            return
        language = known[0].serves(rel) or ""
        key = f"missing:{language_name(language)}"
        if key in self._told:
            return
        self._told.add(key)
        gave_up = [spec.name for spec in known if self._failures.get(spec.name, 0) >= MAX_STARTS]
        if gave_up:
            self.notice(f"no {language_name(language)} language server: {', '.join(gave_up)} failed "
                        f"{MAX_STARTS} times in this session")
            return
        how = "; ".join(f"{spec.command[0]} ({spec.install})" if spec.install else spec.command[0]
                        for spec in known[:3])
        self.notice(f"no {language_name(language)} language server found: install one of {how}, or name one in "
                    "[lsp.NAME] command = [...]")

    # --- running ---------------------------------------------------------------------------------

    def running(self, spec: ServerSpec) -> LanguageServer | None:
        """The server if it runs now (no start)."""
        server = self._running.get(spec.name)
        return server if server is not None and server.alive else None

    def start(self, spec: ServerSpec) -> asyncio.Future[LanguageServer]:
        """The server, started if it is not running (one start shared by every caller; a dead one is
        started again). The future fails with ServerFailed; cancelling a wait for it (shielded) lets the
        start go on."""
        self._used[spec.name] = time.monotonic()
        self._arm_idle()
        server = self._running.get(spec.name)
        if server is not None and server.alive:
            done: asyncio.Future[LanguageServer] = asyncio.get_running_loop().create_future()
            done.set_result(server)
            return done
        task = self._starting.get(spec.name)
        if task is None or task.done():
            task = self._starting[spec.name] = asyncio.create_task(self._start(spec), name=f"lsp-start-{spec.name}")
            task.add_done_callback(lambda t: t.cancelled() or t.exception())  # never "exception was not retrieved"
        return task

    async def _start(self, spec: ServerSpec) -> LanguageServer:
        if self._closed:
            raise ServerFailed("the session has ended")
        dead = self._running.pop(spec.name, None)
        if dead is not None:
            why = dead.failure() or "it stopped"
            await dead.stop()
            self._failure(spec, f"{spec.name} stopped ({why}); starting it again")
        program = self.program(spec)
        if program is None:
            raise ServerFailed(f"{spec.command[0]} is not installed")
        server = LanguageServer(spec, program, self.root, sandbox=self.sandbox, env=self.env, scratch=self.scratch)
        try:
            await server.start()
        except ServerFailed as exc:
            self._failure(spec, str(exc))
            raise
        except asyncio.CancelledError:
            await server.stop()
            raise
        self.starts += 1
        if self._closed:
            await server.stop()
            raise ServerFailed("the session has ended")
        self._running[spec.name] = server
        return server

    def _failure(self, spec: ServerSpec, message: str) -> None:
        self._failures[spec.name] = self._failures.get(spec.name, 0) + 1
        log.debug("language server %s: %s", spec.name, message)
        if f"failed:{spec.name}" not in self._told:
            self._told.add(f"failed:{spec.name}")
            self.notice(message)

    def used(self, spec: ServerSpec) -> None:
        self._used[spec.name] = time.monotonic()

    # --- idle and the end ------------------------------------------------------------------------

    def _arm_idle(self) -> None:
        if self._idle is not None or self.idle_timeout <= 0 or self._closed:
            return
        self._idle = asyncio.get_running_loop().call_later(self.idle_timeout, self._check_idle)

    def _check_idle(self) -> None:
        self._idle = None
        now = time.monotonic()
        for name, server in list(self._running.items()):
            if now - self._used.get(name, now) >= self.idle_timeout and not server.lock.locked():
                del self._running[name]
                asyncio.ensure_future(server.stop())
        if self._running:
            self._arm_idle()

    @property
    def live(self) -> list[LanguageServer]:
        return [server for server in self._running.values() if server.alive]

    async def close(self) -> None:
        self._closed = True
        if self._idle is not None:
            self._idle.cancel()
        for task in self._starting.values():
            task.cancel()
        await asyncio.gather(*self._starting.values(), return_exceptions=True)
        running, self._running = list(self._running.values()), {}
        await asyncio.gather(*(server.stop() for server in running), return_exceptions=True)
