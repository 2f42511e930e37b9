"""The analyzer: walks the parse tree, classifies each simple command and collects the findings.

It owns the state of one analysis (strictest effect, reasons, commands, outside paths, the working
directory as `cd` moves it). Programs that need their arguments read are judged by handlers from the
registry it is given; handlers return findings, and hand nested commands back to `classify`.
"""

from __future__ import annotations

import os
import re
import tempfile
from fnmatch import fnmatchcase
from itertools import chain
from typing import Callable, Iterable, Mapping

from auger.policy.gitguard import is_git_name
from auger.policy.shell.calls import (
    BLOCK_DEVICE,
    DESTINATION_ONLY,
    DISCARD_TARGETS,
    HARMLESS_DEVICES,
    WRITE_REDIRS,
    Call,
    basename,
    downloads,
    is_device,
    literal_output,
    name_risk,
    node_downloads,
    real_name,
    self_calls,
    temp_dirs,
    version_query,
    wrapped_command,
)
from auger.policy.shell.lexer import ARITH_TESTS, ASSIGN
from auger.policy.shell.parser import Parser
from auger.policy.shell.programs import (
    CODE_VARS,
    COMMAND_VARS,
    CONFIG_VAR_PREFIXES,
    DESTRUCTIVE_PROGRAMS,
    DOWNLOADERS,
    GIT_SAFE_VARS,
    MUTATING_PROGRAMS,
    READ_ONLY_PROGRAMS,
    REMOTE_PROGRAMS,
    RUN_VARS,
    WRAPPERS,
    Wrapper,
)
from auger.policy.shell.syntax import MAX_DEPTH, FuncDef, Group, Node, Pipeline, Redir, Script, Simple, TooDeep, Word
from auger.policy.shell.verdict import DESTRUCTIVE, LOCAL_MUTATION, RANK, READ_ONLY, REMOTE_ACTION, Finding, strictest

Handler = Callable[["Analyzer", Call, int, int, str], Iterable[Finding]]
"""Judges one program's arguments: `(analyzer, call, i, end, name)` where word `i` of `call` is the program
`name` and its arguments end before `end`. It returns its own findings, which the analyzer records in order;
nested commands (`find -exec`, `sh -c`) it hands back to the analyzer, which classifies them in place."""


