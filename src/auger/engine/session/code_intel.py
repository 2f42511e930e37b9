"""A session's code intelligence (lsp/): the diagnostics told after each change, the `code_nav` and `repo_map`
tools, and the repository map an unfamiliar large project's first turn may start with.

Nothing of lsp/ is loaded, and no language server starts, until something needs it: the first call that
may change a file a server reads, or the first code_nav or repo_map call. A session that does neither
pays nothing but the two tools' schemas.

The diagnostics run at two points of the tool runtime (engine/turn/tool_runtime.py): before a file tool runs,
its files' texts are read (the baseline of its change); after every call that ran, a call that may have
changed files gets what its change introduced appended to its result (typed in `result.diagnostics`, which
`tool_call_ended` carries), and any call gets what a check that outlasted its own call found since. Which
files a command or a program changed comes from the turn's snapshots (engine/turn/changes.py
`changed_since`), with their content before; a session without snapshots (`snapshots = false`, pending
mode) checks file tools only. Sub-agents working in the session's tree share all of it; one in a worktree
of its own has no diagnostics, and its code_nav and repo_map read its worktree by name only.
"""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from auger.config import Config
from auger.policy.types import Effect
from auger.tools.base import CommandSandbox, ToolContext, ToolError, ToolResult
from auger.tools.router import ToolRouter

if TYPE_CHECKING:
    from auger.engine.turn.tool_runtime import PlannedCall, ToolRuntime
    from auger.engine.turn.changes import ChangeTracker
    from auger.lsp.diagnostics import ChangeDiagnostics
    from auger.lsp.files import Project
    from auger.lsp.manager import LanguageServers
    from auger.secrets.protected import ProtectedFiles

log = logging.getLogger("auger.lsp")

FILE_TOOLS = frozenset({"write_file", "edit_file", "apply_patch"})
REPO_MAP = "repo_map"  # the kind of the context message that carries the first turn's map
AUTO_MAP_FILES = 300  # source files the map must know for a project to count as large
AUTO_MAP_WAIT = 3.0  # seconds the first turn waits for a map still being built (then it goes without)


