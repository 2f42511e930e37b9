"""Static helpers over parsed commands: the real program behind wrappers, option parsing, devices.

Shared by the analyzer and the program handlers; they read the tree and never record findings.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from itertools import chain
from typing import Iterable, Sequence

from auger.lazy_regex import lazy_compile
from auger.policy.shell.lexer import ASSIGN, SAFE_SUBSCRIPT
from auger.policy.shell.programs import (
    CONFIG_VAR_PREFIXES,
    DEFAULT_SHORT_HELP,
    DESTRUCTIVE_PROGRAMS,
    DOWNLOADERS,
    GIT_SAFE_VARS,
    INTERPRETERS,
    LONG_HELP_FLAGS,
    PROJECT_LOADERS,
    SHELLS,
    SHORT_HELP_FLAGS,
    VERSIONED,
    WRAPPERS,
    Wrapper,
)
from auger.policy.shell.syntax import FuncDef, Group, Node, Redir, Script, Simple, Word


def basename(text: str) -> str:
    name = text.rsplit("/", 1)[-1]
    m = VERSIONED.fullmatch(name)
    if m:
        return m.group(1)
    if name.startswith("mkfs."):
        return "mkfs"
    return name


def version_query(program: str, name: str, args: Sequence[str]) -> bool:
    """Do these arguments only ask for a version or usage text (`python --version`, `node -v`)? Never
    for a program named by a path (`./configure --help` runs the project's script) or one that loads
    the project's code or configuration first."""
    if "/" in program or name in PROJECT_LOADERS:
        return False
    short = SHORT_HELP_FLAGS.get(name)
    if short is None:
        short = frozenset() if name in SHELLS or name in INTERPRETERS or name in DESTRUCTIVE_PROGRAMS else \
            DEFAULT_SHORT_HELP
    return all(a in LONG_HELP_FLAGS or a in short for a in args)


def wrapped_command(texts: Sequence[str], i: int, end: int, wrapper: Wrapper) -> tuple[int, str | None]:
    """Where the command run by the wrapper at `i` starts: (index, None), or (index of the option, "stop"
    or "split") when the wrapper runs nothing or runs a command line given as one word."""
    j = i + 1
    remaining = wrapper.positionals
    while j < end:
        a = texts[j]
        if a == "--":
            j += 1
            break
        if a in wrapper.stop_opts:
            return j, "stop"
        if a in wrapper.split_opts or any(a.startswith(o + "=") for o in wrapper.split_opts if o.startswith("--")):
            return j, "split"
        if a in wrapper.flags:
            j += 1
            continue
        if a.startswith("-") and len(a) > 1:
            j += 2 if a in wrapper.value_opts else 1
            continue
        if wrapper.assignments and ASSIGN.match(a):
            j += 1
            continue
        if remaining:
            remaining -= 1
            j += 1
            continue
        break
    return j, None


def real_name(texts: Sequence[str]) -> str | None:
    """The program a simple command finally runs, looking through wrappers (`sudo timeout 5 curl`)."""
    i = 0
    while i < len(texts):
        name = basename(texts[i])
        wrapper = WRAPPERS.get(name)
        if wrapper is None:
            return name
        i, special = wrapped_command(texts, i, len(texts), wrapper)
        if special:
            return None
    return None


def unwrap(argv: Sequence[str]) -> tuple[str, ...]:
    """The command a simple command finally runs, for matching exec-policy rules:
    `nohup env X=1 timeout 5 /usr/bin/git push` → ("git", "push"). A wrapper that runs
    nothing or a whole command line of its own (`command -v`, `env -S`) is kept as written."""
    i = 0
    while i < len(argv) and ASSIGN.match(argv[i]):
        i += 1
    while i < len(argv):
        wrapper = WRAPPERS.get(basename(argv[i]))
        if wrapper is None:
            break
        i, special = wrapped_command(argv, i, len(argv), wrapper)
        if special:
            return tuple(argv)
    rest = tuple(argv[i:])
    return (basename(rest[0]), *rest[1:]) if rest else tuple(argv)


def downloads(script: Script) -> bool:
    return any(node_downloads(el) for pl in script.pipelines for el in pl.elements)


def node_downloads(node: Node | None) -> bool:
    """Does this part of the tree fetch something from the network (so its output is untrusted code)?"""
    if isinstance(node, Simple):
        if real_name([w.text for w in node.words]) in DOWNLOADERS:
            return True
        words = chain(node.assigns, node.words, (r.target for r in node.redirs if r.target is not None))
        bodies = chain.from_iterable(r.body_subs or () for r in node.redirs)
        return any(downloads(s) for s in chain(bodies, (s for w in words for s in w.subs)))
    if isinstance(node, Group):
        return any(node_downloads(el) for pl in node.body for el in pl.elements)
    if isinstance(node, FuncDef):
        return node_downloads(node.body)
    return False


def self_calls(node: Node | None, name: str, background: bool = False) -> tuple[int, bool]:
    """How often `name` is called inside `node`, and whether any call is backgrounded."""
    if isinstance(node, Simple):
        hit = not node.keyword and bool(node.words) and node.words[0].text == name
        return int(hit), hit and background
    if isinstance(node, Group):
        total, bg = 0, False
        for pl in node.body:
            for el in pl.elements:
                count, b = self_calls(el, name, background or pl.background)
                total, bg = total + count, bg or b
        return total, bg
    return 0, False


def literal_output(node: Node) -> tuple[str, list[Script]] | None:
    """The text a plain `echo '…'`, `printf '…'` or `cat <<EOF` prints, with the substitutions
    already expanded into it; None when the output cannot be known."""
    if not isinstance(node, Simple) or node.keyword or not node.words:
        return None
    if node.words[0].text == "cat" and len(node.words) == 1:
        bodies = [r for r in node.redirs if r.op in ("<<", "<<-", "<<<")]
        if len(bodies) == 1:
            r = bodies[0]
            if r.op == "<<<":
                return (r.target.text, r.target.subs) if r.target else None
            return (r.body, r.body_subs or []) if r.body is not None else None
        return None
    if node.words[0].text not in ("echo", "printf") or any(w.subs for w in node.words):
        return None
    args = [w.text for w in node.words[1:]]
    if node.words[0].text == "echo":
        while args and re.fullmatch(r"-[neE]+", args[0]):
            args.pop(0)
    return " ".join(args).replace("\\n", "\n"), []


def parse_opts(args: Sequence[str], short_values: str = "", long_values: Iterable[str] = ()
                ) -> tuple[set[str], list[int]]:
    """Split getopt-style arguments into option names ('-r', '--force'; clusters split, '--x=y' as
    '--x') and the indices of the operands."""
    long_values = frozenset(long_values)
    flags: set[str] = set()
    operands: list[int] = []
    k, n = 0, len(args)
    while k < n:
        a = args[k]
        if a == "--":
            operands.extend(range(k + 1, n))
            break
        if a.startswith("--"):
            name, eq, _ = a.partition("=")
            flags.add(name)
            k += 2 if not eq and name in long_values else 1
            continue
        if a.startswith("-") and len(a) > 1:
            for m, ch in enumerate(a[1:], 1):
                flags.add("-" + ch)
                if ch in short_values:
                    if m == len(a) - 1:
                        k += 1
                    break
            k += 1
            continue
        operands.append(k)
        k += 1
    return flags, operands


def cluster(args: Sequence[str], letters: str, default: str) -> str:
    """The option as written that carries one of `letters` (for reasons: 'rm -rf', not 'rm -r')."""
    for a in args:
        if a.startswith("-") and not a.startswith("--") and any(ch in a[1:] for ch in letters):
            return a
    return default


BLOCK_DEVICE = lazy_compile(r"/dev/(sd[a-z]|hd[a-z]|vd[a-z]|xvd[a-z]|nvme\d|mmcblk\d|disk\d|rdisk\d|md\d|dm-\d|"
                            r"loop\d|mapper/|mem$|kmem$|port$)")
DISCARD_TARGETS = ("/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty")
HARMLESS_DEVICES = DISCARD_TARGETS + ("/dev/stdin", "/dev/zero", "/dev/random", "/dev/urandom")
WRITE_REDIRS = frozenset({">", ">>", ">|", "&>", "&>>", "<>", ">&"})
# Programs that change only their last operand (or the -t directory) and read the others.
DESTINATION_ONLY = frozenset({"cp", "ln", "install", "rsync"})


def is_device(path: str, devices: tuple[str, ...]) -> bool:
    return path in devices or path.startswith("/dev/fd/")


@lru_cache(maxsize=8)
def temp_dirs(gettempdir: str) -> tuple[str, ...]:
    """The system temp dir, and /tmp on POSIX (macOS's gettempdir() is elsewhere, yet /tmp is scratch too)."""
    dirs = {os.path.realpath(gettempdir)}
    if os.name == "posix":
        dirs.add(os.path.realpath("/tmp"))
    return tuple(sorted(dirs))




class Call:
    """One simple command being classified: its words, redirections and what feeds its stdin."""

    __slots__ = ("words", "texts", "redirs", "upstream", "nonpath", "extra")

    def __init__(self, words: list[Word], redirs: list[Redir], upstream: list[Node] | None) -> None:
        self.words = words
        self.texts = [w.text for w in words]
        self.redirs = redirs
        self.upstream = upstream
        self.nonpath: set[int] = set()  # indices not checked as paths (command names, scripts)
        self.extra = False  # more arguments are appended when it runs (xargs)

    def option_view(self, start: int, end: int) -> list[str | None]:
        """The arguments as an option allow-list sees them: None where the text is only known when the
        command runs (an expansion, a glob that a file named `-o` would match, xargs' input)."""
        view: list[str | None] = [None if _unknowable(w) else w.text for w in self.words[start:end]]
        return view + [None] if self.extra else view


def _unknowable(word: Word) -> bool:
    return word.path_text is None or (word.glob and word.text[:1] in ("*", "?", "["))


def name_risk(text: str, dangerous: frozenset[str]) -> str | None:
    """Why setting the variable named `text` (from input, or exported) may run commands: an array
    subscript bash evaluates as arithmetic, or a name in `dangerous`."""
    base, bracket, rest = text.partition("[")
    if bracket and not SAFE_SUBSCRIPT.fullmatch(rest[:-1] if rest.endswith("]") else rest):
        return f"the array subscript in '{text}' is arithmetic on text, which can run commands"
    if base in dangerous or (base.startswith("GIT_") and base not in GIT_SAFE_VARS) or (
            dangerous and base.upper().startswith(CONFIG_VAR_PREFIXES)):
        return f"it sets {base}, which changes what runs"
    return None

