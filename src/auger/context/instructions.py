"""The base instructions every request starts from, and the `<environment_context>` block beside them.

Base instructions are sent on every request, so they are short and byte-for-byte stable for a given
model (no dates, no paths): providers cache prompt prefixes, and a prefix that changes costs money.
Everything that varies — working directory, date, git branch — lives in `EnvironmentContext`, which the
engine records as a conversation item, so a resumed session replays exactly what the model saw.

The prompt text lives in packaged Markdown files (`base_*.md` beside this module), read once per process.
"""

from __future__ import annotations

import datetime
import functools
import os
import pkgutil
from dataclasses import dataclass, fields
from pathlib import Path

from auger.context.project_docs import find_repo_root
from auger.lazy_regex import lazy_compile

__all__ = ["EnvironmentContext", "base_instructions", "git_branch", "model_family", "prompt_file"]

_FAMILY_FILES = {"openai": "base_openai.md", "anthropic": "base_anthropic.md", "open_weights": "base_open_weights.md"}

# Matched against the model name's last path component, lower-cased ("openrouter/anthropic/claude-x"
# -> "claude-x"; "Qwen/Qwen2.5-Coder" -> "qwen2.5-coder"). Open weights first: "gpt-oss" is an OpenAI
# model, but it is served by local runtimes whose tool-call parsing is as fragile as for other open models.
_OPEN_WEIGHTS = lazy_compile(r"gpt-oss|qwen|qwq|llama|deepseek|mistral|mixtral|codestral|devstral|magistral|gemma"
                             r"|phi-?\d|granite|glm|kimi|minimax|starcoder|command-r|olmo|yi-")
_ANTHROPIC = lazy_compile(r"claude")
_OPENAI = lazy_compile(r"^(gpt-|chatgpt|o\d)|codex")


def model_family(model: str | None) -> str:
    """`openai`, `anthropic`, `open_weights` or `default`, from the model's name alone."""
    name = (model or "").strip().lower().rsplit("/", 1)[-1]
    if not name:
        return "default"
    for family, pattern in (("open_weights", _OPEN_WEIGHTS), ("anthropic", _ANTHROPIC), ("openai", _OPENAI)):
        if pattern.search(name):
            return family
    return "default"


@functools.cache
def prompt_file(name: str) -> str:
    """A packaged prompt file, without trailing whitespace; read once per process (through the package's
    loader, as importlib.resources would, without loading its readers and zipfile on the start path)."""
    data = pkgutil.get_data("auger.context", name)
    if data is None:
        raise FileNotFoundError(name)
    return data.decode("utf-8").rstrip()


@functools.cache
def _family_instructions(family: str) -> str:
    text = prompt_file("base_default.md")
    if family in _FAMILY_FILES:
        text += "\n\n" + prompt_file(_FAMILY_FILES[family])
    return text + "\n"


def base_instructions(model: str | None, override: str | None = None) -> str:
    """The default prompt plus a short addendum for the model's family; deterministic for a given model.
    `override` (the user's `base_instructions`) replaces all of it: the user then owns what the model is
    told about its tools and its conduct."""
    if override and override.strip():
        return override.strip() + "\n"
    return _family_instructions(model_family(model))


# --- environment context ------------------------------------------------------------------------------


COMMAND_SHELL = "bash"  # what the shell tools run every command with, whatever the user's login shell


@dataclass(frozen=True)
class EnvironmentContext:
    """What the model should know about where it runs. Fields that are None are left out of the block.

    Field order is the rendering order; keep it stable, since rendered blocks are stored and replayed.
    """

    cwd: str | None = None
    shell: str | None = None
    os: str | None = None
    date: str | None = None
    git_branch: str | None = None
    trust_mode: str | None = None
    model: str | None = None

    @classmethod
    def capture(cls, cwd: Path, mode: str | None, model: str | None, *,
                today: datetime.date | None = None) -> EnvironmentContext:
        """Read the environment now. `today` exists for tests; it defaults to the local date.

        The shell named is the one commands run in, bash (`auger.tools.shell.bash_argv`), never the
        user's login shell (`$SHELL`): a model told zsh or fish writes their syntax, which bash then
        runs, or refuses."""
        uname = os.uname()  # what platform.system() and .release() read, without importing platform
        system = " ".join(p for p in (uname.sysname, uname.release) if p) or None
        return cls(cwd=str(cwd), shell=COMMAND_SHELL, os=system, date=(today or datetime.date.today()).isoformat(),
                   git_branch=git_branch(Path(cwd)), trust_mode=mode or None, model=model or None)

    def render(self) -> str:
        """The full block: one child element per field that is set."""
        lines = [_element(f.name, getattr(self, f.name)) for f in fields(self) if getattr(self, f.name)]
        return _block(lines)

    def render_changes(self, previous: EnvironmentContext) -> str | None:
        """A block with only the fields that differ from `previous`, or None if nothing changed.

        A field that became unset (say, the branch after leaving a repository) is sent as an empty
        element, so the model drops the old value instead of assuming it still holds."""
        lines = []
        for f in fields(self):
            value = getattr(self, f.name) or None
            if value != (getattr(previous, f.name) or None):
                lines.append(_element(f.name, value) if value else f"  <{f.name} />")
        return _block(lines) if lines else None


def _element(name: str, value: str) -> str:
    return f"  <{name}>{_escape(str(value))}</{name}>"


def _block(lines: list[str]) -> str:
    return "\n".join(["<environment_context>", *lines, "</environment_context>"])


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


_HEX_OID = lazy_compile(r"[0-9a-f]{40}([0-9a-f]{24})?")


def git_branch(cwd: Path) -> str | None:
    """The checked-out branch, read from HEAD without running git (a subprocess per turn is slow, and git
    may not be installed). Detached HEAD gives `(HEAD detached at <short id>)`, like `git branch`; outside
    a repository, or when HEAD cannot be read, None."""
    root = find_repo_root(cwd)
    if root is None:
        return None
    git_dir = _git_dir(root / ".git")
    if git_dir is None:
        return None
    try:
        head = (git_dir / "HEAD").read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None
    if head.startswith("ref:"):
        ref = head[4:].strip()
        return ref.removeprefix("refs/heads/") or None
    if _HEX_OID.fullmatch(head):
        return f"(HEAD detached at {head[:7]})"
    return None


def _git_dir(dot_git: Path) -> Path | None:
    """`.git` itself, or the directory a `.git` file points at (`gitdir: <path>`, used by worktrees and
    submodules; a relative path is relative to the directory holding the file)."""
    if dot_git.is_dir():
        return dot_git
    try:
        text = dot_git.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("gitdir:"):
            target = Path(line[len("gitdir:"):].strip())
            return target if target.is_absolute() else dot_git.parent / target
    return None
