"""`@path` imports in instruction files: a line holding only `@docs/conventions.md` is replaced by that
file's text, so a project can keep its conventions in one document and point AGENTS.md at it.

Instruction files are not trusted more than the repository they come from, so an import is read the way
the file holding it was: beneath the same root (the project, or the user's config dir for the global
file), relative to the importing file's directory. What would leave that root — `..` climbing out, an
absolute or `~` path, a symlink out — is refused, and so is a cycle or a chain deeper than MAX_DEPTH; a
refusal leaves a one-line note in place (so the model knows something was left out) and a warning. A
path naming no file leaves the line as it was (it may be text) and a warning.

Only a line that is nothing but `@` and a path imports, and never inside a fenced code block: `@someone`
in a sentence, or an example in a code block, stays text. The expansion stops once the text reaches the
docs' byte budget (`project_doc_max_bytes`): the caller cuts there anyway, so nothing past it is read.

This module is pure text handling over a reader the caller supplies (context/project_docs.py reads
beneath its root handle).
"""

from __future__ import annotations

import posixpath
from dataclasses import field
from typing import Callable

from auger.lazy_dataclass import Deferred, dataclass
from auger.lazy_regex import lazy_compile

MAX_DEPTH = 5  # an import may import, this many levels deep

_IMPORT = lazy_compile(r"@(\S+)")
_FENCE = lazy_compile(r"\s*(```|~~~)")



class ImportRefused(Exception):
    """The reader could not (or must not) give an imported file; the message says why, in a few words."""


class ImportMissing(ImportRefused):
    """No such file: the line may as well be text (`@someone` alone on a line), so it stays as written."""


# root-relative path -> the file's text; raises ImportRefused
Reader = Callable[[str], str]


@dataclass
class Expansion(Deferred):
    text: str
    imported: list[str] = field(default_factory=list)  # root-relative paths, in the order they were read
    notes: list[str] = field(default_factory=list)  # one per refused import, for the warnings


def expand_imports(text: str, rel_path: str, read: Reader, *, max_bytes: int, root_name: str) -> Expansion:
    """`text` (the file at root-relative `rel_path`) with its imports expanded in place. `root_name` names
    the root in refusals ("the project", "your config directory")."""
    expansion = Expansion("")
    expansion.text = _expand(text, rel_path, (rel_path,), read, expansion, max_bytes, root_name)
    return expansion


def _expand(text: str, rel_path: str, chain: tuple[str, ...], read: Reader, out: Expansion, max_bytes: int,
            root_name: str) -> str:
    lines: list[str] = []
    size = 0
    fenced = False
    for line in text.splitlines(keepends=True):
        if _FENCE.match(line):
            fenced = not fenced
        found = None if fenced else _IMPORT.fullmatch(line.strip())
        if found is None:
            lines.append(line)
            size += len(line.encode("utf-8"))
            continue
        target = found.group(1)
        try:
            rel = _resolve(rel_path, target, root_name)
            if rel in chain:
                raise ImportRefused("an import cycle (" + " -> ".join((*chain, rel)) + ")")
            if len(chain) > MAX_DEPTH:
                raise ImportRefused(f"imports nest deeper than {MAX_DEPTH} levels")
            if size >= max_bytes:
                raise ImportRefused(f"the instructions already fill project_doc_max_bytes ({max_bytes})")
            inner = read(rel)
        except ImportRefused as exc:
            out.notes.append(f"{rel_path}: @{target} not imported: {exc}")
            lines.append(line if isinstance(exc, ImportMissing) else f"[@{target} not imported: {exc}]\n")
            continue
        out.imported.append(rel)
        body = _expand(inner, rel, (*chain, rel), read, out, max_bytes - size, root_name).strip("\n") + "\n"
        lines.append(body)
        size += len(body.encode("utf-8"))
    return "".join(lines)


def _resolve(rel_path: str, target: str, root_name: str) -> str:
    """The import's root-relative path; refused when it is absolute or climbs out of the root."""
    if target.startswith(("/", "~")) or "\0" in target:
        raise ImportRefused(f"an absolute path; imports are relative to the importing file, inside {root_name}")
    rel = posixpath.normpath(posixpath.join(posixpath.dirname(rel_path), target))
    if rel == ".." or rel.startswith("../") or rel == ".":
        raise ImportRefused(f"it leads out of {root_name}")
    return rel