class SessionCodeIntel:
    """What a session's code intelligence holds: its language servers and diagnostics, made at first need."""

    def __init__(self, config: Config, root: Path, *, sandbox: CommandSandbox | None, env: dict[str, str] | None,
                 scratch: Path, changes: ChangeTracker | None, protected: ProtectedFiles | None = None) -> None:
        self.config = config
        self.root = root
        self.protected = protected  # the session's protected files: never read, sent to a server or mapped
        self.sandbox = sandbox
        self.env = env
        self.scratch = scratch
        self.changes = changes
        self.warnings: list[str] = []  # problems in [lsp] tables, told once at the first need
        self._servers: LanguageServers | None = None
        self._diagnostics: ChangeDiagnostics | None = None
        self._maps: dict[Path, Any] = {}  # root -> its RepoMap (lsp/repo_map.py)
        self._warming: asyncio.Task[str] | None = None  # repo_map = "auto": the first turn's map, being built

    @property
    def servers(self) -> LanguageServers:
        if self._servers is None:
            from auger.lsp.manager import LanguageServers
            from auger.lsp.servers import configured_servers

            specs, problems = configured_servers(self.config.tables)
            self.warnings += problems
            self._servers = LanguageServers(specs, self.root, sandbox=self.sandbox, env=self.env,
                                            scratch=self.scratch, idle_timeout=self.config.lsp_idle_timeout)
        return self._servers

    @property
    def diagnostics(self) -> ChangeDiagnostics:
        if self._diagnostics is None:
            from auger.lsp.diagnostics import ChangeDiagnostics

            self._diagnostics = ChangeDiagnostics(self.servers, self.project(self.root), self.config.diagnostics_wait)
            self._diagnostics.tell(self.warnings)
        return self._diagnostics

    # --- the tool runtime's hooks ----------------------------------------------------------------

    async def before_mutation(self, call: PlannedCall) -> None:
        """Before a file tool: the texts of the files it names (the baseline of its change)."""
        if call.tool in FILE_TOOLS:
            rels = self._paths(call.tool, call.args)
            if rels:
                self.diagnostics.remember(call.call_id, rels)

    async def after_call(self, call: PlannedCall, result: ToolResult) -> None:
        """Append what the call's change introduced, and what earlier checks found since."""
        from auger.lsp.diagnostics import Report, render

        report: Report | None = None
        # a file tool that failed changed nothing (they are all or nothing); a command that failed may have
        if call.classification.effect != Effect.READ_ONLY and (result.ok or call.tool not in FILE_TOOLS):
            changed = await self._changed(call)
            if changed is not None:
                report = await self.diagnostics.check(call.call_id, changed or None)
        elif self._diagnostics is not None:
            self._diagnostics.forget(call.call_id)
        late = self._diagnostics.late() if self._diagnostics is not None else None
        texts = [render(report) if report is not None else "", render(late, late=True) if late is not None else ""]
        text = "\n".join(t for t in texts if t)
        if text:  # it begins "Diagnostics": front ends that show `diagnostics` apart find it (DIAGNOSTICS_MARK)
            result.output = f"{result.output.rstrip()}\n\n{text}"
        for found in (report, late):
            if found is not None:
                result.diagnostics += found.introduced

    async def _changed(self, call: PlannedCall) -> dict[str, str | None] | None:
        """The call's changed files with their texts before ({}: the file tool's own, remembered before it
        ran); None when nothing needs checking."""
        if call.tool in FILE_TOOLS:
            return {} if self._diagnostics is not None and self._diagnostics.remembers(call.call_id) else None
        if self.changes is None or not self.servers.available():
            return None
        found = await self.changes.changed_since(call.turn_id, self.diagnostics.serves)
        if not found:
            return None
        return {rel: old.decode("utf-8", "surrogateescape") if old is not None else None for rel, old in found.items()}

    def _paths(self, tool: str, args: dict[str, Any]) -> list[str]:
        """The project-relative files a file tool names (a patch's every file, its moves' targets too)."""
        raw: list[str] = []
        if tool in ("write_file", "edit_file") and isinstance(args.get("path"), str):
            raw = [args["path"]]
        elif tool == "apply_patch":
            from auger.changes.apply_patch import PatchError, UpdateFile, parse_patch

            try:
                for op in parse_patch(str(args.get("patch", ""))):
                    raw.append(op.path)
                    if isinstance(op, UpdateFile) and op.move_to:
                        raw.append(op.move_to)
            except PatchError:
                return []
        rels = []
        for path in raw:
            full = os.path.normpath(os.path.join(self.root, os.path.expanduser(path)))
            rel = os.path.relpath(full, self.root)
            if not rel.startswith(".."):
                rels.append(rel.replace(os.sep, "/"))
        return rels

    # --- the tools -------------------------------------------------------------------------------

    def project(self, root: Path) -> Project:
        """The project beneath `root` as lsp/ reads it: protected files left out (the session's, for its own
        root; the defaults and `.augerignore` for a sub-agent's worktree)."""
        from auger.lsp.files import Project
        from auger.secrets.protected import default_protected

        protected = self.protected if root == self.root and self.protected is not None else default_protected(root)
        return Project(root, lambda rel: protected.check(rel) is not None)

    async def code_nav(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        from auger.lsp.nav import navigate

        root = Path(ctx.root)
        servers = self.servers if root == self.root else None
        return await navigate(args, self.project(root), servers, wait=max(self.config.diagnostics_wait, 10.0))

    async def repo_map(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        from auger.extras import MissingExtra
        from auger.lsp.repo_map import parse_focus

        budget = int(args.get("budget") or self.config.repo_map_tokens)
        try:
            focus = parse_focus(args.get("focus"))
        except ValueError as exc:
            raise ToolError(f"repo_map: {exc}") from None
        try:
            text = await self._map(Path(ctx.root)).render(budget, focus)
        except MissingExtra as exc:
            return ToolResult(str(exc), ok=False)
        return ToolResult(text)

    def _map(self, root: Path) -> Any:
        from auger.lsp.repo_map import RepoMap

        if root not in self._maps:
            self._maps[root] = RepoMap(self.project(root), _cache_dir())
        return self._maps[root]

    # --- repo_map = "auto" -------------------------------------------------------------------------

    def warm_map(self) -> None:
        """Start building the first turn's map as the session opens (repo_map = "auto", a new session), so the
        first prompt finds it ready or nearly."""
        from auger.extras import missing

        if missing("lsp") is None:
            self._warming = asyncio.create_task(self._map(self.root).render(self.config.repo_map_tokens),
                                                name="repo-map")
            self._warming.add_done_callback(lambda t: t.cancelled() or t.exception())

    async def first_turn_map(self, earlier_sessions: int) -> str | None:
        """The map for the first turn, when the project is unfamiliar (no earlier session of it with a reply)
        and large (at least AUTO_MAP_FILES source files with definitions), and the map is ready within
        AUTO_MAP_WAIT seconds; else None (the repo_map tool is there to ask for it)."""
        warming, self._warming = self._warming, None
        if warming is None or earlier_sessions:
            if warming is not None:
                warming.cancel()
            return None
        done, _ = await asyncio.wait([warming], timeout=AUTO_MAP_WAIT)
        if not done or warming.cancelled() or warming.exception() is not None:
            return None
        if len(self._map(self.root).files) < AUTO_MAP_FILES:
            return None
        return ("A map of this repository (its most used definitions, ranked; the repo_map tool gives more or "
                f"another focus):\n{warming.result()}")

    async def close(self) -> None:
        if self._warming is not None:
            self._warming.cancel()
            await asyncio.gather(self._warming, return_exceptions=True)
        if self._diagnostics is not None:
            await self._diagnostics.close()
        if self._servers is not None:
            await self._servers.close()


def _cache_dir() -> Path:
    from auger.config import home_dirs

    return home_dirs()["cache"] / "repo-map"


async def open_code_intel(config: Config, runtime: ToolRuntime, changes: ChangeTracker | None,
                          scratch: Path) -> SessionCodeIntel | None:
    """Offer the tools and hook the diagnostics into the runtime, as the config says; None when all of it is
    off."""
    nav, mapped = config.code_nav, config.repo_map != "off"
    if not (nav or mapped or config.diagnostics):
        return None
    intel = SessionCodeIntel(config, runtime.root, sandbox=runtime.sandbox, env=runtime.env, scratch=scratch,
                             changes=changes, protected=runtime.state.protected)
    if nav or mapped:
        await add_tools(runtime.router, intel, nav=nav, repo_map=mapped)
    if config.diagnostics:
        runtime.before_mutation.append(intel.before_mutation)
        runtime.after_call.append(intel.after_call)
    return intel


def map_told(items: Sequence[Any]) -> bool:
    """Whether the first turn's map was recorded, or its time is past (the session has a user message)."""
    from auger.protocol.items import ContextMessage, UserMessage

    return any(isinstance(item, UserMessage) or (isinstance(item, ContextMessage) and item.kind == REPO_MAP)
               for item in items)


async def add_tools(router: ToolRouter, intel: SessionCodeIntel, *, nav: bool, repo_map: bool) -> None:
    from auger.tools.code_intel import SOURCE, code_intel_toolset

    await router.registry.add(SOURCE, code_intel_toolset(lambda: intel, nav=nav, repo_map=repo_map))
