"""The grammar of bash command lines: lists, pipelines, compound commands, functions.

A tolerant recursive-descent parser over the lexer's tokens: problems become error messages and
parsing goes on. Control flow is flattened (every branch may run). It knows nothing about programs.
"""

from __future__ import annotations


from auger.lazy_regex import lazy_compile
from auger.policy.shell.calls import name_risk
from auger.policy.shell.lexer import (
    ASSIGN,
    CASE_STOPS,
    EOF,
    OP,
    REDIR,
    SEPARATORS,
    SKIP_KEYWORDS,
    STOP_BRACE,
    STOP_PAREN,
    WORD,
    Lexer,
    WordBuf,
)
from auger.policy.shell.syntax import FuncDef, Group, Node, Pipeline, Redir, Simple, Word


class Parser(Lexer):
    """The grammar over the lexer's tokens."""

    def parse_list(self, stops: frozenset[str]) -> list[Pipeline]:
        """Pipelines separated by ; & && || and newlines, up to EOF or a token in `stops` (left unread).
        Control flow is flattened: for analysis every branch and loop body may run."""
        pipelines: list[Pipeline] = []
        while True:
            kind, value, _, _ = self._peek()
            if kind == EOF:
                break
            if kind == OP:
                if value in stops:
                    break
                if value in SEPARATORS:
                    self._advance()
                    if value == "&" and pipelines:
                        pipelines[-1].background = True
                    continue
                if value != "(":
                    self._error(f"unexpected '{value}'")
                    self._advance()
                    continue
            elif kind == WORD and not value.quoted and value.text in stops:
                break
            before = self.count
            pipeline = self._pipeline(stops)
            if pipeline.elements:
                pipelines.append(pipeline)
            if self.count == before:
                self._advance()
        return pipelines

    def _pipeline(self, stops: frozenset[str]) -> Pipeline:
        elements: list[Node] = []
        while True:
            element = self._command(stops)
            if element is not None:
                elements.append(element)
            kind, value, _, _ = self._peek()
            if kind == OP and value in ("|", "|&"):
                self._advance()
                self._skip_newlines()
                if self._peek()[0] == EOF:
                    self._error(f"nothing after '{value}'")
                continue
            return Pipeline(elements)

    def _skip_newlines(self) -> None:
        while self._peek()[:2] == (OP, "\n"):
            self._advance()

    def _command(self, stops: frozenset[str]) -> Node | None:
        """One pipeline element: a group, a compound form, a function definition or a simple command.
        Keywords such as if/then/do/done only delimit commands here, so they are skipped."""
        while True:
            kind, value, start, end = self._peek()
            if (kind == WORD and not value.quoted and value.text in SKIP_KEYWORDS
                    and value.text not in stops):
                self._advance()
                if value.text == "coproc":
                    self._coproc_name()
                continue
            if kind == WORD and not value.quoted and value.text == "time" and "time" not in stops:
                self._advance()  # bash's `time` keyword times a whole pipeline, groups included
                kind, value, _, _ = self._peek()
                if kind == WORD and not value.quoted and value.text in ("-p", "--"):
                    self._advance()
                continue
            break
        if kind == OP and value == "(":
            self._advance()
            if self.tok is None and self.i == end and self.s.startswith("(", end):  # ((arithmetic))?
                b = WordBuf()
                if self._arith(b, end + 1):
                    return Simple([], [Word.literal("(("), b.word(self.s[start:self.i], False)],
                                  self._redirs(), True)
            self._enter()
            try:
                body = self.parse_list(STOP_PAREN)
                self._expect(OP, ")", "unterminated '('")
            finally:
                self.depth -= 1
            return Group(body, self._redirs(), True)
        if kind == WORD and not value.quoted:
            text = value.text
            if text == "{":
                self._advance()
                self._enter()
                try:
                    body = self.parse_list(STOP_BRACE)
                    self._expect(WORD, "}", "unterminated '{'")
                finally:
                    self.depth -= 1
                return Group(body, self._redirs(), False)
            if text == "[[":
                return self._double_bracket()
            if text in ("for", "select"):
                return self._for()
            if text == "case":
                return self._case()
            if text == "function":
                return self._function(stops)
        if kind in (WORD, REDIR):
            return self._simple(stops)
        return None

    def _coproc_name(self) -> None:
        """`coproc NAME { …; }`: the name is not a command. The coprocess outlives the statement."""
        self._note("coproc starts a process that keeps running beside the shell")
        kind, value, _, _ = self._peek()
        if kind == WORD and not value.quoted and value.text not in ("{", "(") and \
                self.s[self.i:].lstrip(" \t").startswith(("{", "(")):
            self._advance()

    def _expect(self, kind: int, value: str, message: str) -> None:
        tok = self._peek()
        if tok[0] == kind and (tok[1] == value if kind == OP else (tok[1].text == value and not tok[1].quoted)):
            self._advance()
        else:
            self._error(message)

    def _simple(self, stops: frozenset[str]) -> Node:
        """Leading NAME=value words, then argv words, with redirections anywhere among them."""
        assigns: list[Word] = []
        words: list[Word] = []
        redirs: list[Redir] = []
        while True:
            kind, value, _, end = self._peek()
            if kind == WORD:
                self._advance()
                if not words and ASSIGN.match(value.raw):
                    assigns.append(value)
                    if value.raw.endswith("=") and self.i == end and self.s.startswith("(", end):
                        self._array(value)
                    continue
                words.append(value)
            elif kind == REDIR:
                self._advance()
                redirs.append(self._redir(*value))
            elif kind == OP and value == "(" and len(words) == 1 and not assigns and not redirs:
                self._advance()  # name() body: a function definition
                self._expect(OP, ")", "expected ')' after '(' in a function definition")
                self._skip_newlines()
                self._enter()
                try:
                    return FuncDef(words[0].text, self._command(stops))
                finally:
                    self.depth -= 1
            else:
                if any(w.brace for w in words):
                    words = self._expand_braces(words)
                return Simple(assigns, words, redirs)

    def _expand_braces(self, words: list[Word]) -> list[Word]:
        """Brace expansion, as bash does it before running the command: `{rm,-rf,x}` is `rm -rf x`, and
        `sort {-o,out}` passes `-o out`. Words that mix braces with quotes or expansions are kept as
        written, with a note, since their expansion is not followed here."""
        out: list[Word] = []
        for w in words:
            expanded = _brace_expand(w.text) if w.brace else [w.text]
            if expanded == [w.text]:
                out.append(w)
                continue
            if not expanded or w.quoted or w.path_text is None or w.subs:
                self._note(f"the brace expansion in '{w.raw}' is too large or mixed with quoting or expansions")
                out.append(w)
                continue
            out.extend(Word(t, t, [], False, t.startswith("~"), t, w.glob) for t in expanded)
        return out

    def _array(self, word: Word) -> None:
        """`name=(a b c)`: keep the substitutions of the elements with the assignment."""
        self._advance()
        while True:
            kind, value, _, _ = self._peek()
            if kind == EOF:
                self._error("unterminated array assignment")
                return
            self._advance()
            if kind == OP and value == ")":
                return
            if kind == WORD:
                word.subs.extend(value.subs)
                if value.text.startswith("[") and name_risk("a" + value.text.partition("=")[0], frozenset()):
                    self._note("an array subscript in a compound assignment is arithmetic on text")

    def _redir(self, op: str, fd: str | None) -> Redir:
        kind, value, _, _ = self._peek()
        if kind != WORD:
            self._error(f"missing target after '{op}'")
            return Redir(op, fd, None)
        self._advance()
        redir = Redir(op, fd, value)
        if op in ("<<", "<<-"):
            self.pending.append(redir)
        return redir

    def _redirs(self) -> list[Redir]:
        redirs = []
        while self._peek()[0] == REDIR:
            redirs.append(self._redir(*self._advance()[1]))
        return redirs

    def _double_bracket(self) -> Simple:
        words = [Word.literal(self._advance()[1].text)]
        while True:
            kind, value, _, _ = self._peek()
            if kind == EOF:
                self._error("unterminated [[")
                break
            self._advance()
            if kind == WORD:
                words.append(value)
                if not value.quoted and value.text == "]]":
                    break
            else:
                words.append(Word.literal(value if kind == OP else (value[1] or "") + value[0]))
        return Simple([], words, self._redirs(), True)

    def _for(self) -> Simple:
        words = [Word.literal(self._advance()[1].text)]
        kind, value, start, end = self._peek()
        if kind == OP and value == "(" and self.i == end and self.s.startswith("(", end):  # for ((…; …; …))
            self._advance()
            b = WordBuf()
            if not self._arith(b, end + 1):
                self._error("unterminated for ((…))")
            words.append(b.word(self.s[start:self.i], False))
            return Simple([], words, [], True)
        while True:
            kind, value, _, _ = self._peek()
            if kind != WORD or (not value.quoted and value.text == "do"):
                return Simple([], words, [], True)
            words.append(self._advance()[1])

    def _case(self) -> Group:
        words = [Word.literal(self._advance()[1].text)]
        if self._peek()[0] == WORD:
            words.append(self._advance()[1])
        self._skip_newlines()
        kind, value, _, _ = self._peek()
        body = [Pipeline([Simple([], words, [], True)])]
        if not (kind == WORD and value.text == "in"):
            self._error("expected 'in' after 'case'")
            return Group(body, [], False)
        self._advance()
        self._enter()
        try:
            while True:
                self._skip_newlines()
                kind, value, _, _ = self._peek()
                if kind == EOF:
                    self._error("unterminated case")
                    break
                if kind == WORD and not value.quoted and value.text == "esac":
                    self._advance()
                    break
                if kind == OP and value == "(":
                    self._advance()
                while True:  # the pattern, up to its ')'
                    kind, value, _, _ = self._peek()
                    if kind == EOF:
                        break
                    self._advance()
                    if kind == OP and value == ")":
                        break
                    if kind == WORD:
                        words.extend([value])
                body.extend(self.parse_list(CASE_STOPS))
                kind, value, _, _ = self._peek()
                if kind == OP and value in (";;", ";&", ";;&"):
                    self._advance()
        finally:
            self.depth -= 1
        return Group(body, self._redirs(), False)

    def _function(self, stops: frozenset[str]) -> FuncDef:
        self._advance()
        name = self._advance()[1].text if self._peek()[0] == WORD else ""
        kind, value, _, _ = self._peek()
        if kind == OP and value == "(":
            self._advance()
            self._expect(OP, ")", "expected ')' after '(' in a function definition")
        self._skip_newlines()
        self._enter()
        try:
            return FuncDef(name, self._command(stops))
        finally:
            self.depth -= 1


