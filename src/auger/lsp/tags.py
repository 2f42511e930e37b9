"""Definitions and references by name, read with tree-sitter: what `code_nav` answers without a language server
and what the repository map ranks.

Per language, one query names the definitions (classes, functions, methods, types, module constants) and
the identifiers that may refer to one; a name's references are its identifiers elsewhere than its
definitions. This is matching by name, not resolution: two things called `run` are one name here, which
is why code_nav prefers a server and says when it did not have one.

The grammars come from `tree-sitter-language-pack` (the `lsp` extra): its 0.x wheels carry every grammar,
compiled (1.x downloads them at first use, which a sandboxed or offline machine cannot); loaded on first
use, one parser per language per thread.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Any

from auger.extras import importing

# file extension -> tree-sitter-language-pack's language name
GRAMMARS: dict[str, str] = {
    ".py": "python", ".pyi": "python", ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript",
    ".jsx": "javascript", ".ts": "typescript", ".mts": "typescript", ".cts": "typescript", ".tsx": "tsx",
    ".go": "go", ".rs": "rust", ".java": "java", ".c": "c", ".h": "c", ".cc": "cpp", ".cpp": "cpp",
    ".cxx": "cpp", ".hpp": "cpp", ".hh": "cpp", ".rb": "ruby",
}
_TS_DEFS = """
(function_declaration name: (identifier) @def.function)
(generator_function_declaration name: (identifier) @def.function)
(class_declaration name: (_) @def.class)
(method_definition name: (property_identifier) @def.method)
(variable_declarator name: (identifier) @def.variable value: [(arrow_function) (function_expression)])
"""
_TS_TYPES = """
(interface_declaration name: (type_identifier) @def.interface)
(type_alias_declaration name: (type_identifier) @def.type)
(enum_declaration name: (identifier) @def.enum)
(abstract_class_declaration name: (type_identifier) @def.class)
"""
QUERIES: dict[str, tuple[str, str]] = {  # language -> (definitions, references)
    "python": ("""
(class_definition name: (identifier) @def.class)
(function_definition name: (identifier) @def.function)
(module [(assignment left: (identifier) @def.constant)
         (expression_statement (assignment left: (identifier) @def.constant))])
""", "(identifier) @ref"),
    "javascript": (_TS_DEFS, "[(identifier) (property_identifier) (shorthand_property_identifier)] @ref"),
    "typescript": (_TS_DEFS + _TS_TYPES,
                   "[(identifier) (property_identifier) (shorthand_property_identifier) (type_identifier)] @ref"),
    "tsx": (_TS_DEFS + _TS_TYPES,
            "[(identifier) (property_identifier) (shorthand_property_identifier) (type_identifier)] @ref"),
    "go": ("""
(function_declaration name: (identifier) @def.function)
(method_declaration name: (field_identifier) @def.method)
(type_spec name: (type_identifier) @def.type)
""", "[(identifier) (field_identifier) (type_identifier)] @ref"),
    "rust": ("""
(function_item name: (identifier) @def.function)
(struct_item name: (type_identifier) @def.struct)
(enum_item name: (type_identifier) @def.enum)
(trait_item name: (type_identifier) @def.trait)
(type_item name: (type_identifier) @def.type)
(mod_item name: (identifier) @def.module)
(macro_definition name: (identifier) @def.macro)
""", "[(identifier) (field_identifier) (type_identifier)] @ref"),
    "java": ("""
(class_declaration name: (identifier) @def.class)
(interface_declaration name: (identifier) @def.interface)
(enum_declaration name: (identifier) @def.enum)
(method_declaration name: (identifier) @def.method)
""", "[(identifier) (type_identifier)] @ref"),
    "c": ("""
(function_definition declarator: (function_declarator declarator: (identifier) @def.function))
(struct_specifier name: (type_identifier) @def.struct body: (_))
(type_definition declarator: (type_identifier) @def.type)
""", "[(identifier) (field_identifier) (type_identifier)] @ref"),
    "cpp": ("""
(function_definition declarator: (function_declarator declarator: [(identifier) (field_identifier)] @def.function))
(class_specifier name: (type_identifier) @def.class body: (_))
(struct_specifier name: (type_identifier) @def.struct body: (_))
""", "[(identifier) (field_identifier) (type_identifier)] @ref"),
    "ruby": ("""
