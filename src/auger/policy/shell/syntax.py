"""The parse tree of a shell command line: words, redirections, simple commands, groups, scripts.

Plain data, so the lexer, the parser and the analyzer can share it without sharing code.
"""

from __future__ import annotations

MAX_DEPTH = 40  # nesting ($(…), groups, sh -c …) beyond which a command is not analysed but refused


class TooDeep(Exception):
    """Nesting beyond MAX_DEPTH: the command is refused rather than half-analysed."""


class _Node:
    """A parse-tree node: named slots and a repr of them. Plain classes, not dataclasses: the first shell
    command of a process imports this module on its way to running, and making these seven classes
    dataclasses cost 2.7 ms there (0.02 ms as written); nothing compares or copies nodes."""

    __slots__: tuple[str, ...] = ()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{n}={getattr(self, n)!r}' for n in self.__slots__)})"


class Word(_Node):
    __slots__ = ("text", "raw", "subs", "quoted", "tilde", "path_text", "glob", "brace")
    text: str  # after quote removal; expansions ($x, $(…)) kept as written
    raw: str  # as in the source
    subs: list[Script]  # command and process substitutions inside the word
    quoted: bool
    tilde: bool  # starts with an unquoted "~"
    path_text: str | None  # text with $HOME expanded; None when other expansions make it unknowable
    glob: bool  # unquoted *, ? or [
    brace: bool  # an unquoted "{" (brace expansion, when a "," or ".." goes with it)

    def __init__(self, text: str, raw: str, subs: list[Script], quoted: bool = False, tilde: bool = False,
                 path_text: str | None = None, glob: bool = False, brace: bool = False) -> None:
        self.text, self.raw, self.subs, self.quoted, self.tilde = text, raw, subs, quoted, tilde
        self.path_text, self.glob, self.brace = path_text, glob, brace

    @classmethod
    def literal(cls, text: str) -> Word:
        return cls(text, text, [], path_text=text)


class Redir(_Node):
    __slots__ = ("op", "fd", "target", "body", "body_subs")
    op: str  # ">", ">>", "<<", "&>", …
    fd: str | None
    target: Word | None  # the file, fd, here-string or heredoc delimiter
    body: str | None  # heredoc body
    body_subs: list[Script] | None  # substitutions expanded in an unquoted heredoc body

    def __init__(self, op: str, fd: str | None, target: Word | None, body: str | None = None,
                 body_subs: list[Script] | None = None) -> None:
        self.op, self.fd, self.target, self.body, self.body_subs = op, fd, target, body, body_subs


class Simple(_Node):
    __slots__ = ("assigns", "words", "redirs", "keyword")
    assigns: list[Word]
    words: list[Word]
    redirs: list[Redir]
    keyword: bool  # `[[ … ]]`, `(( … ))`, `for x in …`, `case x in`: not a command of its own

    def __init__(self, assigns: list[Word], words: list[Word], redirs: list[Redir], keyword: bool = False) -> None:
        self.assigns, self.words, self.redirs, self.keyword = assigns, words, redirs, keyword


class Group(_Node):
    __slots__ = ("body", "redirs", "subshell")
    body: list[Pipeline]
    redirs: list[Redir]
    subshell: bool

    def __init__(self, body: list[Pipeline], redirs: list[Redir], subshell: bool) -> None:
        self.body, self.redirs, self.subshell = body, redirs, subshell


class FuncDef(_Node):
    __slots__ = ("name", "body")
    name: str
    body: Simple | Group | FuncDef | None

    def __init__(self, name: str, body: Simple | Group | FuncDef | None) -> None:
        self.name, self.body = name, body


Node = Simple | Group | FuncDef


class Pipeline(_Node):
    __slots__ = ("elements", "background")
    elements: list[Node]
    background: bool

    def __init__(self, elements: list[Node], background: bool = False) -> None:
        self.elements, self.background = elements, background


class Script(_Node):
    __slots__ = ("pipelines", "src")
    pipelines: list[Pipeline]
    src: str  # source text between the delimiters

    def __init__(self, pipelines: list[Pipeline], src: str) -> None:
        self.pipelines, self.src = pipelines, src