_BRACE_LIMIT = 256
_SEQUENCE = lazy_compile(r"(-?\d+)\.\.(-?\d+)(?:\.\.(-?\d+))?|([A-Za-z])\.\.([A-Za-z])(?:\.\.(-?\d+))?")


def _brace_expand(text: str) -> list[str]:
    """bash's brace expansion of unquoted text: [text] when there is none, [] when it yields more than
    _BRACE_LIMIT words (then the caller does not follow it)."""
    i = 0
    while True:
        i = text.find("{", i)
        if i < 0:
            return [text]
        if i > 0 and text[i - 1] == "$":
            i += 1
            continue
        depth, commas, j = 0, [], i
        while j < len(text):
            c = text[j]
            if c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    break
            elif c == "," and depth == 1:
                commas.append(j)
            j += 1
        if j >= len(text):
            return [text]
        body = text[i + 1:j]
        if commas:
            cuts = [i, *commas, j]
            alternatives = [text[a + 1:b] for a, b in zip(cuts, cuts[1:], strict=False)]
        else:
            sequence = _brace_sequence(body)
            if sequence is None:
                i += 1
                continue
            alternatives = sequence
        pre, results = text[:i], list[str]()
        tails = _brace_expand(text[j + 1:])
        for alternative in alternatives:
            for head in _brace_expand(alternative) if commas else [alternative]:
                results.extend(pre + head + tail for tail in tails)
                if len(results) > _BRACE_LIMIT or not tails:
                    return []
        return results


def _brace_sequence(body: str) -> list[str] | None:
    """`{1..5}`, `{a..e}`, `{10..1..3}`: the words, or None when `body` is not a sequence."""
    m = _SEQUENCE.fullmatch(body)
    if m is None:
        return None
    if m.group(1) is not None:
        first, last, step = int(m.group(1)), int(m.group(2)), abs(int(m.group(3) or 1)) or 1
        if abs(last - first) // step >= _BRACE_LIMIT:
            return []
        width = len(m.group(1)) if m.group(1).lstrip("-").startswith("0") and len(m.group(1)) > 1 else 0
        values = range(first, last + (1 if last >= first else -1), step if last >= first else -step)
        return [str(v).zfill(width) for v in values]
    first, last, step = ord(m.group(4)), ord(m.group(5)), abs(int(m.group(6) or 1)) or 1
    values = range(first, last + (1 if last >= first else -1), step if last >= first else -step)
    return [chr(v) for v in values]

