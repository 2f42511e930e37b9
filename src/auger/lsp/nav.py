"""`code_nav`: definitions, references, hover, a file's symbols, a workspace search and rename previews, asked
of the language server that reads the file, in few lines.

The symbol is named by file and position (`path`, `line`, `column`), or by file and line with its name
(`symbol`: the column is found), or by name alone (its definition is looked up first). A server is
started if none runs (it may take the first call a while: the wait is bounded, and the answer then comes
from tree-sitter, saying so); without one — none installed, none for this language, or it failed — the
answer is tree-sitter's, by name (lsp/tags.py), marked as such. A rename is never applied: its preview is
a patch in apply_patch's format, checked to apply to the files as they are now.
"""

from __future__ import annotations

import asyncio
import difflib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from auger.extras import MissingExtra
from auger.lsp.client import LanguageServer, ServerFailed, char_column, utf16_column
from auger.lsp.files import Project
from auger.lsp.jsonrpc import RpcError
from auger.lsp.manager import LanguageServers
from auger.lsp.servers import ServerSpec
from auger.tools.base import ToolError, ToolResult

MAX_REFERENCES = 200  # locations listed; more are counted
MAX_SYMBOLS = 120
MAX_HOVER = 2000  # characters
CANDIDATES_MAX = 25  # files mentioning the name opened before asking for references (tsserver sees open files)
_CAPABILITY = {"definition": "definitionProvider", "references": "referencesProvider", "hover": "hoverProvider",
               "symbols": "documentSymbolProvider", "workspace_symbols": "workspaceSymbolProvider",
               "rename": "renameProvider"}
_KINDS = {1: "file", 2: "module", 3: "namespace", 4: "package", 5: "class", 6: "method", 7: "property", 8: "field",
          9: "constructor", 10: "enum", 11: "interface", 12: "function", 13: "variable", 14: "constant",
          15: "string", 16: "number", 17: "boolean", 18: "array", 19: "object", 20: "key", 21: "null",
          22: "enum member", 23: "struct", 24: "event", 25: "operator", 26: "type parameter"}
_WORD = re.compile(r"[\w$]+")


@dataclass
class Target:
    """Where the symbol is: a file, a 0-based line and character, and its name."""

    rel: str
    line: int
    char: int
    name: str
    text: str  # the file's text


async def navigate(args: dict[str, Any], project: Project, servers: LanguageServers | None, *,
                   wait: float) -> ToolResult:
    op = args["op"]
    if op == "workspace_symbols":
        return await _workspace_symbols(args, project, servers, wait)
    target = await _locate(args, project)
    if op == "rename" and not str(args.get("new_name") or "").strip():
        raise ToolError("code_nav: rename needs `new_name`")
    why = ""
    if servers is not None:
        for spec in servers.specs_for(target.rel):
            server, why = await _ready(servers, spec, op, wait)
            if server is None:
                continue
            try:
                async with asyncio.timeout(wait):
                    async with server.lock:
                        return await _ask(server, spec, op, target, args, project)
            except (TimeoutError, RpcError, ServerFailed) as exc:
                why = f"{spec.name}: {exc or 'no answer within ' + format(wait, 'g') + ' s'}"
    if op == "rename":
        raise ToolError(f"code_nav: rename needs a language server for {target.rel}"
                        f"{' (' + why + ')' if why else ', and none runs for it'}")
    try:
        text = await asyncio.to_thread(_by_name, op, target, project)
    except MissingExtra as exc:
        return ToolResult(f"{why + '; ' if why else 'No language server answers for this file; '}{exc}", ok=False)
    note = f"(no language server{': ' + why if why else ''}; matched by name with tree-sitter)"
    return ToolResult(f"{text}\n{note}")