(method name: (identifier) @def.method)
(class name: (constant) @def.class)
(module name: (constant) @def.module)
""", "[(identifier) (constant)] @ref"),
}
MAX_LINE_TEXT = 160  # characters of a definition's line kept (the map shows it)


@dataclass(frozen=True)
class Definition:
    name: str
    kind: str  # class, function, method, type, …
    line: int  # 1-based
    column: int  # 1-based, in characters
    text: str  # its line, stripped (a signature, mostly)


@dataclass(frozen=True)
class FileTags:
    """What one file defines and the names it uses (each name with the lines it is used on)."""

    definitions: tuple[Definition, ...]
    references: dict[str, tuple[int, ...]]


def grammar_for(path: str) -> str | None:
    return GRAMMARS.get(os.path.splitext(path)[1].lower())


_local = threading.local()


def _tools(language: str) -> tuple[Any, Any, Any]:
    """(parser, definitions query, references query) of a language, made once per thread."""
    cache: dict[str, tuple[Any, Any, Any]] = getattr(_local, "cache", None) or {}
    _local.cache = cache
    if language not in cache:
        with importing("lsp", "code_nav without a language server, and repo_map,"):
            from tree_sitter import Query
            from tree_sitter_language_pack import get_language, get_parser
        grammar = get_language(language)  # type: ignore[arg-type]  # checked against GRAMMARS, a Literal there
        definitions, references = QUERIES[language]
        cache[language] = (get_parser(language), Query(grammar, definitions), Query(grammar, references))  # type: ignore[arg-type]  # same
    return cache[language]


def tags(path: str, text: str, *, references: bool = True) -> FileTags | None:
    """The file's definitions and (unless `references` is false: the map reads names its own way, much
    faster) references, or None for a language without a grammar here."""
    language = grammar_for(path)
    if language is None:
        return None
    with importing("lsp", "code_nav without a language server, and repo_map,"):
        from tree_sitter import QueryCursor
    parser, definitions, references_query = _tools(language)
    data = text.encode("utf-8", "surrogateescape")
    tree = parser.parse(data)
    lines = text.splitlines()
    found: list[Definition] = []
    places: set[tuple[int, int]] = set()
    for capture, nodes in QueryCursor(definitions).captures(tree.root_node).items():
        kind = capture.split(".", 1)[1] if "." in capture else "definition"
        for node in nodes:
            row, col = node.start_point
            name = data[node.start_byte:node.end_byte].decode("utf-8", "surrogateescape")
            line_text = lines[row].strip()[:MAX_LINE_TEXT] if row < len(lines) else ""
            found.append(Definition(name, kind, row + 1, _chars(lines, row, col) + 1, line_text))
            places.add((row, col))
    used: dict[str, list[int]] = {}
    for nodes in QueryCursor(references_query).captures(tree.root_node).values() if references else ():
        for node in nodes:
            if node.start_point in places:
                continue
            name = data[node.start_byte:node.end_byte].decode("utf-8", "surrogateescape")
            used.setdefault(name, []).append(node.start_point[0] + 1)
    found.sort(key=lambda d: (d.line, d.column))
    return FileTags(tuple(found), {name: tuple(sorted(set(rows))) for name, rows in used.items()})


def _chars(lines: list[str], row: int, byte_col: int) -> int:
    """A byte column of a line as a character column."""
    if row >= len(lines):
        return byte_col
    return len(lines[row].encode("utf-8", "surrogateescape")[:byte_col].decode("utf-8", "surrogateescape"))


def occurrences(text: str, name: str, path: str) -> list[tuple[int, int]]:
    """(line, column), 1-based, of every identifier `name` in the file (definitions included)."""
    language = grammar_for(path)
    if language is None:
        return []
    with importing("lsp", "code_nav without a language server, and repo_map,"):
        from tree_sitter import QueryCursor
    parser, definitions, references = _tools(language)
    data = text.encode("utf-8", "surrogateescape")
    tree = parser.parse(data)
    lines = text.splitlines()
    target = name.encode("utf-8", "surrogateescape")
    places = set()
    for query in (definitions, references):
        for nodes in QueryCursor(query).captures(tree.root_node).values():
            for node in nodes:
                if data[node.start_byte:node.end_byte] == target:
                    row, col = node.start_point
                    places.add((row + 1, _chars(lines, row, col) + 1))
    return sorted(places)
