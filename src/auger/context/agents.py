"""Agent definitions: what kinds of sub-agent the model may start with `spawn_agent`.

Four are built in — `explore` (read-only search and summary), `plan` (read-only, returns a plan),
`task` (general) and `verify` (runs tests and checks, no file tools that write). More come from
Markdown files with front matter, the body being the agent's instructions:

    ---
    name: reviewer
    description: Reviews a diff for bugs
    tools: read_file, grep, glob, shell      # allow-list; omitted: every tool of the parent
    model: gpt-5-mini                        # optional, with `provider`
    mode: plan                               # optional: plan | safe | auto (can only narrow)
    max_model_calls: 30
    code_mode: true                          # optional: it may also run Python programs calling its tools
    ---
    You review ...

read from `<config_dir>/agents/*.md` (the user's), `<project>/.claude/agents/*.md` and
`<project>/.auger/agents/*.md` (later places win on a name clash). Claude's tool names (Read, Grep,
Glob, Bash, Edit, Write, ...) are mapped to auger's. A project's files come with the repository,
so they are read beneath a handle on the project root, and what they say can only narrow: a child's
mode is never weaker than its parent's whatever a definition asks (enforced where children start,
engine/agents/subagents.py), and a project agent's own `mode` is kept only when it is stricter than the
session's configured mode. Discovery never raises: a bad file is left out with a warning naming it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from auger.context.skills import parse_front_matter
from auger.policy.fs import RootHandle, read_beneath
from auger.secrets.protected import refused_beneath

DEFAULT_MAX_MODEL_CALLS = 30
MAX_FILE_BYTES = 256 * 1024
MODES_STRICTEST_FIRST = ("plan", "safe", "auto")
_READ_TOOLS = ("read_file", "list_dir", "glob", "grep", "recall", "web_fetch", "web_search")

# Claude Code's tool names, as its `.claude/agents/*.md` files spell them, mapped to ours.
CLAUDE_TOOLS: dict[str, tuple[str, ...]] = {
    "read": ("read_file",), "grep": ("grep",), "glob": ("glob",), "ls": ("list_dir",), "bash": ("shell",),
    "edit": ("edit_file", "apply_patch"), "multiedit": ("edit_file", "apply_patch"), "write": ("write_file",),
    "todowrite": ("update_plan",),
    "task": ("spawn_agent", "wait_agent", "send_input", "cancel_agent", "list_agents"),
    "webfetch": ("web_fetch",), "websearch": ("web_search",),
}

Source = Literal["built-in", "user", "project"]


@dataclass(frozen=True)
class AgentDef:
    name: str
    description: str
    instructions: str
    tools: tuple[str, ...] | None = None  # allow-list; None: every tool the parent has
    mode: str | None = None  # None: the parent's
    model: str | None = None
    provider: str | None = None
    max_model_calls: int = DEFAULT_MAX_MODEL_CALLS
    source: Source = "built-in"
    path: Path | None = None
    code_mode: bool = False  # offered run_code (tools/code_mode.py), whether or not the session is


BUILTINS = (
    AgentDef("explore", "Read-only search of the code base; answers a question with file paths and a summary.",
             "You are an exploration agent. Search and read the code to answer the request. Change nothing. "
             "Answer with a concise summary naming the files (and line numbers) that matter.",
             tools=_READ_TOOLS, mode="plan"),
    AgentDef("plan", "Read-only; studies the code and returns a step-by-step implementation plan.",
             "You are a planning agent. Read what you need, change nothing, and answer with a numbered, "
             "concrete plan: files to change, what to change in each, and how to check the result.",
             tools=_READ_TOOLS, mode="plan"),
    AgentDef("task", "General-purpose agent for a self-contained task (may edit files and run commands).",
             "You are a sub-agent working on one delegated task. Do it completely, then answer with a short "
             "report of what you did and what is left."),
    AgentDef("verify", "Runs the tests and checks and reports failures; never edits files.",
             "You are a verification agent. Run the relevant tests, linters and checks, read what you need, "
             "and do not modify any file. Answer with what passed, what failed and the likely causes.",
             tools=(*_READ_TOOLS, "shell")),
)


@dataclass
class AgentIndex:
    agents: dict[str, AgentDef] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def get(self, name: str) -> AgentDef | None:
        return self.agents.get(name)

    def describe(self) -> str:
        """One line per agent, for the spawn_agent tool's description."""
        return "\n".join(f"- {a.name}: {a.description}" for a in self.agents.values())


def stricter(a: str, b: str | None) -> str:
    """The stricter of two trust modes (an unknown one counts as the strictest)."""
    if b is None:
        return a
    rank = {m: i for i, m in enumerate(MODES_STRICTEST_FIRST)}
    return a if rank.get(a, -1) <= rank.get(b, -1) else b


