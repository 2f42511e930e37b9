"""Plugins: Python code that adds tools, system-prompt text and hooks to every session of a workspace.

A plugin is a callable `register(api)` (or an object with a `register(api)` method) that receives a
`PluginApi` and calls it: `add_toolset` (any `Toolset`, tools/toolset.py), `add_tool` (one `ToolSpec`),
`add_contribution` (text for the system prompt, a router `Contribution`) and `add_hook` (a callable run
at one of the engine's hook points, engine/hooks.py). Plugins come from two places:

- installed distributions that declare an entry point in group `auger.plugins`;
- `<project>/.auger/plugins/*.py` modules defining `register(api)`, loaded only when the user's config
  says `plugins.project = true` (`project_plugins_enabled`): code that comes with a repository never
  runs because the repository is opened, nor because the user trusts its rules (`trust_project_rules`
  widens what commands may do; it runs nothing). They are read beneath the project root, so a file
  that is a symlink out of the project is never run.

Discovery must cost nothing when no plugin is installed: importing `importlib.metadata` alone costs
~50 ms, so the `entry_points.txt` files on `sys.path` are first scanned for the group's name, and the
real `importlib.metadata` discovery runs only when one mentions it.

A plugin that fails to import or register is a warning naming it; the others, and the session, go on.
Everything a failed plugin registered before failing is dropped, so no plugin is half-installed.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
from dataclasses import field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from auger.lazy_dataclass import Deferred, dataclass
from auger.tools.base import ToolContext, ToolError, ToolResult, ToolSpec
from auger.tools.toolset import Contribution, StaticToolset, Toolset, contributions_of

log = logging.getLogger("auger.plugins")

GROUP = "auger.plugins"
HOOK_EVENTS = ("session_start", "user_prompt", "before_tool", "after_tool", "turn_end", "before_compact")
REGISTRY_NAME = "plugin tools"  # its name in a session's tool registry: no MCP server can be named so
MAX_PLUGIN_BYTES = 1 << 20  # a project plugin module larger than this is not a plugin


@dataclass(frozen=True)
class HookRegistration(Deferred):
    """A Python hook: `fn(event: dict)` returns None or a reply dict (engine/hooks.py), possibly awaitable."""

    event: str
    fn: Callable[[dict[str, Any]], Any]
    matcher: str | None
    plugin: str


@dataclass
class Plugins(Deferred):
    """What the workspace's plugins registered, and what went wrong loading them."""

    names: list[str] = field(default_factory=list)
    toolsets: list[tuple[str, Toolset]] = field(default_factory=list)
    contributions: list[Contribution] = field(default_factory=list)
    hooks: list[HookRegistration] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


