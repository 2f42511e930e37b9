"""Tokens and words of a bash command line: quoting, expansions, substitutions, heredocs.

Words are the hard part of reading shell: a word carries its substitutions (`$(…)`, backticks, `<(…)`)
as parsed scripts, and knows when its text is only known at run time. Substitutions re-enter the
grammar, which the `Parser` subclass supplies; this module knows nothing about programs.
"""

from __future__ import annotations

import re

from auger.lazy_regex import lazy_compile
from auger.policy.shell.syntax import MAX_DEPTH, Pipeline, Redir, Script, TooDeep, Word

WORD, OP, REDIR, EOF = range(4)
_OPS_BY_CHAR = {";": (";;&", ";;", ";&", ";"), "&": ("&&", "&"), "|": ("||", "|&", "|"), "(": ("(",), ")": (")",)}
_REDIR_OPS = ("<<<", "<<-", "&>>", "<<", "<>", "<&", ">>", ">|", ">&", "&>", "<", ">")
SEPARATORS = frozenset({";", "&", "\n", "&&", "||", ";;", ";&", ";;&"})
SKIP_KEYWORDS = frozenset({"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "!", "esac",
                           "coproc"})
ARITH_TESTS = frozenset("-eq -ne -lt -le -gt -ge".split())
ARITH_NOTE = ("arithmetic reads variables, and bash evaluates a variable's text as arithmetic, where an array "
              "subscript runs commands")
STOP_PAREN = frozenset({")"})
STOP_BRACE = frozenset({"}"})
CASE_STOPS = frozenset({";;", ";&", ";;&", "esac"})
_PLAIN = lazy_compile(r"[^ \t\n;&|()<>\\'\"`$*?\[]+")
_DQ_PLAIN = lazy_compile(r"[^\"\\`$]+")
_HEREDOC_PLAIN = lazy_compile(r"[^\\`$]+")
_VAR = lazy_compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9@*#?$!-]")
ASSIGN = lazy_compile(r"[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?\+?=")
_FD_WORD = lazy_compile(r"[0-9]+|\{[A-Za-z_][A-Za-z0-9_]*\}")
_ANSI_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "'": "'", '"': '"', "a": "\a", "b": "\b",
                 "e": "\x1b", "E": "\x1b", "f": "\f", "v": "\v", "?": "?"}


class WordBuf:
    """A word under construction: its text, its path text (None once unknowable), substitutions."""

    __slots__ = ("text", "path", "path_ok", "subs", "quoted", "glob", "brace")

    def __init__(self, subs: list[Script] | None = None) -> None:
        self.text: list[str] = []
        self.path: list[str] = []
        self.path_ok = True
        self.subs: list[Script] = [] if subs is None else subs
        self.quoted = False
        self.glob = False
        self.brace = False  # an unquoted "{": bash may expand the word into several

    def lit(self, s: str) -> None:
        self.text.append(s)
        self.path.append(s)

    def expansion(self, raw: str, value: str | None = None) -> None:
        self.text.append(raw)
        if value is None:
            self.path_ok = False
        else:
            self.path.append(value)

    def word(self, raw: str, tilde: bool) -> Word:
        return Word("".join(self.text), raw, self.subs, self.quoted, tilde,
                    "".join(self.path) if self.path_ok else None, self.glob, self.brace)