class Analyzer:
    """Walks the parse tree, classifying simple commands and collecting the findings."""

    def __init__(self, root: str, cwd: str, home: str | None, handlers: Mapping[str, Handler],
                 depth: int = 0) -> None:
        self.handlers = handlers  # program name -> handler; the registry, passed in so handlers may import this
        self.root = root
        self.root_prefix = root if root.endswith(os.sep) else root + os.sep
        self.home = home
        self._real: dict[str, str | None] = {}  # realpath memo for this one analysis
        self.home_real = self._realpath(home) if home else None
        self.tmp_dirs = temp_dirs(tempfile.gettempdir())
        self.effect: str = READ_ONLY
        self.call_effect: str = READ_ONLY  # effect found for the simple command being analysed
        self.reasons: list[str] = []
        self.commands: list[tuple[str, ...]] = []
        self.outside: list[str] = []
        self.outside_real: list[str] = []  # each outside path resolved ("": it cannot be known)
        self.errors: list[str] = []
        self.functions: set[str] = set()
        self.downloaded: set[str] = set()  # files written by a download earlier in the line
        self.known: frozenset[str] = frozenset()  # substitutions already analysed (see run_script)
        self.depth = depth
        self.cwd = cwd
        self.cwd_outside = False
        self.set_cwd(cwd)

    # findings

    def add(self, effect: str, reason: str = "") -> None:
        rank = RANK[effect]
        if rank > RANK[self.effect]:
            self.effect = effect
        if rank > RANK[self.call_effect]:
            self.call_effect = effect
        if reason and effect != READ_ONLY and reason not in self.reasons:
            self.reasons.append(reason)

    def _enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise TooDeep

    def note_constructs(self, notes: Iterable[str]) -> None:
        """Constructs the parser saw but does not follow (bash may run commands through them)."""
        for note in notes:
            self.add(LOCAL_MUTATION, f"{note}, so the command counts as a change")

    # paths

    def inside(self, real: str) -> bool:
        return real == self.root or real.startswith(self.root_prefix)

    def in_temp(self, real: str) -> bool:
        """Under the temp dir — but an ancestor of the project is never scratch space."""
        if self.root == real or self.root.startswith(real.rstrip("/") + "/"):
            return False
        return any(real == t or real.startswith(t.rstrip("/") + "/") for t in self.tmp_dirs)

    def set_cwd(self, real: str) -> None:
        self.cwd = real
        self.cwd_outside = not self.inside(real) and not self.in_temp(real)

    def resolve_text(self, path: str, tilde: bool) -> str | None:
        """The real path `path` names from the current directory; None when it cannot be known."""
        if "\x00" in path:
            return None
        if tilde and path.startswith("~"):
            head, sep, rest = path.partition("/")
            if head != "~" or not self.home:
                return None
            path = self.home + sep + rest
        return self._realpath(path if os.path.isabs(path) else os.path.join(self.cwd, path))

    def _realpath(self, path: str) -> str | None:
        if path not in self._real:
            try:
                self._real[path] = os.path.realpath(path)
            except (ValueError, OSError):  # NUL bytes, unencodable text
                self._real[path] = None
        return self._real[path]

    def resolve(self, word: Word) -> str | None:
        return None if word.path_text is None else self.resolve_text(word.path_text, word.tilde)

    def check_path(self, word: Word, force: bool = False) -> None:
        """Report `word` if it names a path outside the project (redirect and cd targets: `force`)."""
        text, path, tilde = word.text, word.path_text, word.tilde
        if path is None or not text or text == "-" or "\x00" in text:
            return
        if not force:
            if text.startswith("-") or ASSIGN.match(text):  # --opt=VALUE, if=VALUE: only the value
                name, eq, value = text.partition("=")
                if not eq or (text.startswith("-") and not name.startswith("--")):
                    return
                text, path, tilde = value, path.partition("=")[2], value.startswith("~")
                if not text:
                    return
            looks = (text.startswith(("/", "~", "./", "../")) or "/" in text or text in ("..", "~"))
            if "://" in text or not (looks or self.cwd_outside):
                return
        if tilde and path.startswith("~") and path != "~" and not path.startswith("~/"):
            self.note_outside(text, "")  # ~user: another account's home
            return
        if path.startswith("/") and is_device(os.path.normpath(path), HARMLESS_DEVICES):
            return
        real = self.resolve_text(path, tilde)
        if real is None or self.inside(real) or self.in_temp(real) or is_device(real, HARMLESS_DEVICES):
            return
        self.note_outside(text, real)

    def note_outside(self, text: str, real: str) -> None:
        if text not in self.outside:
            self.outside.append(text)
            self.outside_real.append(real)

    def in_git_dir(self, word: Word) -> bool:
        """Whether `word` names a path inside a git directory (`.git` in any spelling, or a glob that
        matches it), within the project or anywhere else; options count by their `=value`."""
        text = word.path_text
        if text and text.startswith("-"):
            _, eq, text = text.partition("=")
            if not eq:
                return False
        real = self.resolve_text(text, word.tilde) if text else None
        if real is None:
            return False
        parts = (real[len(self.root):] if self.inside(real) else real).split("/")
        return any(is_git_name(part) or (word.glob and part.startswith(".") and fnmatchcase(".git", part.lower()))
                   for part in parts)

    def git_internals(self, call: Call) -> None:
        """A command other than git that changes something and names a path inside a git directory
        (deleting objects, truncating refs, planting a hook) is destructive: history lost that way is
        in no snapshot of the working tree, and git's own commands are the way to change it. A copy
        or link counts by its destination only (copying *from* `.git` reads it)."""
        name = real_name(call.texts)
        if name == "git":
            return
        indices = [k for k in range(1, len(call.words)) if k not in call.nonpath]
        if name in DESTINATION_ONLY:
            target = next((k + 1 for k in indices if call.texts[k] in ("-t", "--target-directory")), None)
            given = next((k for k in indices if call.texts[k].startswith("--target-directory=")), None)
            indices = [k for k in (target, given) if k is not None and k < len(call.words)] or indices[-1:]
        for k in indices:
            if self.in_git_dir(call.words[k]):
                self.add(DESTRUCTIVE, f"{call.texts[0]} changes '{call.texts[k]}' inside a git directory, which only "
                                      "git itself should change")
                return

    def critical(self, word: Word) -> str | None:
        """A description of `word` when removing or re-permissioning it would be a disaster: `/`, a
        top-level directory, the home directory or an ancestor of it or of the project, or `*` there."""
        if word.path_text is None:
            return None
        head, sep, last = word.path_text.rpartition("/")
        if word.glob and last in ("*", ".*", "*.*", "**", ".[!.]*"):
            shown = word.text.rpartition("/")[0] or "/" if sep else "."
            directory = self.resolve_text(head or "/" if sep else ".", word.tilde)
            if directory and (directory == self.root or self._critical_dir(directory)):
                return f"everything in '{shown}'"
            return None
        real = self.resolve(word)
        if real and self._critical_dir(real):
            return f"'{word.text}'"
        return None

    def _critical_dir(self, real: str) -> bool:
        if real == "/" or real.count("/") == 1:
            return True
        prefix = real + "/"
        if self.home_real and (real == self.home_real or self.home_real.startswith(prefix)):
            return True
        return self.root.startswith(prefix)

    # walking the tree

    def script(self, pipelines: list[Pipeline], upstream: list[Node] | None = None) -> None:
        for pipeline in pipelines:
            for k, element in enumerate(pipeline.elements):
                self.node(element, pipeline.elements[:k] if k else upstream)

    def node(self, node: Node | None, upstream: list[Node] | None) -> None:
        if isinstance(node, Simple):
            self.simple(node, upstream)
        elif isinstance(node, Group):
            self._enter()
            saved = self.cwd
            self.script(node.body, upstream)
            if node.subshell:
                self.set_cwd(saved)
            self.depth -= 1
            self.redirects(node.redirs)
        elif isinstance(node, FuncDef):
            self.functions.add(node.name)
            count, background = self_calls(node.body, node.name)
            if count >= 2 or background:
                self.add(DESTRUCTIVE, f"function '{node.name}' spawns copies of itself (a fork bomb)")
            saved = self.cwd
            self._enter()
            self.node(node.body, None)
            self.depth -= 1
            self.set_cwd(saved)

    def subs(self, scripts: Iterable[Script] | None) -> None:
        """Analyse command substitutions (they run, whatever the outer command does)."""
        for script in scripts or ():
            if script.src in self.known:
                continue
            self._enter()
            saved = self.cwd
            self.script(script.pipelines)
            self.set_cwd(saved)
            self.depth -= 1

    def simple(self, node: Simple, upstream: list[Node] | None) -> None:
        saved_effect, self.call_effect = self.call_effect, READ_ONLY
        if node.words and not node.keyword:
            self.commands.append(tuple(w.text for w in node.words))
        for word in chain(node.assigns, node.words):
            self.subs(word.subs)
        for r in node.redirs:
            self.subs(r.target.subs if r.target else None)
            self.subs(r.body_subs)
        if node.keyword:
            self.keyword(node.words)
        else:
            call = Call(node.words, node.redirs, upstream)
            for word in node.assigns:
                self.assignment(word)
            if node.words:
                self.classify(call, 0, len(node.words))
            own = self.call_effect
            if own != READ_ONLY:
                self.git_internals(call)
            for index, word in enumerate(node.words):
                if index in call.nonpath:
                    continue
                self.check_path(word)
                if own != READ_ONLY and word.path_text and BLOCK_DEVICE.match(os.path.normpath(word.path_text)):
                    self.add(DESTRUCTIVE, f"{call.texts[0]} writes to the disk device '{word.text}'")
        self.redirects(node.redirs, node)
        self.call_effect = strictest(saved_effect, self.call_effect)

    def keyword(self, words: list[Word]) -> None:
        """`[[ … ]]` and `for NAME in`: bash evaluates `-eq` operands and `-v` names as arithmetic, and a
        loop variable can be one that changes what runs (PATH)."""
        texts = [w.text for w in words]
        if texts[:1] == ["[["]:
            for k, text in enumerate(texts):
                if text in ARITH_TESTS and not words[k].quoted:
                    operands = words[k - 1:k] + words[k + 1:k + 2]
                    if any(w.path_text is None or not re.fullmatch(r"-?[0-9]+", w.text) for w in operands):
                        self.add(LOCAL_MUTATION, f"[[ … {text} … ]] evaluates its operands as arithmetic, where "
                                                 "an array subscript in a variable's text runs commands")
                elif text == "-v" and k + 1 < len(words):
                    self.name_target("[[ -v", words[k + 1], frozenset())
        elif texts[:1] in (["for"], ["select"]) and len(words) > 1 and not texts[1].startswith("(("):
            self.name_target(texts[0], words[1], RUN_VARS)

    def name_target(self, what: str, word: Word, dangerous: frozenset[str]) -> None:
        """A word naming a variable that `what` sets or reads."""
        if word.path_text is None:
            self.add(LOCAL_MUTATION, f"{what} names a variable only known when it runs")
            return
        risk = name_risk(word.text, dangerous)
        if risk:
            self.add(LOCAL_MUTATION, f"{what}: {risk}")

    def redirects(self, redirs: list[Redir], node: Simple | None = None) -> None:
        for r in redirs:
            target = r.target
            if target is None or r.op in ("<<", "<<-", "<<<", "<&"):
                continue
            if target.path_text and os.path.normpath(target.path_text).startswith(("/dev/tcp/", "/dev/udp/")):
                self.add(REMOTE_ACTION, f"the redirection to '{target.text}' opens a network connection")
                continue
            if r.op == ">&" and (target.text.isdigit() or target.text == "-"):
                continue  # 2>&1: duplicates a descriptor
            if target.raw.startswith(("<(", ">(")):
                continue  # process substitution, analysed with the substitutions
            self.check_path(target, force=True)
            if r.op not in WRITE_REDIRS:
                continue
            path = os.path.normpath(target.path_text) if target.path_text else None
            if path and is_device(path, DISCARD_TARGETS):
                continue
            if path and BLOCK_DEVICE.match(path):
                self.add(DESTRUCTIVE, f"output redirected to the disk device '{target.text}'")
                continue
            self.add(LOCAL_MUTATION, f"output redirected to file '{target.text}'")
            if self.in_git_dir(target):
                self.add(DESTRUCTIVE, f"output is written into the git directory ('{target.text}'), which only git "
                                      "itself should change")
            if node is not None and real_name([w.text for w in node.words]) in DOWNLOADERS:
                self.note_download(target)

    def note_download(self, word: Word) -> None:
        """Remember a file a download writes: running it later in the line runs unreviewed code."""
        real = self.resolve(word)
        if real:
            self.downloaded.add(real)

    def was_downloaded(self, word: Word) -> bool:
        return bool(self.downloaded) and self.resolve(word) in self.downloaded

    def assignment(self, word: Word | str) -> None:
        """`NAME=value` before a command, after env/sudo, or in export: some names change what runs."""
        text = word if isinstance(word, str) else word.text
        name, _, value = text.partition("=")
        risk = name_risk(name.rstrip("+"), frozenset())
        if risk:
            self.add(LOCAL_MUTATION, f"assignment: {risk}")
        name = name.rstrip("+").split("[", 1)[0]
        if name.startswith("GIT_") and name not in GIT_SAFE_VARS and name not in COMMAND_VARS:
            self.add(LOCAL_MUTATION, f"setting {name} changes which repository, settings or programs git uses")
        elif name.upper().startswith(CONFIG_VAR_PREFIXES):
            self.add(LOCAL_MUTATION, f"setting {name} changes a tool's configuration, including programs it runs")
        elif name in COMMAND_VARS or name.endswith(("PAGER", "EDITOR")):
            # as strict as the command it names (PAGER=cat stays read-only)
            self.run_script(value, [word] if isinstance(word, Word) else [])
        elif name in CODE_VARS:
            self.add(LOCAL_MUTATION, f"setting {name} changes what code programs load")
        elif name == "PATH":
            for entry in value.split(":"):
                if entry.startswith("$"):
                    continue
                real = self.resolve_text(entry, entry.startswith("~")) if entry.startswith(("/", "~")) else None
                if not entry.startswith(("/", "~")) or (real and self.inside(real)):
                    self.add(LOCAL_MUTATION, f"PATH includes '{entry or '.'}', so project files may run as "
                                             "commands")
                    break

    def run_script(self, text: str, words: Iterable[Word] = (), known: Iterable[Script] = ()) -> None:
        """Parse and analyse a script given as a string (`sh -c`, `eval`, heredoc bodies …).

        Substitutions in the words the string came from were analysed already; re-parsing finds
        them again, so they are skipped (counted once in `commands`) — though a command name that
        comes from a download is still recognised, from the tree.
        """
        self._enter()
        saved_known = self.known
        self.known = saved_known.union(s.src for w in words for s in w.subs).union(s.src for s in known)
        try:
            errors: list[str] = []
            notes: list[str] = []
            tree = Parser(text, self.home, self.depth, errors, notes).parse()
            for error in errors:
                message = f"in an embedded script: {error}"
                if message not in self.errors:
                    self.errors.append(message)
            self.script(tree)
            self.note_constructs(notes)
        finally:
            self.known = saved_known
            self.depth -= 1

    def side_analysis(self, text: str) -> tuple[str, tuple[str, ...]]:
        """Classify a script that runs elsewhere (ssh's remote command): effect only, no paths."""
        other = Analyzer(self.root, self.root, self.home, self.handlers, self.depth + 1)
        notes: list[str] = []
        other.script(Parser(text, self.home, self.depth + 1, other.errors, notes).parse())
        other.note_constructs(notes)
        return other.effect, tuple(other.reasons)

    def classify(self, call: Call, i: int, end: int) -> None:
        """Classify the command whose name is word `i` (its arguments end before `end`)."""
        if i >= end:
            return
        word = call.words[i]
        call.nonpath.add(i)
        if word.subs:
            if any(downloads(s) for s in word.subs):
                self.add(DESTRUCTIVE, "a downloaded text is run as a command")
            else:
                self.add(LOCAL_MUTATION, f"the command name '{word.text}' is computed when it runs")
            return
        if word.path_text is None:
            self.add(LOCAL_MUTATION, f"the command name '{word.text}' comes from a variable")
            return
        if "/" in word.text and self.was_downloaded(word):
            self.add(DESTRUCTIVE, f"'{word.text}' was just downloaded and is run")
            return
        name = basename(word.text)
        if name in self.functions:
            return  # its body was analysed where it was defined
        args = call.texts[i + 1:end]
        wrapper = WRAPPERS.get(name)
        if wrapper is not None:
            self.wrapper(call, i, end, name, wrapper)
            return
        if args and version_query(word.text, name, args):
            return
        handler = self.handlers.get(name)
        if handler is not None:
            for effect, reason in handler(self, call, i, end, name):
                self.add(effect, reason)
        elif name in DESTRUCTIVE_PROGRAMS:
            self.add(DESTRUCTIVE, DESTRUCTIVE_PROGRAMS[name])
        elif name in REMOTE_PROGRAMS:
            self.add(REMOTE_ACTION, f"{name} {REMOTE_PROGRAMS[name]}")
        elif name in READ_ONLY_PROGRAMS:
            pass
        elif name in MUTATING_PROGRAMS:
            self.add(LOCAL_MUTATION, MUTATING_PROGRAMS[name])
        else:
            self.add(LOCAL_MUTATION, f"unknown command '{name or word.text}' may change files")

    def wrapper(self, call: Call, i: int, end: int, name: str, wrapper: Wrapper) -> None:
        if wrapper.effect != READ_ONLY:
            self.add(wrapper.effect, wrapper.reason)
        j, special = wrapped_command(call.texts, i, end, wrapper)
        for k in range(i + 1, min(j, end)):
            if wrapper.assignments and ASSIGN.match(call.texts[k]):
                call.nonpath.add(k)
                self.assignment(call.words[k])
        written = next((a for a in call.texts[i + 1:j] if a.partition("=")[0] in wrapper.write_opts), None)
        if written:
            self.add(LOCAL_MUTATION, f"{name} {written} writes a file")
        if special == "stop":
            self.add(wrapper.stop_effect, f"{name} {call.texts[j]} changes running processes")
        elif special == "split":  # env -S 'cmd args' more args
            option = call.texts[j]
            value_at = j if "=" in option else j + 1
            text = option.partition("=")[2] if "=" in option else (call.texts[j + 1] if j + 1 < end else "")
            call.nonpath.update(range(j, end))
            if "\\" in text or "$" in text:  # env's own escapes and ${VAR} are not shell syntax
                self.add(LOCAL_MUTATION, f"{name} -S expands escapes and variables of its own")
            self.run_script(" ".join([text, *call.texts[value_at + 1:end]]), call.words[j:end])
        elif j < end:
            if name == "xargs":
                call.extra = True
            self.classify(call, j, end)

    def stdin_code(self, call: Call, name: str, shell: bool) -> None:
        """A shell or interpreter reading its program from stdin: judge what feeds it."""
        for r in call.redirs:
            if r.op in ("<<", "<<-") and r.body is not None:
                if shell:
                    self.run_script(r.body, known=r.body_subs or ())
                else:
                    self.add(LOCAL_MUTATION, f"{name} runs code from a heredoc")
                return
            if r.op == "<<<" and r.target is not None:
                if shell:
                    self.run_script(r.target.text, [r.target])
                else:
                    self.add(LOCAL_MUTATION, f"{name} runs code from a here-string")
                return
            if r.op == "<" and r.target is not None:
                self.script_file(name, r.target)
                return
        if call.upstream:
            if any(node_downloads(el) for el in call.upstream):
                self.add(DESTRUCTIVE, f"downloaded code is piped into {name}")
                return
            literal = literal_output(call.upstream[-1])
            if literal is not None and shell:
                self.run_script(literal[0], known=literal[1])
                return
            self.add(LOCAL_MUTATION, f"piped input runs as {name} code")
            return
        self.add(LOCAL_MUTATION, f"{name} runs commands from its input")

    def script_file(self, name: str, word: Word) -> None:
        if any(downloads(s) for s in word.subs):
            self.add(DESTRUCTIVE, f"{name} runs a downloaded script")
        elif self.was_downloaded(word):
            self.add(DESTRUCTIVE, f"{name} runs '{word.text}', which was just downloaded")
        else:
            self.add(LOCAL_MUTATION, f"{name} runs the script '{word.text}'")