async def _ready(servers: LanguageServers, spec: ServerSpec, op: str,
                 wait: float) -> tuple[LanguageServer | None, str]:
    """The started server if it offers `op`, else (None, why)."""
    try:
        server = await asyncio.wait_for(asyncio.shield(servers.start(spec)), wait)
    except TimeoutError:
        return None, f"{spec.name} is still starting"
    except ServerFailed as exc:
        return None, str(exc)
    if not server.capabilities.get(_CAPABILITY[op]):
        return None, ""
    servers.used(spec)
    return server, ""


# --- where the symbol is ---------------------------------------------------------------------------


async def _locate(args: dict[str, Any], project: Project) -> Target:
    name = str(args.get("symbol") or "").strip()
    raw = args.get("path")
    if not raw:
        if not name:
            raise ToolError("code_nav: name the symbol: `path` and `line` (and `column`), or `symbol`")
        return await asyncio.to_thread(_find_definition, project, name)
    rel = _relative(project.root, str(raw))
    text = project.read(rel)
    if text is None:
        raise ToolError(f"code_nav: {raw} is not a readable file in the project")
    lines = text.splitlines()
    line = args.get("line")
    if line is None:
        if not name:
            if args["op"] == "symbols":
                return Target(rel, 0, 0, "", text)
            raise ToolError("code_nav: give `line` (and `column` or `symbol`) to point at the symbol in the file")
        for number, line_text in enumerate(lines):
            at = _word_at(line_text, name)
            if at is not None and _defines(line_text, name):
                return Target(rel, number, at, name, text)
        for number, line_text in enumerate(lines):
            at = _word_at(line_text, name)
            if at is not None:
                return Target(rel, number, at, name, text)
        raise ToolError(f"code_nav: {name!r} does not occur in {rel}")
    if not 1 <= line <= max(1, len(lines)):
        raise ToolError(f"code_nav: {rel} has {len(lines)} lines; line {line} is not one of them")
    line_text = lines[line - 1] if lines else ""
    column = args.get("column")
    if column is not None:
        char = min(column - 1, len(line_text))
        word = _word_around(line_text, char)
        return Target(rel, line - 1, char, name or word, text)
    if name:
        at = _word_at(line_text, name)
        if at is None:
            raise ToolError(f"code_nav: {name!r} is not on line {line} of {rel}: {line_text.strip()[:120]}")
        return Target(rel, line - 1, at, name, text)
    match = _WORD.search(line_text.lstrip())
    if args["op"] == "symbols":
        return Target(rel, line - 1, 0, "", text)
    raise ToolError(f"code_nav: give `column` or `symbol` to say which name on line {line} "
                    f"({line_text.strip()[:120]!r}{', e.g. ' + repr(match.group()) if match else ''})")


def _relative(root: Path, raw: str) -> str:
    full = os.path.normpath(os.path.join(root, os.path.expanduser(raw)))
    rel = os.path.relpath(full, root)
    if rel.startswith(".."):
        raise ToolError(f"code_nav: {raw} is outside the project")
    return rel.replace(os.sep, "/")


def _word_at(line_text: str, name: str) -> int | None:
    match = re.search(rf"(?<![\w$]){re.escape(name)}(?![\w$])", line_text)
    return match.start() if match else None


def _word_around(line_text: str, char: int) -> str:
    for match in _WORD.finditer(line_text):
        if match.start() <= char <= match.end():
            return match.group()
    return ""


def _defines(line_text: str, name: str) -> bool:
    """A line that looks like it defines `name` (a cheap guess, before asking anything)."""
    return bool(re.search(rf"\b(def|class|function|func|fn|type|interface|struct|enum|trait|const|let|var|"
                          rf"module)\s+(\([^)]*\)\s*)?{re.escape(name)}\b", line_text)) or \
        bool(re.match(rf"\s*{re.escape(name)}\s*[:=]", line_text))


def _find_definition(project: Project, name: str) -> Target:
    """The first definition named `name` in the project (tree-sitter), else its first occurrence."""
    from auger.lsp.tags import GRAMMARS, tags

    files = project.files(frozenset(GRAMMARS))
    for rel in files:
        text = project.read(rel)
        if text is None or name not in text:
            continue
        found = tags(rel, text)
        for d in found.definitions if found is not None else ():
            if d.name == name:
                return Target(rel, d.line - 1, d.column - 1, name, text)
    raise ToolError(f"code_nav: no definition of {name!r} found in the project; give `path` and `line`")