class Lexer:
    """The token and word half of a tolerant reader of POSIX/bash command lines.

    It never raises on bad input (except TooDeep): problems are appended to `errors` and
    reading continues, so a line with an unbalanced quote is still analysed as far as it goes.
    Tokens are read lazily because substitutions are parsed by re-entering the grammar in the
    middle of a word: `parse_list` is the grammar's (the parser subclass), and nested sources are
    read by a fresh instance of the same class.
    """

    def __init__(self, src: str, home: str | None, depth: int, errors: list[str],
                 notes: list[str] | None = None) -> None:
        self.s = src
        self.n = len(src)
        self.i = 0
        self.home = home
        self.depth = depth
        self.errors = errors
        self.notes: list[str] = [] if notes is None else notes  # constructs that make the reading unsure
        self.pending: list[Redir] = []  # heredocs whose bodies start after the next newline
        self.tok: tuple | None = None  # the peeked token: (kind, value, start, end)
        self.count = 0  # tokens consumed, to guarantee progress

    def parse(self) -> list[Pipeline]:
        return self.parse_list(frozenset())

    def parse_list(self, stops: frozenset[str]) -> list[Pipeline]:
        """Pipelines up to EOF or a token in `stops`: the grammar, which a subclass supplies."""
        raise NotImplementedError

    # tokens

    def _error(self, message: str) -> None:
        if len(self.errors) < 5 and message not in self.errors:
            self.errors.append(message)

    def _note(self, message: str) -> None:
        """A construct bash gives a meaning this reading does not follow: the line is at least a change."""
        if message not in self.notes:
            self.notes.append(message)

    def _enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise TooDeep

    def _peek(self) -> tuple:
        if self.tok is None:
            self.tok = self._lex()
        return self.tok

    def _advance(self) -> tuple:
        tok = self._peek()
        self.tok = None
        self.count += 1
        return tok

    def _lex(self) -> tuple:
        s, n = self.s, self.n
        while True:
            i = self.i
            while i < n and s[i] in " \t":
                i += 1
            if s.startswith("\\\n", i):
                self.i = i + 2
                continue
            self.i = i
            if i >= n:
                return (EOF, None, i, i)
            c = s[i]
            if c == "#":
                j = s.find("\n", i)
                self.i = n if j < 0 else j
                continue
            if c == "\n":
                self.i = i + 1
                if self.pending:
                    self._read_heredocs()
                return (OP, "\n", i, i + 1)
            if c in "<>":
                if s.startswith("(", i + 1):
                    return self._word_token()
                return self._redir_token(None, i)
            if c == "&" and s.startswith(">", i + 1):
                return self._redir_token(None, i)
            if c in _OPS_BY_CHAR:
                for op in _OPS_BY_CHAR[c]:
                    if s.startswith(op, i):
                        self.i = i + len(op)
                        return (OP, op, i, self.i)
            return self._word_token()

    def _redir_token(self, fd: str | None, start: int) -> tuple:
        for op in _REDIR_OPS:
            if self.s.startswith(op, self.i):
                self.i += len(op)
                return (REDIR, (op, fd), start, self.i)
        raise AssertionError("unreachable: caller saw a redirection character")

    def _word_token(self) -> tuple:
        start = self.i
        word = self._read_word()
        s = self.s
        if (self.i < self.n and s[self.i] in "<>" and not s.startswith("(", self.i + 1)
                and _FD_WORD.fullmatch(word.raw)):
            return self._redir_token(word.raw, start)  # `2>file`: an fd number, not a word
        return (WORD, word, start, self.i)

    def _read_word(self) -> Word:
        s, n = self.s, self.n
        start = self.i
        b = WordBuf()
        while self.i < n:
            m = _PLAIN.match(s, self.i)
            if m:
                b.lit(m.group())
                b.brace = b.brace or "{" in m.group()
                self.i = m.end()
                continue
            c = s[self.i]
            if c in " \t\n;&|()":
                break
            if c in "<>":
                if s.startswith("(", self.i + 1):  # process substitution <(…) / >(…)
                    raw_start = self.i
                    self.i += 2
                    script = self._substitution()
                    b.subs.append(script)
                    b.expansion(s[raw_start:self.i])
                    continue
                break
            if c == "\\":
                if self.i + 1 < n:
                    if s[self.i + 1] != "\n":
                        b.lit(s[self.i + 1])
                        b.quoted = True
                    self.i += 2
                else:
                    b.lit("\\")
                    self.i += 1
            elif c == "'":
                j = s.find("'", self.i + 1)
                if j < 0:
                    self._error("unterminated single quote")
                    j = n
                b.lit(s[self.i + 1:j])
                b.quoted = True
                self.i = min(j + 1, n)
            elif c == '"':
                self.i += 1
                b.quoted = True
                self._read_dq(b, '"')
            elif c == "`":
                self._backtick(b, in_dq=False)
            elif c == "$":
                self._dollar(b, in_dq=False)
            else:  # *, ?, [
                b.glob = True
                b.lit(c)
                self.i += 1
        return b.word(s[start:self.i], s.startswith("~", start))

    def _read_dq(self, b: WordBuf, term: str | None) -> None:
        """Double-quoted text up to `term` ('"'), or a whole unquoted heredoc body (term None)."""
        s, n = self.s, self.n
        plain = _DQ_PLAIN if term else _HEREDOC_PLAIN
        escapable = '$`"\\' if term else "$`\\"
        while self.i < n:
            m = plain.match(s, self.i)
            if m:
                b.lit(m.group())
                self.i = m.end()
                continue
            c = s[self.i]
            if c == '"':
                self.i += 1
                return
            if c == "\\":
                nxt = s[self.i + 1:self.i + 2]
                if nxt == "\n":
                    self.i += 2
                elif nxt and nxt in escapable:
                    b.lit(nxt)
                    self.i += 2
                else:
                    b.lit("\\")
                    self.i += 1
            elif c == "`":
                self._backtick(b, in_dq=True)
            else:
                self._dollar(b, in_dq=True)
        if term:
            self._error("unterminated double quote")

    def _dollar(self, b: WordBuf, in_dq: bool) -> None:
        s, i = self.s, self.i
        nxt = s[i + 1:i + 2]
        if nxt == "(":
            if s.startswith("((", i + 1) and self._arith(b, i + 3):
                b.expansion(s[i:self.i])
            else:  # `$((cmd) …)` is a command substitution holding a subshell, as in bash
                self.i = i + 2
                b.subs.append(self._substitution())
                b.expansion(s[i:self.i])
        elif nxt == "{":
            self.i = i + 2
            self._param(b, i, in_dq)
        elif nxt == "[" and arith_reads_variables(s[i + 2:].partition("]")[0]):
            self._note(ARITH_NOTE)  # `$[…]`, bash's old arithmetic expansion
            b.lit("$")
            self.i = i + 1
        elif nxt == "'" and not in_dq:
            self.i = i + 2
            self._ansi_c(b)
        elif nxt == '"' and not in_dq:
            self.i = i + 2
            b.quoted = True
            self._read_dq(b, '"')
        else:
            m = _VAR.match(s, i + 1)
            if m:
                self.i = m.end()
                name = m.group()
                b.expansion(s[i:self.i], self.home if name == "HOME" else None)
            else:
                b.lit("$")
                self.i = i + 1

    def _substitution(self) -> Script:
        """The script of `$(…)` or `<(…)`, read by re-entering the parser; consumes the `)`."""
        self._enter()
        try:
            start = self.i
            body = self.parse_list(STOP_PAREN)
            kind, value, tok_start, _ = self._peek()
            if kind == OP and value == ")":
                self._advance()
            else:
                self._error("unterminated $(…)")
                self.tok = None
            return Script(body, self.s[start:tok_start])
        finally:
            self.depth -= 1

    def _backtick(self, b: WordBuf, in_dq: bool) -> None:
        s, n = self.s, self.n
        start = self.i
        i = start + 1
        out: list[str] = []
        while i < n:
            c = s[i]
            if c == "\\" and i + 1 < n:
                nx = s[i + 1]
                out.append(nx if nx in "$`\\" or (in_dq and nx == '"') else c + nx)
                i += 2
                continue
            if c == "`":
                break
            out.append(c)
            i += 1
        else:
            self._error("unterminated backquote")
        self.i = min(i + 1, n)
        b.subs.append(self._child("".join(out)))
        b.expansion(s[start:self.i])

    def _child(self, text: str) -> Script:
        self._enter()
        try:
            return Script(type(self)(text, self.home, self.depth, self.errors, self.notes).parse(), text)
        finally:
            self.depth -= 1

    def _param(self, b: WordBuf, start: int, in_dq: bool) -> None:
        """`${…}`: only `${HOME}` has a known value; substitutions inside are still found."""
        self._enter()
        try:
            s, n = self.s, self.n
            sink = WordBuf(b.subs)
            content_start = self.i
            while self.i < n:
                c = s[self.i]
                if c == "}":
                    break
                if c == "\\":
                    self.i += 2
                elif c == "'" and not in_dq:
                    j = s.find("'", self.i + 1)
                    self.i = n if j < 0 else j + 1
                elif c == '"':
                    self.i += 1
                    self._read_dq(sink, '"')
                elif c == "$":
                    self._dollar(sink, in_dq=True)
                elif c == "`":
                    self._backtick(sink, in_dq=True)
                else:
                    self.i += 1
            else:
                self._error("unterminated ${…}")
            content = s[content_start:min(self.i, n)]
            self.i = min(self.i + 1, n)
            risk = _param_risk(content)
            if risk:
                self._note(risk)
            b.expansion(s[start:self.i], self.home if content == "HOME" else None)
        finally:
            self.depth -= 1

    def _arith(self, b: WordBuf, start: int) -> bool:
        """Arithmetic from `start` (just after `$((` or `((`): not commands, though substitutions
        inside still run. Returns False, having consumed and recorded nothing, when the parens do
        not close with `))` — bash then reads nested subshells, and so must the caller."""
        self._enter()
        subs_before, errors_before, origin = len(b.subs), len(self.errors), self.i
        try:
            s, n = self.s, self.n
            self.i = start
            sink = WordBuf(b.subs)
            depth = 0
            while self.i < n:
                c = s[self.i]
                if c == "(":
                    depth += 1
                    self.i += 1
                elif c == ")":
                    if depth == 0:
                        if s.startswith("))", self.i):
                            if arith_reads_variables(s[start:self.i]):
                                self._note(ARITH_NOTE)
                            self.i += 2
                            return True
                        break
                    depth -= 1
                    self.i += 1
                elif c == "$":
                    self._dollar(sink, in_dq=True)
                elif c == "`":
                    self._backtick(sink, in_dq=True)
                elif c == '"':
                    self.i += 1
                    self._read_dq(sink, '"')
                elif c == "\\":
                    self.i += 2
                else:
                    self.i += 1
            del b.subs[subs_before:]
            del self.errors[errors_before:]
            self.i = origin
            return False
        finally:
            self.depth -= 1

    def _ansi_c(self, b: WordBuf) -> None:
        """`$'…'` with its backslash escapes decoded."""
        s, n = self.s, self.n
        i = self.i
        out: list[str] = []
        while i < n:
            c = s[i]
            if c == "'":
                break
            if c == "\\" and i + 1 < n:
                nx = s[i + 1]
                i += 2
                if nx in _ANSI_ESCAPES:
                    out.append(_ANSI_ESCAPES[nx])
                    continue
                digits, base, limit = "", 16, 0
                if nx in "xuU":
                    limit = {"x": 2, "u": 4, "U": 8}[nx]
                    while len(digits) < limit and i < n and s[i] in "0123456789abcdefABCDEF":
                        digits += s[i]
                        i += 1
                elif nx in "01234567":
                    base, digits = 8, nx
                    while len(digits) < 3 and i < n and s[i] in "01234567":
                        digits += s[i]
                        i += 1
                elif nx == "c" and i < n:
                    out.append(chr(ord(s[i]) & 0x1F))
                    i += 1
                    continue
                if digits:
                    code = int(digits, base)
                    if code == 0:  # bash ends the word's text at a NUL
                        out.append("\x00")
                        continue
                    out.append(chr(code) if code <= 0x10FFFF else "?")
                else:
                    out.append("\\" + nx)
                continue
            out.append(c)
            i += 1
        else:
            self._error("unterminated $'…'")
        self.i = min(i + 1, n)
        b.lit("".join(out).partition("\x00")[0])
        b.quoted = True

    def _read_heredocs(self) -> None:
        """After a newline, the bodies of the heredocs opened on that line, in order. An unquoted
        body still expands `$(…)`, so its substitutions are kept for analysis."""
        s, n = self.s, self.n
        for r in self.pending:
            delim = r.target.text if r.target else ""
            lines: list[str] = []
            while self.i < n:
                j = s.find("\n", self.i)
                j = n if j < 0 else j
                line = s[self.i:j]
                self.i = min(j + 1, n)
                if r.op == "<<-":
                    line = line.lstrip("\t")
                if line == delim:
                    break
                lines.append(line)
            r.body = "".join(line + "\n" for line in lines)
            if r.target is not None and not r.target.quoted:
                self._enter()
                try:
                    sink = WordBuf()
                    type(self)(r.body, self.home, self.depth, self.errors, self.notes)._read_dq(sink, None)
                    r.body_subs = sink.subs
                finally:
                    self.depth -= 1
        self.pending.clear()


