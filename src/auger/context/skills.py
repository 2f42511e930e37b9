"""Skills: folders of task-specific instructions the model loads only when a task calls for them.

A skill is a folder holding `SKILL.md`, under `<project>/.auger/skills/` or `<config_dir>/skills/`.
The file starts with front matter naming the skill and saying when to use it:

    ---
    name: release-notes
    description: >
      Write release notes from the git log. Use when the user asks for a changelog.
    ---
    (instructions...)

Only names and descriptions go into the instructions (`SkillIndex.render_list`); a body is read when
the model asks for it (`Skill.body`), so many skills cost a few lines each, not their full text.
Discovery never raises: bad skills are left out with a warning the engine can show.

The project is not trusted: its skill files are opened beneath a handle on the project root, so a
`SKILL.md` (or a skill folder, or `.auger` itself) that is a symlink out of the project is never
read, at discovery or later. Symlinked skill folders are not walked at all. The user's own config
dir is trusted and read as it is.

`parse_front_matter` handles the small YAML subset such headers use (`key: value`, quoted values,
`>`/`|` block scalars, comments), so auger needs no YAML library. Custom prompts share it.
"""

from __future__ import annotations

import os
from dataclasses import field
from pathlib import Path
from typing import Literal

from auger.lazy_dataclass import Deferred, dataclass
from auger.lazy_regex import lazy_compile
from auger.policy.fs import RootHandle, read_beneath
from auger.secrets.protected import refused_beneath

SKILL_FILE = "SKILL.md"
MAX_DESCRIPTION = 200
_MAX_DEPTH = 3  # skills/<group>/<group>/<skill>: deep enough for grouping, bounded against symlink loops

Source = Literal["project", "user"]


@dataclass(frozen=True)
class Skill(Deferred):
    name: str
    description: str
    path: Path  # the SKILL.md file
    source: Source
    beneath: RootHandle | None = field(default=None, compare=False, repr=False)  # project skills: the root

    def body(self) -> str:
        """The instructions without front matter, read now so edits made during a session are seen.
        Raises OSError if the file has gone (or now leads out of the project); the caller reports that."""
        text = _decode(_read(self.path, self.beneath))
        return split_front_matter(text)[1]


@dataclass
class SkillIndex(Deferred):
    skills: list[Skill] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    project_root: Path | None = None

    def get(self, name: str) -> Skill | None:
        return next((s for s in self.skills if s.name == name), None)

    def render_list(self) -> str | None:
        """A short block for the instructions: name, description and where each skill lives. Project
        skills are shown relative to the project root so the file tools can open them; user skills lie
        outside the project and are shown in full. None when there are no skills."""
        if not self.skills:
            return None
        lines = ["<skills>",
                 "Skills hold instructions for specific tasks. When a task matches a skill's description, "
                 "read its SKILL.md first and follow it."]
        for skill in self.skills:
            lines.append(f"- {skill.name}: {_shorten(skill.description)} ({self._display(skill.path)})")
        lines.append("</skills>")
        return "\n".join(lines)

    def _display(self, path: Path) -> str:
        if self.project_root is not None:
            try:
                return path.relative_to(self.project_root).as_posix()
            except ValueError:
                pass
        return str(path)


def discover_skills(project_root: Path, config_dir: Path) -> SkillIndex:
    """All skills, sorted by name; a project skill replaces a user skill of the same name (the project
    knows its own conventions best). Within one place the first folder in sorted order wins."""
    project_root = Path(project_root).absolute()
    index = SkillIndex(project_root=project_root)
    found: dict[str, Skill] = {}
    try:
        handle: RootHandle | None = RootHandle(project_root)
    except OSError:
        handle = None
    places: list[tuple[Source, Path, RootHandle | None]] = [("user", Path(config_dir) / "skills", None)]
    if handle is not None:
        places.insert(0, ("project", project_root / ".auger" / "skills", handle))
    for source, base, beneath in places:
        for path in _skill_files(base):
            skill = _load_skill(path, source, index.warnings, beneath)
            if skill is None:
                continue
            other = found.get(skill.name)
            if other is None:
                found[skill.name] = skill
            elif other.source != skill.source:
                index.warnings.append(f"{path}: user skill '{skill.name}' is overridden by the project skill "
                                      f"at {other.path}")
            else:
                index.warnings.append(f"{path}: duplicate skill name '{skill.name}' (already defined by "
                                      f"{other.path}); ignored")
    index.skills = sorted(found.values(), key=lambda s: s.name)
    return index