# --- asking the server -------------------------------------------------------------------------------


async def _ask(server: LanguageServer, spec: ServerSpec, op: str, target: Target, args: dict[str, Any],
               project: Project) -> ToolResult:
    language = spec.serves(target.rel) or spec.languages[0]
    server.sync(target.rel, target.text, language)
    document = {"uri": server.uri(target.rel)}
    lines = target.text.splitlines()
    position = {"line": target.line,
                "character": utf16_column(lines[target.line], target.char) if target.line < len(lines) else 0}
    where = {"textDocument": document, "position": position}
    if op == "symbols":
        return ToolResult(_symbols(await server.request("textDocument/documentSymbol", {"textDocument": document}),
                                   target.rel))
    if op == "definition":
        found = await server.request("textDocument/definition", where)
        return ToolResult(_locations(found, project, f"definition of {target.name or 'the symbol'}", spec.name))
    if op == "hover":
        found = await server.request("textDocument/hover", where)
        return ToolResult(_hover(found) or f"{spec.name} has nothing to say about {target.name or 'that position'}.")
    opened = await _open_candidates(server, spec, target, project)  # references and rename: the other files
    try:
        if op == "references":
            found = await server.request("textDocument/references", {**where, "context": {"includeDeclaration": True}})
            return ToolResult(_references(found, project, target.name, spec.name))
        new_name = str(args["new_name"]).strip()
        edit = await server.request("textDocument/rename", {**where, "newName": new_name})
        return ToolResult(_rename_patch(edit, project, target.name, new_name, spec.name))
    finally:
        for rel in opened:
            server.forget(rel)


async def _open_candidates(server: LanguageServer, spec: ServerSpec, target: Target, project: Project) -> list[str]:
    """Open the files that mention the name: servers look for references among the files they have open
    (pyright checking open files only, tsserver without a tsconfig); the ones opened here, to close after."""
    if not target.name:
        return []
    extensions = frozenset(ext for language in spec.languages for ext in _extensions(language)) | set(spec.extensions)
    opened = []
    for rel in await project.mentioning(target.name, extensions, CANDIDATES_MAX):
        if rel in server.documents:
            continue
        text = project.read(rel)
        if text is not None:
            server.sync(rel, text, spec.serves(rel) or spec.languages[0])
            opened.append(rel)
    return opened


def _extensions(language: str) -> tuple[str, ...]:
    from auger.lsp.servers import LANGUAGES

    return LANGUAGES.get(language, ())


def _path(uri: str, root: Path) -> str:
    parsed = urlparse(uri)
    path = unquote(parsed.path) if parsed.scheme == "file" else uri
    try:
        rel = os.path.relpath(path, root)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel.replace(os.sep, "/")


def _line_of(project: Project, rel: str, line: int, cache: dict[str, list[str]]) -> str:
    if rel not in cache:
        text = project.read(rel) if not os.path.isabs(rel) else None
        cache[rel] = text.splitlines() if text is not None else []
    lines = cache[rel]
    return lines[line].strip()[:160] if 0 <= line < len(lines) else ""


def _spots(found: Any) -> list[tuple[str, int, int]]:
    """(uri, line, UTF-16 character) of a Location, a Location[] or a LocationLink[]."""
    items = found if isinstance(found, list) else [found] if isinstance(found, dict) else []
    out = []
    for item in items:
        if not isinstance(item, dict):
            continue
        uri = item.get("uri") or item.get("targetUri")
        where = item.get("range") or item.get("targetSelectionRange") or item.get("targetRange")
        start = where.get("start") if isinstance(where, dict) else None
        if isinstance(uri, str) and isinstance(start, dict) and isinstance(start.get("line"), int):
            character = start.get("character")
            out.append((uri, start["line"], character if isinstance(character, int) else 0))
    return out