def discover_agents(project_root: Path, config_dir: Path, *, base_mode: str = "auto") -> AgentIndex:
    """Built-ins, then user, Claude-format project and project agents (a later one replaces an earlier
    of the same name, with a warning when it replaces a file's). Never raises."""
    index = AgentIndex({a.name: a for a in BUILTINS})
    try:
        handle: RootHandle | None = RootHandle(Path(project_root).absolute())
    except OSError:
        handle = None
    places: list[tuple[Source, Path, RootHandle | None]] = [("user", Path(config_dir) / "agents", None)]
    if handle is not None:
        places += [("project", handle.path / ".claude" / "agents", handle),
                   ("project", handle.path / ".auger" / "agents", handle)]
    for source, base, beneath in places:
        for path in _markdown_files(base):
            agent = _load(path, source, beneath, base_mode, index.warnings)
            if agent is None:
                continue
            previous = index.agents.get(agent.name)
            if previous is not None and previous.path is not None:
                index.warnings.append(f"{path}: replaces agent '{agent.name}' defined in {previous.path}")
            index.agents[agent.name] = agent
    return index


def _markdown_files(base: Path) -> list[Path]:
    try:
        return sorted(p for p in base.iterdir() if p.suffix == ".md" and not p.name.startswith("."))
    except OSError:
        return []


def _load(path: Path, source: Source, beneath: RootHandle | None, base_mode: str,
          warnings: list[str]) -> AgentDef | None:
    def bad(why: str) -> AgentDef | None:
        warnings.append(f"{path}: {why}; agent ignored")
        return None

    try:
        if beneath is None:
            data = path.read_bytes()[:MAX_FILE_BYTES + 1]
        elif refused_beneath(beneath, path.relative_to(beneath.path)) is not None:
            return bad("a protected file (or a link to one)")
        else:
            data = read_beneath(beneath, path.relative_to(beneath.path), limit=MAX_FILE_BYTES)
    except ValueError:  # PathEscape: a symlink out of the project
        return bad("a symlink out of the project")
    except OSError as exc:
        return bad(f"cannot read ({exc.strerror or exc})")
    if len(data) > MAX_FILE_BYTES:
        return bad(f"larger than {MAX_FILE_BYTES} bytes")
    meta, body, problems = parse_front_matter(data.decode("utf-8-sig", errors="replace"))
    if meta is None:
        return bad("no front matter (a '---' block with name and description)")
    warnings.extend(f"{path}: {problem}" for problem in problems)
    name = (meta.get("name") or path.stem).strip()
    if not name or not all(c.isalnum() or c in "-_." for c in name) or len(name) > 64:
        return bad(f"invalid name {name!r} (letters, digits, '-', '_', '.'; at most 64)")
    description = " ".join((meta.get("description") or "").split())
    if not description:
        return bad("no description")
    tools = _tools(meta.get("tools"), path, warnings)
    mode = (meta.get("mode") or "").strip() or None
    if mode is not None and mode not in MODES_STRICTEST_FIRST:
        return bad(f"unknown mode {mode!r} (plan, safe or auto)")
    if mode is not None and source == "project" and stricter(mode, base_mode) != mode:
        warnings.append(f"{path}: a project agent cannot widen trust; mode {mode!r} narrowed to {base_mode!r}")
        mode = base_mode
    try:
        calls = int(meta.get("max_model_calls") or meta.get("max-model-calls") or DEFAULT_MAX_MODEL_CALLS)
    except ValueError:
        return bad(f"max_model_calls must be a whole number, not {meta.get('max_model_calls')!r}")
    if calls < 1:
        return bad("max_model_calls must be at least 1")
    model = (meta.get("model") or "").strip() or None
    if model == "inherit":  # Claude's spelling of "the parent's"
        model = None
    code_mode = (meta.get("code_mode") or "false").strip().lower()
    if code_mode not in ("true", "false"):
        return bad(f"code_mode must be true or false, not {meta.get('code_mode')!r}")
    return AgentDef(name, description, body.strip(), tools, mode, model, (meta.get("provider") or "").strip() or None,
                    calls, source, path, code_mode == "true")


def _tools(raw: str | None, path: Path, warnings: list[str]) -> tuple[str, ...] | None:
    """The allow-list: comma- or space-separated names (a `[a, b]` flow list too); Claude's names mapped."""
    if raw is None:
        return None
    names = [n.strip().strip("'\"") for n in raw.strip().strip("[]").replace(",", " ").split()]
    if not names:
        warnings.append(f"{path}: 'tools' is empty or a YAML block list; write it as 'tools: a, b' "
                        "(the agent gets no tools)")
    tools: list[str] = []
    for name in names:
        if "(" in name:  # Claude's `Bash(git:*)`: a scope auger cannot enforce; the whole tool would widen it
            warnings.append(f"{path}: scoped tool {name!r} is not supported; left out")
            continue
        tools.extend(CLAUDE_TOOLS.get(name.lower(), (name,)) if name[:1].isupper() else (name,))
    return tuple(dict.fromkeys(tools))