def _skill_files(base: Path) -> list[Path]:
    """SKILL.md files in folders under `base`, in sorted order; a skill's own subfolders (scripts,
    references) are not searched for further skills. Hidden folders are skipped."""
    result: list[Path] = []

    def walk(directory: Path, depth: int) -> None:
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError:
            return
        for entry in entries:
            try:  # a symlinked folder is not walked: it could lead anywhere
                if entry.name.startswith(".") or not entry.is_dir(follow_symlinks=False):
                    continue
            except OSError:
                continue
            folder = Path(entry.path)
            if (folder / SKILL_FILE).is_file():
                result.append(folder / SKILL_FILE)
            elif depth < _MAX_DEPTH:
                walk(folder, depth + 1)

    walk(base, 1)
    return result


def _read(path: Path, beneath: RootHandle | None) -> bytes:
    """A skill file's bytes: beneath the project root for project skills, as is for the user's own."""
    if beneath is None:
        return path.read_bytes()
    try:
        if refused_beneath(beneath, path.relative_to(beneath.path)) is not None:
            raise PermissionError(f"{path} is (or leads to) a protected file")
        return read_beneath(beneath, path.relative_to(beneath.path))
    except ValueError as exc:  # PathEscape: a symlink out of the project
        raise PermissionError(f"{path} leads out of the project ({exc})") from None


def _load_skill(path: Path, source: Source, warnings: list[str], beneath: RootHandle | None) -> Skill | None:
    try:
        text = _decode(_read(path, beneath))
    except OSError as exc:
        warnings.append(f"{path}: cannot read ({exc.strerror or exc}); skill ignored")
        return None
    meta, _, errors = parse_front_matter(text)
    if meta is None:
        warnings.append(f"{path}: no front matter (expected '---' lines with name and description); "
                        "skill ignored")
        return None
    warnings.extend(f"{path}: {e}" for e in errors)
    name = " ".join(meta.get("name", "").split())
    description = " ".join(meta.get("description", "").split())
    missing = [k for k, v in (("name", name), ("description", description)) if not v]
    if missing:
        warnings.append(f"{path}: front matter has no {' or '.join(missing)}; skill ignored")
        return None
    return Skill(name=name, description=description, path=path, source=source, beneath=beneath)


def _shorten(text: str, limit: int = MAX_DESCRIPTION) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _decode(data: bytes) -> str:
    return data.decode("utf-8-sig", errors="replace")


# --- front matter -------------------------------------------------------------------------------------

_FENCE = lazy_compile(r"---[ \t]*")
_END = lazy_compile(r"(---|\.\.\.)[ \t]*")
_KEY = lazy_compile(r"([A-Za-z_][\w.-]*)[ \t]*:(?:[ \t]+(.*))?$")
_BLOCK = lazy_compile(r"([|>])([+-]?)[ \t]*(?:#.*)?$")


def split_front_matter(text: str) -> tuple[list[str] | None, str]:
    """(front matter lines, body). Lines is None when the text has no complete front matter, and the
    body is then the whole text. The body loses the newlines that separated it from the header."""
    text = text.removeprefix("\ufeff")
    lines = text.splitlines(keepends=True)
    if not lines or not _FENCE.fullmatch(lines[0].rstrip("\r\n")):
        return None, text
    for i in range(1, len(lines)):
        if _END.fullmatch(lines[i].rstrip("\r\n")):
            header = [line.rstrip("\r\n") for line in lines[1:i]]
            return header, "".join(lines[i + 1:]).lstrip("\r\n")
    return None, text