def _kind(value: Any) -> str:
    return _KINDS.get(value, "symbol") if isinstance(value, int) else "symbol"


def _locations(found: Any, project: Project, what: str, server: str) -> str:
    spots = _spots(found)
    if not spots:
        return f"{server} found no {what}."
    cache: dict[str, list[str]] = {}
    lines = [f"{_path(uri, project.root)}:{line + 1}: {_line_of(project, _path(uri, project.root), line, cache)}"
             for uri, line, _ in spots[:20]]
    return "\n".join(lines)


def _references(found: Any, project: Project, name: str, server: str) -> str:
    spots = sorted({(_path(uri, project.root), line) for uri, line, _ in _spots(found)},
                   key=lambda spot: (spot[0], spot[1]))
    if not spots:
        return f"{server} found no references of {name or 'the symbol'}."
    files = sorted({rel for rel, _ in spots})
    out = [f"{len(spots)} reference{'s' if len(spots) > 1 else ''} of {name or 'the symbol'} in {len(files)} "
           f"file{'s' if len(files) > 1 else ''} ({server}):"]
    cache: dict[str, list[str]] = {}
    for rel, line in spots[:MAX_REFERENCES]:
        out.append(f"{rel}:{line + 1}: {_line_of(project, rel, line, cache)}")
    if len(spots) > MAX_REFERENCES:
        out.append(f"… and {len(spots) - MAX_REFERENCES} more")
    return "\n".join(out)


def _hover(found: Any) -> str:
    contents = found.get("contents") if isinstance(found, dict) else None
    parts = contents if isinstance(contents, list) else [contents]
    texts = []
    for part in parts:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict) and isinstance(part.get("value"), str):
            texts.append(part["value"])
    text = "\n".join(t.strip() for t in texts if t.strip())
    return text[:MAX_HOVER] + ("…" if len(text) > MAX_HOVER else "")


def _symbols(found: Any, rel: str) -> str:
    out: list[str] = []

    def walk(items: list[Any], depth: int) -> None:
        for item in items:
            if not isinstance(item, dict) or len(out) >= MAX_SYMBOLS:
                continue
            where = item.get("selectionRange") or item.get("range") or (item.get("location") or {}).get("range")
            start = where.get("start", {}) if isinstance(where, dict) else {}
            kind = _kind(item.get("kind"))
            line = start.get("line", 0) + 1 if isinstance(start.get("line"), int) else "?"
            out.append(f"{'  ' * depth}{line} {kind} {item.get('name', '?')}")
            children = item.get("children")
            if isinstance(children, list):
                walk(children, depth + 1)

    walk(found if isinstance(found, list) else [], 0)
    return f"{rel}:\n" + "\n".join(out) if out else f"No symbols in {rel}."


# --- workspace symbols ---------------------------------------------------------------------------------


async def _workspace_symbols(args: dict[str, Any], project: Project, servers: LanguageServers | None,
                             wait: float) -> ToolResult:
    query = str(args.get("symbol") or "").strip()
    if not query:
        raise ToolError("code_nav: workspace_symbols needs `symbol`: the name (or part of it) to search for")
    specs: list[ServerSpec] = []
    if servers is not None:
        if args.get("path"):
            specs = servers.specs_for(_relative(project.root, str(args["path"])))
        else:
            specs = [server.spec for server in servers.live]
    lines: list[str] = []
    for spec in specs:
        assert servers is not None
        server, _ = await _ready(servers, spec, "workspace_symbols", wait)
        if server is None:
            continue
        try:
            async with asyncio.timeout(wait):
                found = await server.request("workspace/symbol", {"query": query})
        except (TimeoutError, RpcError, ServerFailed):
            continue
        for item in found if isinstance(found, list) else []:
            if not isinstance(item, dict) or len(lines) >= MAX_SYMBOLS:
                continue
            location = item.get("location")
            location = location if isinstance(location, dict) else {}
            spot = _spots(location)
            kind = _kind(item.get("kind"))
            where = (f"{_path(spot[0][0], project.root)}:{spot[0][1] + 1}" if spot
                     else _path(str(location.get("uri", "")), project.root))
            lines.append(f"{where} {kind} {item.get('name', '?')}")
        if lines:
            return ToolResult(f"{len(lines)} symbol{'s' if len(lines) > 1 else ''} matching {query!r} "
                              f"({spec.name}):\n" + "\n".join(lines))
    try:
        text = await asyncio.to_thread(_symbols_by_name, project, query)
    except MissingExtra as exc:
        return ToolResult(str(exc), ok=False)
    return ToolResult(f"{text}\n(no language server answered; matched by name with tree-sitter)")