class PluginApi:
    """What a plugin's `register(api)` may call; collected, and kept only if registration completes."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._toolsets: list[Toolset] = []
        self._contributions: list[Contribution] = []
        self._hooks: list[HookRegistration] = []

    def add_toolset(self, toolset: Toolset) -> None:
        for method in ("open", "close", "list_tools", "call"):
            if not callable(getattr(toolset, method, None)):
                raise TypeError(f"add_toolset: {type(toolset).__name__} has no {method}() (see tools/toolset.py)")
        self._toolsets.append(toolset)

    def add_tool(self, spec: ToolSpec) -> None:
        if not isinstance(spec, ToolSpec):
            raise TypeError(f"add_tool expects a ToolSpec, got {type(spec).__name__}")
        self._toolsets.append(StaticToolset([spec]))

    def add_contribution(self, contribution: Contribution | str) -> None:
        if isinstance(contribution, str):
            contribution = Contribution(contribution, slot="guidance", priority=800)
        if not isinstance(contribution, Contribution):
            raise TypeError(f"add_contribution expects a Contribution or text, got {type(contribution).__name__}")
        self._contributions.append(contribution)

    def add_hook(self, event: str, fn: Callable[[dict[str, Any]], Any], *, matcher: str | None = None) -> None:
        if event not in HOOK_EVENTS:
            raise ValueError(f"add_hook: unknown event {event!r}; one of {', '.join(HOOK_EVENTS)}")
        if not callable(fn):
            raise TypeError("add_hook: the hook must be callable")
        self._hooks.append(HookRegistration(event, fn, matcher, self.name))

    def _into(self, plugins: Plugins) -> None:
        plugins.names.append(self.name)
        plugins.toolsets.extend((self.name, t) for t in self._toolsets)
        plugins.contributions.extend(self._contributions)
        plugins.hooks.extend(self._hooks)


def project_plugins_enabled(tables: Mapping[str, Any]) -> bool:
    """Whether the user's config opts in to running a project's plugins: exactly `plugins.project = true`
    (a project's own config cannot set it: config.py drops its [plugins] table)."""
    table = tables.get("plugins")
    return isinstance(table, dict) and table.get("project") is True


def load_plugins(root: Path, *, project: bool, paths: Sequence[str] | None = None) -> Plugins:
    """The installed plugins (entry points found on `paths`, default sys.path) and, with `project`, the
    project's own; never raises."""
    plugins = Plugins()
    search = list(sys.path if paths is None else paths)
    if _group_declared(search):
        for name, load in _entry_points(search, plugins.warnings):
            _register(plugins, name, f"plugin {name!r}", load)
    if project:
        for path, source in _project_modules(root, plugins.warnings):
            load = functools.partial(_exec_module, path, source)
            _register(plugins, path.stem, f"project plugin {path.name!r}", load)
    return plugins


def _register(plugins: Plugins, name: str, label: str, load: Callable[[], Any]) -> None:
    """Load one plugin and let it register; a failure anywhere is one warning naming it (`label`)."""
    api = PluginApi(name)
    try:
        plugin = load()
        register = plugin if callable(plugin) and not hasattr(plugin, "register") else getattr(plugin, "register", None)
        if not callable(register):
            raise TypeError("it is neither a callable nor an object with register(api)")
        register(api)
    except (Exception, SystemExit) as exc:  # sys.exit() in a plugin must not end auger
        log.debug("%s failed", label, exc_info=True)
        plugins.warnings.append(f"{label} was not loaded: {type(exc).__name__}: {_one_line(exc)}")
        return
    api._into(plugins)


def _group_declared(paths: Iterable[str]) -> bool:
    """Whether any distribution's entry_points.txt on `paths` names the group (a cheap pre-check)."""
    needle = f"[{GROUP}]".encode()
    for entry in paths:
        try:
            with os.scandir(entry or ".") as it:
                names = [e.name for e in it if e.name.endswith((".dist-info", ".egg-info"))]
        except OSError:
            continue
        for name in names:
            try:
                with open(os.path.join(entry or ".", name, "entry_points.txt"), "rb") as f:
                    if needle in f.read():
                        return True
            except OSError:
                continue
    return False


def _entry_points(paths: list[str], warnings: list[str]) -> list[tuple[str, Callable[[], Any]]]:
    from importlib.metadata import distributions

    found: dict[str, Callable[[], Any]] = {}
    try:
        for dist in distributions(path=paths):
            for ep in dist.entry_points:
                if ep.group == GROUP and ep.name not in found:  # the first on the path wins, like imports
                    found[ep.name] = ep.load
    except Exception as exc:  # a broken METADATA must not stop the session
        warnings.append(f"plugins: reading installed distributions failed: {_one_line(exc)}")
    return sorted(found.items())


def _project_modules(root: Path, warnings: list[str]) -> list[tuple[Path, bytes]]:
    from auger.policy.fs import RootHandle, read_beneath

    base = Path(root) / ".auger" / "plugins"
    try:
        paths = sorted(p for p in base.iterdir() if p.suffix == ".py" and not p.name.startswith((".", "_")))
    except OSError:
        return []
    handle = RootHandle(Path(root))
    modules = []
    for path in paths:
        try:
            modules.append((path, read_beneath(handle, path.relative_to(root), limit=MAX_PLUGIN_BYTES)))
        except ValueError:
            warnings.append(f"project plugin {path.name!r}: a symlink out of the project; not loaded")
        except OSError as exc:
            warnings.append(f"project plugin {path.name!r}: cannot read ({exc.strerror or exc}); not loaded")
    return modules


def _exec_module(path: Path, source: bytes) -> Any:
    """Run a project plugin's source (the bytes read beneath the root, not the path again) as a module."""
    import types

    module = types.ModuleType(f"auger_project_plugin_{path.stem}")
    module.__file__ = str(path)
    exec(compile(source, str(path), "exec"), module.__dict__)  # noqa: S102  opted in by the user
    register = getattr(module, "register", None)
    if register is None:
        raise AttributeError("the module defines no register(api)")
    return register


class PluginTools:
    """The plugins' toolsets as one member of a session's tool registry. A toolset that fails to open is
    left out with a warning; a tool name another plugin already offers is left out too."""

    def __init__(self, plugins: Plugins, warn: Callable[[str], None]) -> None:
        self._plugins = plugins
        self._warn = warn
        self._open: list[Toolset] = []
        self._revisions: list[int] = []  # of the open toolsets, as the catalog last saw them
        self._owner: dict[str, Toolset] = {}

    async def open(self) -> None:
        for name, toolset in self._plugins.toolsets:
            try:
                await toolset.open()
                specs = list(toolset.list_tools())
            except Exception as exc:
                self._warn(f"plugin {name!r}: its tools are not available: {type(exc).__name__}: {_one_line(exc)}")
                continue
            self._open.append(toolset)
            self._revisions.append(getattr(toolset, "revision", 0))
            for spec in specs:
                if spec.name in self._owner:
                    self._warn(f"plugin {name!r}: tool {spec.name!r} is already offered; left out")
                    continue
                self._owner[spec.name] = toolset

    async def close(self) -> None:
        for toolset in reversed(self._open):
            try:
                await toolset.close()
            except Exception:  # a plugin's close failing must not stop the session's shutdown
                log.debug("plugin toolset close failed", exc_info=True)
        self._open = []

    def list_tools(self) -> Sequence[ToolSpec]:
        return [spec for toolset in self._open for spec in toolset.list_tools()
                if self._owner.setdefault(spec.name, toolset) is toolset]

    async def refresh(self) -> bool:
        """True when a plugin toolset's `revision` moved (its tools changed in place): the registry's
        generation then moves, and the router renders the catalog again before the next request."""
        revisions = [getattr(t, "revision", 0) for t in self._open]
        changed, self._revisions = revisions != self._revisions, revisions
        return changed

    def contributions(self) -> Sequence[Contribution]:
        return [*self._plugins.contributions, *(c for t in self._open for c in contributions_of(t))]

    async def call(self, name: str, args: dict, ctx: ToolContext) -> ToolResult:
        owner = self._owner.get(name)
        if owner is None:
            raise ToolError(f"there is no tool named {name!r}")
        return await owner.call(name, args, ctx)


def _one_line(exc: BaseException) -> str:
    return " ".join((str(exc) or type(exc).__name__).split())[:300]
