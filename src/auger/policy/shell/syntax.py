"""The parse tree of a shell command line: words, redirections, simple commands, groups, scripts.

Plain data, so the lexer, the parser and the analyzer can share it without sharing code.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_DEPTH = 40  # nesting ($(…), groups, sh -c …) beyond which a command is not analysed but refused


class TooDeep(Exception):
    """Nesting beyond MAX_DEPTH: the command is refused rather than half-analysed."""


@dataclass(eq=False, slots=True)
class Word:
    text: str  # after quote removal; expansions ($x, $(…)) kept as written
    raw: str  # as in the source
    subs: list[Script]  # command and process substitutions inside the word
    quoted: bool = False
    tilde: bool = False  # starts with an unquoted "~"
    path_text: str | None = None  # text with $HOME expanded; None when other expansions make it unknowable
    glob: bool = False  # unquoted *, ? or [
    brace: bool = False  # an unquoted "{" (brace expansion, when a "," or ".." goes with it)

    @classmethod
    def literal(cls, text: str) -> Word:
        return cls(text, text, [], path_text=text)


@dataclass(eq=False, slots=True)
class Redir:
    op: str  # ">", ">>", "<<", "&>", …
    fd: str | None
    target: Word | None  # the file, fd, here-string or heredoc delimiter
    body: str | None = None  # heredoc body
    body_subs: list[Script] | None = None  # substitutions expanded in an unquoted heredoc body


@dataclass(eq=False, slots=True)
class Simple:
    assigns: list[Word]
    words: list[Word]
    redirs: list[Redir]
    keyword: bool = False  # `[[ … ]]`, `(( … ))`, `for x in …`, `case x in`: not a command of its own


@dataclass(eq=False, slots=True)
class Group:
    body: list[Pipeline]
    redirs: list[Redir]
    subshell: bool


@dataclass(eq=False, slots=True)
class FuncDef:
    name: str
    body: Simple | Group | FuncDef | None


Node = Simple | Group | FuncDef


@dataclass(eq=False, slots=True)
class Pipeline:
    elements: list[Node]
    background: bool = False


@dataclass(eq=False, slots=True)
class Script:
    pipelines: list[Pipeline]
    src: str  # source text between the delimiters