# --- tree-sitter, by name ------------------------------------------------------------------------------


def _by_name(op: str, target: Target, project: Project) -> str:
    from auger.lsp.tags import GRAMMARS, occurrences, tags

    if op == "symbols":
        found = tags(target.rel, target.text)
        if found is None:
            return f"No grammar for {target.rel}."
        return f"{target.rel}:\n" + "\n".join(f"{d.line} {d.kind} {d.name}" for d in found.definitions[:MAX_SYMBOLS])
    name = target.name
    if not name:
        raise ToolError("code_nav: no name at that position")
    extension = os.path.splitext(target.rel)[1].lower()
    language = GRAMMARS.get(extension)
    related = frozenset(ext for ext, lang in GRAMMARS.items() if _family(lang) == _family(language))
    definitions: list[str] = []
    places: list[tuple[str, int, str]] = []
    for rel in project.files(related or frozenset({extension})):
        text = project.read(rel)
        if text is None or name not in text:
            continue
        lines = text.splitlines()
        if op in ("definition", "hover"):
            found = tags(rel, text)
            for d in found.definitions if found is not None else ():
                if d.name == name:
                    body = _docstring(lines, d.line) if op == "hover" else ""
                    definitions.append(f"{rel}:{d.line}: {d.text}{body}")
        else:
            for line, _column in occurrences(text, name, rel):
                places.append((rel, line, lines[line - 1].strip()[:160] if line <= len(lines) else ""))
    if op in ("definition", "hover"):
        return "\n".join(definitions[:20]) or f"No definition named {name!r} found."
    if not places:
        return f"No occurrence of {name!r} found."
    files = sorted({rel for rel, _, _ in places})
    out = [f"{len(places)} occurrence{'s' if len(places) > 1 else ''} of {name} in {len(files)} "
           f"file{'s' if len(files) > 1 else ''}:"]
    out += [f"{rel}:{line}: {text}" for rel, line, text in places[:MAX_REFERENCES]]
    if len(places) > MAX_REFERENCES:
        out.append(f"… and {len(places) - MAX_REFERENCES} more")
    return "\n".join(out)


def _family(language: str | None) -> str | None:
    """Languages whose files refer to each other (a TypeScript file imports JavaScript)."""
    return {"typescript": "js", "tsx": "js", "javascript": "js", "c": "c", "cpp": "c"}.get(language or "", language)


def _docstring(lines: list[str], line: int) -> str:
    """The few lines after a definition's that document it (a docstring or a comment), for hover."""
    following: list[str] = []
    for text in lines[line:line + 6]:
        stripped = text.strip()
        if not stripped or not (stripped.startswith(('"""', "'''", "#", "//", "/*", "*")) or following):
            break
        following.append(stripped)
        if len(following) > 1 and stripped.endswith(('"""', "'''", "*/")):
            break
    return ("\n    " + "\n    ".join(following)) if following else ""