SAFE_SUBSCRIPT = lazy_compile(r"[0-9@*]*")
_PARAM_NAME = lazy_compile(r"[A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*#?$!-]")


def _param_risk(content: str) -> str | None:
    """Why `${content}` may run commands in bash: indirection (`${!x}`), prompt expansion (`${x@P}`),
    or arithmetic on variable text (subscripts, `${x:offset}`); None when it cannot."""
    if content.startswith("!") and not content.endswith(("*", "@", "[@]", "[*]")):
        return "indirect expansion (${!name}) expands a name taken from a variable's text"
    if content.endswith("@P"):
        return "prompt expansion (${name@P}) runs the command substitutions in a variable's text"
    body = content[1:] if content.startswith(("#", "!")) and len(content) > 1 else content
    m = _PARAM_NAME.match(body)
    if m is None:
        return None
    rest = body[m.end():]
    if rest.startswith("["):
        close = rest.find("]")
        if close < 0 or not SAFE_SUBSCRIPT.fullmatch(rest[1:close]):
            return "an array subscript is arithmetic on variable text, which can run commands"
        rest = rest[close + 1:]
    if rest.startswith(":") and rest[1:2] not in ("-", "=", "+", "?") and arith_reads_variables(rest[1:]):
        return "a substring offset is arithmetic on variable text, which can run commands"
    return None


_NUMERIC_LITERALS = lazy_compile(r"0[xX][0-9A-Fa-f]+|[0-9]+#[0-9A-Za-z@_]+|\$[#?$!0-9-]")


def arith_reads_variables(text: str) -> bool:
    """Does this arithmetic text name a variable (bare or with $)? Literal numbers and `$#`/`$?` do not."""
    return bool(re.search(r"[A-Za-z_]", _NUMERIC_LITERALS.sub("0", text)))

