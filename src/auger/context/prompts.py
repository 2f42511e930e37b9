"""Custom prompts: Markdown files the user invokes as `/name args…` instead of retyping a request.

Prompts live in `<config_dir>/prompts/*.md` (the user's own, for every project) and
`<project>/.auger/prompts/*.md` (shared with the project; these win on a name clash). The name is the file
stem. Optional front matter gives a `description` and an `argument-hint` for completion menus.

In the body, `$1`…`$9` are the arguments split like a shell would (`/fix "two words" x`), `$ARGUMENTS` is
the whole argument string and `$$` is a literal `$`. Expansion is one pass, so an argument that itself
contains `$1` is not expanded again.

Project prompts come with the repository, so they are read beneath a handle on the project root: a
prompt file that is a symlink out of the project is never read (and never sent to the model).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Literal, Mapping

from auger.context.skills import parse_front_matter
from auger.lazy_dataclass import Deferred, dataclass
from auger.lazy_regex import lazy_compile
from auger.policy.fs import RootHandle, read_beneath
from auger.secrets.protected import refused_beneath

_PLACEHOLDER = lazy_compile(r"\$(\$|ARGUMENTS|[1-9])")
_SLASH = lazy_compile(r"/(\S+)(?:\s+|$)")


@dataclass(frozen=True)
class CustomPrompt(Deferred):
    name: str
    body: str
    path: Path
    source: Literal["project", "user"]
    description: str | None = None
    argument_hint: str | None = None


def discover_prompts(project_root: Path, config_dir: Path,
                     warnings: list[str] | None = None) -> dict[str, CustomPrompt]:
    """Prompts by name, project over user. Never raises; unreadable files are left out, with a message
    appended to `warnings` when the caller passes a list."""
    found: dict[str, CustomPrompt] = {}
    try:
        handle: RootHandle | None = RootHandle(Path(project_root).absolute())
    except OSError:
        handle = None
    places: list[tuple[Literal["project", "user"], Path, RootHandle | None]] = [
        ("user", Path(config_dir) / "prompts", None)]
    if handle is not None:
        places.append(("project", handle.path / ".auger" / "prompts", handle))
    for source, base, beneath in places:
        for prompt in _load_dir(base, source, warnings, beneath):
            found[prompt.name] = prompt  # project comes second, so it replaces a user prompt
    return dict(sorted(found.items()))


def expand_slash(text: str, prompts: Mapping[str, CustomPrompt]) -> str | None:
    """The prompt `text` invokes, with its arguments filled in; None when `text` is not `/name…` for a
    known prompt (the caller then sends the text as typed).

    If the body uses no placeholder at all, the arguments are appended after a blank line, so words the
    user typed are never dropped silently."""
    match = _SLASH.match(text)
    if match is None or match.group(1) not in prompts:
        return None
    body = prompts[match.group(1)].body
    arguments = text[match.end():].strip()
    try:
        argv = shlex.split(arguments)
    except ValueError:  # unbalanced quote: the user meant words, not shell syntax
        argv = arguments.split()

    def replace(m: re.Match[str]) -> str:
        token = m.group(1)
        if token == "$":
            return "$"
        if token == "ARGUMENTS":
            return arguments
        index = int(token) - 1
        return argv[index] if index < len(argv) else ""

    expanded = _PLACEHOLDER.sub(replace, body)
    if arguments and not _PLACEHOLDER.search(body.replace("$$", "")):
        return f"{expanded.rstrip()}\n\n{arguments}" if expanded.strip() else arguments
    return expanded


def _load_dir(base: Path, source: Literal["project", "user"], warnings: list[str] | None,
              beneath: RootHandle | None) -> list[CustomPrompt]:
    try:
        paths = sorted(p for p in base.iterdir() if p.suffix == ".md")
    except OSError:
        return []
    prompts = []
    for path in paths:
        name = path.stem
        if not name or any(c.isspace() for c in name) or name.startswith("."):
            continue  # cannot be typed as /name
        try:
            if not path.is_file():
                continue
            if beneath is not None and refused_beneath(beneath, path.relative_to(beneath.path)) is not None:
                if warnings is not None:
                    warnings.append(f"{path}: a protected file (or a link to one); prompt ignored")
                continue
            data = path.read_bytes() if beneath is None else read_beneath(beneath, path.relative_to(beneath.path))
            text = data.decode("utf-8-sig", errors="replace")
        except ValueError:  # PathEscape: a symlink out of the project
            if warnings is not None:
                warnings.append(f"{path}: a symlink out of the project; prompt ignored")
            continue
        except OSError as exc:
            if warnings is not None:
                warnings.append(f"{path}: cannot read ({exc.strerror or exc}); prompt ignored")
            continue
        meta, body, _ = parse_front_matter(text)
        meta = meta or {}
        prompts.append(CustomPrompt(name=name, body=body.strip("\n"), path=path, source=source,
                                    description=_one_line(meta.get("description")),
                                    argument_hint=_one_line(meta.get("argument-hint") or meta.get("argument_hint"))))
    return prompts


def _one_line(value: str | None) -> str | None:
    value = " ".join((value or "").split())
    return value or None