def parse_front_matter(text: str) -> tuple[dict[str, str] | None, str, list[str]]:
    """(metadata, body, problems). Metadata is None when there is no front matter. Problems describe
    lines that were not understood; they are skipped, because one odd line should not lose a skill.

    Supported: `key: value` (plain, "double" or 'single' quoted), `key: >` folded and `key: |` literal
    blocks (with `-`/`+` chomping), plain values continued on indented lines, `#` comments. Nested maps
    and lists are skipped: the keys auger reads are all strings.
    """
    header, body = split_front_matter(text)
    if header is None:
        return None, body, []
    meta: dict[str, str] = {}
    problems: list[str] = []
    i = 0
    while i < len(header):
        line = header[i]
        i += 1
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if line[0] in " \t":
            continue  # inside a nested map or list we do not read
        match = _KEY.match(line)
        if match is None:
            if not line.startswith("- "):
                problems.append(f"front matter line {i + 1} is not 'key: value': {line.strip()[:60]!r}")
            continue
        key, raw = match.group(1), (match.group(2) or "").strip()
        continuation: list[str] = []
        while i < len(header) and (not header[i].strip() or header[i][0] in " \t"):
            continuation.append(header[i])
            i += 1
        block = _BLOCK.match(raw)
        if block:
            meta[key] = _block_scalar(continuation, folded=block.group(1) == ">", chomp=block.group(2))
        elif raw[:1] in ("'", '"'):
            value, error = _quoted(" ".join([raw, *(c.strip() for c in continuation if c.strip())]))
            if error:
                problems.append(f"front matter key '{key}': {error}")
            meta[key] = value
        elif raw:
            parts = [_strip_comment(raw), *(_strip_comment(c.strip()) for c in continuation if c.strip())]
            meta[key] = " ".join(p for p in parts if p)
        else:
            meta.setdefault(key, "")  # a nested map or list follows, or the value is empty
    return meta, body, problems


def _block_scalar(lines: list[str], *, folded: bool, chomp: str) -> str:
    """A YAML `|` (literal) or `>` (folded) block. The first content line's indentation is removed.
    Folding joins lines with a space, turns each blank line into a line break and keeps the breaks around
    more-indented lines. Chomping: `-` no final newline, `+` all trailing newlines, default exactly one."""
    trailing = 0
    while lines and not lines[-1].strip():
        lines = lines[:-1]
        trailing += 1
    if not lines:
        return ""
    first = next(line for line in lines if line.strip())
    indent = len(first) - len(first.lstrip(" \t"))
    rows = [line[indent:] if line.strip() else "" for line in lines]
    if folded:
        text, previous = "", None
        for row in rows:
            if previous is None:
                text = row
            elif row == "":
                text += "\n"
            elif previous == "":
                text += row  # the blank line(s) before it already gave the break
            elif row[0] in " \t" or previous[0] in " \t":
                text += "\n" + row
            else:
                text += " " + row
            previous = row
    else:
        text = "\n".join(rows)
    if chomp == "-":
        return text
    return text + "\n" * (1 + trailing if chomp == "+" else 1)


def _quoted(raw: str) -> tuple[str, str | None]:
    """A quoted scalar; text after the closing quote other than a comment is reported."""
    quote = raw[0]
    out: list[str] = []
    i = 1
    while i < len(raw):
        ch = raw[i]
        if quote == "'" and ch == "'":
            if raw[i + 1:i + 2] == "'":
                out.append("'")
                i += 2
                continue
            return "".join(out), _trailing(raw[i + 1:])
        if quote == '"' and ch == "\\" and i + 1 < len(raw):
            nxt = raw[i + 1]
            out.append({"n": "\n", "t": "\t", '"': '"', "\\": "\\", "/": "/"}.get(nxt, "\\" + nxt))
            i += 2
            continue
        if quote == '"' and ch == '"':
            return "".join(out), _trailing(raw[i + 1:])
        out.append(ch)
        i += 1
    return raw[1:], "unterminated quoted value"


def _trailing(rest: str) -> str | None:
    rest = rest.strip()
    return None if not rest or rest.startswith("#") else f"unexpected text after the quoted value: {rest[:40]!r}"


def _strip_comment(value: str) -> str:
    """A plain scalar ends at ` #` (YAML's comment rule); a `#` inside a word is kept (`C#`, `a#b`)."""
    cut = value.find(" #")
    return (value[:cut] if cut >= 0 else value).strip()