def _symbols_by_name(project: Project, query: str) -> str:
    from auger.lsp.tags import GRAMMARS, tags

    lowered = query.lower()
    found = []
    for rel in project.files(frozenset(GRAMMARS)):
        text = project.read(rel)
        if text is None or lowered not in text.lower():
            continue
        result = tags(rel, text)
        for d in result.definitions if result is not None else ():
            if lowered in d.name.lower():
                found.append(f"{rel}:{d.line} {d.kind} {d.name}")
                if len(found) >= MAX_SYMBOLS:
                    break
        if len(found) >= MAX_SYMBOLS:
            break
    return "\n".join(found) or f"No definition matching {query!r} found."


# --- rename ---------------------------------------------------------------------------------------------


def _rename_patch(edit: Any, project: Project, old: str, new: str, server: str) -> str:
    """The server's WorkspaceEdit as a patch apply_patch applies to the files as they are now."""
    from auger.changes.apply_patch import PatchError, UpdateFile, apply_chunks, parse_patch

    per_file: dict[str, list[dict[str, Any]]] = {}
    if isinstance(edit, dict):
        for uri, edits in (edit.get("changes") or {}).items():
            per_file.setdefault(uri, []).extend(e for e in edits if isinstance(e, dict))
        for change in edit.get("documentChanges") or []:
            if isinstance(change, dict) and isinstance(change.get("textDocument"), dict):
                per_file.setdefault(str(change["textDocument"].get("uri")), []).extend(
                    e for e in change.get("edits") or [] if isinstance(e, dict))
    if not per_file:
        return f"{server} has no rename of {old or 'that symbol'} to {new} (nothing to change there)."
    sections = []
    count = 0
    for uri, edits in sorted(per_file.items()):
        rel = _path(uri, project.root)
        if os.path.isabs(rel):
            raise ToolError(f"code_nav: the rename would change {rel}, outside the project; not offered")
        text = project.read(rel)
        if text is None:
            raise ToolError(f"code_nav: the rename changes {rel}, which cannot be read")
        changed = _apply_edits(text, edits)
        count += len(edits)
        for context in (3, 12, 10**9):
            section = _update_section(rel, text, changed, context)
            try:
                (op,) = parse_patch(f"*** Begin Patch\n{section}*** End Patch\n")
                assert isinstance(op, UpdateFile)
                if apply_chunks(text, op.chunks, rel).rstrip("\r\n") == changed.rstrip("\r\n"):
                    break
            except (PatchError, ValueError):
                continue
        else:
            raise ToolError(f"code_nav: the rename's change to {rel} cannot be written as a patch")
        sections.append(section)
    head = (f"Rename {old} → {new} ({server}): {count} edit{'s' if count > 1 else ''} in {len(sections)} "
            f"file{'s' if len(sections) > 1 else ''}. Nothing was changed; apply it with apply_patch:\n")
    return head + "*** Begin Patch\n" + "".join(sections) + "*** End Patch"


def _apply_edits(text: str, edits: list[dict[str, Any]]) -> str:
    """`text` with LSP TextEdits applied (UTF-16 positions; edits do not overlap)."""
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(position: dict[str, Any]) -> int:
        line, units = position.get("line", 0), position.get("character", 0)
        if line >= len(lines):
            return len(text)
        return starts[line] + char_column(lines[line].rstrip("\r\n"), units)

    spans = []
    for e in edits:
        where = e.get("range") or {}
        spans.append((offset(where.get("start", {})), offset(where.get("end", {})), str(e.get("newText", ""))))
    for start, end, new in sorted(spans, reverse=True):
        text = text[:start] + new + text[end:]
    return text


def _update_section(rel: str, old: str, new: str, context: int) -> str:
    """One `*** Update File` section with hunks of `context` lines around each change."""
    a, b = old.splitlines(), new.splitlines()
    out = [f"*** Update File: {rel}\n"]
    for group in difflib.SequenceMatcher(None, a, b, autojunk=False).get_grouped_opcodes(context):
        out.append("@@\n")
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                out += [f" {line}\n" for line in a[i1:i2]]
                continue
            out += [f"-{line}\n" for line in a[i1:i2]]
            out += [f"+{line}\n" for line in b[j1:j2]]
    return "".join(out)
