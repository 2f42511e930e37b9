"""Handlers for shell builtins, shells, interpreters and remote tools: cd, declare, eval, sh -c, ssh, …

These are where a command line runs other code; each returns its findings and hands that code back to
the analyzer to be judged like any other script.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Iterator

from auger.policy.shell.analyzer import Analyzer, Handler
from auger.policy.shell.calls import Call, downloads, parse_opts
from auger.policy.shell.lexer import ARITH_NOTE, ASSIGN, arith_reads_variables
from auger.policy.shell.programs import (
    CODE_VARS,
    COMMAND_VARS,
    INTERPRETERS,
    MUTATING_PROGRAMS,
    READ_ONLY_PROGRAMS,
    REMOTE_PROGRAMS,
    RUN_VARS,
    SHELLS,
    SUBCOMMANDS,
    fs,
)
from auger.policy.shell.syntax import Word
from auger.policy.shell.verdict import DESTRUCTIVE, LOCAL_MUTATION, READ_ONLY, REMOTE_ACTION, Finding


def _kill(an: Analyzer, call: Call, i: int, end: int, name: str) -> Iterator[Finding]:
    args = call.texts[i + 1:end]
    if args and args[0] in ("-l", "-L"):
        return
    k = 2 if args and args[0] in ("-s", "-n") else 1 if args and args[0].startswith("-") and args[0] != "--" else 0
    if args[k:k + 1] == ["--"]:
        k += 1
    if "-1" in args[k:]:
        yield Finding(DESTRUCTIVE, "kill -1 signals every process you can reach")
    else:
        yield Finding(LOCAL_MUTATION, MUTATING_PROGRAMS["kill"])


def _crontab(an: Analyzer, call: Call, i: int, end: int, name: str) -> Iterator[Finding]:
    flags, _ = parse_opts(call.texts[i + 1:end], "u")
    if "-r" in flags:
        yield Finding(DESTRUCTIVE, "crontab -r removes every scheduled job")
    elif "-l" not in flags:
        yield Finding(LOCAL_MUTATION, "crontab replaces scheduled jobs")


def _cd(an: Analyzer, call: Call, i: int, end: int, name: str) -> Iterable[Finding]:
    """cd changes where later relative paths in the line resolve from."""
    k = i + 1
    while k < end and call.texts[k].startswith("-") and call.texts[k] != "-":
        k += 1
        if call.texts[k - 1] == "--":
            break
    if k >= end:
        if name == "cd" and an.home_real:
            an.set_cwd(an.home_real)
        return ()
    word = call.words[k]
    call.nonpath.add(k)
    if word.text == "-" or word.glob:
        return ()
    an.check_path(word, force=True)
    real = an.resolve(word)
    if real is not None:
        an.set_cwd(real)
    return ()


def _declare(an: Analyzer, call: Call, i: int, end: int, name: str) -> Iterator[Finding]:
    """declare/typeset/local/export/readonly: assignments are judged by name and value; -n (a name
    reference), -i (arithmetic on every assignment) and exporting functions are changes."""
    flags: set[str] = set()
    for k in range(i + 1, end):
        text = call.texts[k]
        call.nonpath.add(k)
        if text[:1] in ("-", "+") and len(text) > 1 and text != "--":
            flags.update(text[1:])
        elif ASSIGN.match(text):
            an.assignment(call.words[k])
        elif text != "--":
            an.name_target(name, call.words[k], COMMAND_VARS | CODE_VARS)
    if "n" in flags:
        yield Finding(LOCAL_MUTATION, f"{name} -n makes a name reference, which expands a name from a variable's text")
    if "i" in flags:
        yield Finding(LOCAL_MUTATION,
                      f"{name} -i evaluates every value as arithmetic, where an array subscript runs commands")
    if "f" in flags and (name == "export" or "x" in flags):
        yield Finding(LOCAL_MUTATION, f"{name} -f exports functions to every child shell")


@dataclass(frozen=True)
class _NameBuiltin:
    """A builtin that sets variables named in its arguments (`read NAME`, `printf -v NAME`)."""

    values: str  # option letters that take a value
    name_opts: str  # option letters whose value is a variable name
    operands: bool  # are its operands variable names?
    unsafe: str = ""  # option letters that run code
    first_operand: int = 0  # operands before this index are not names (getopts OPTSTRING)


_NAME_BUILTINS: dict[str, _NameBuiltin] = {
    "read": _NameBuiltin("adinNptu", "a", True),
    "printf": _NameBuiltin("v", "v", False),
    "mapfile": _NameBuiltin("dnOsuCc", "", True, unsafe="C"),
    "readarray": _NameBuiltin("dnOsuCc", "", True, unsafe="C"),
    "getopts": _NameBuiltin("", "", True, first_operand=1),
    "wait": _NameBuiltin("p", "p", False),
    "unset": _NameBuiltin("", "", True),
}


def _name_builtin(an: Analyzer, call: Call, i: int, end: int, name: str) -> Iterator[Finding]:
    spec = _NAME_BUILTINS[name]
    names: list[Word] = []
    operands = 0
    k = i + 1
    while k < end:
        text = call.texts[k]
        if text == "--":
            k += 1
            break
        if not text.startswith("-") or len(text) == 1 or (name == "printf" and not text.startswith("-v")):
            break
        for m, ch in enumerate(text[1:], 1):
            if ch in spec.unsafe:
                yield Finding(LOCAL_MUTATION, f"{name} -{ch} runs a command")
            if ch in spec.values:
                value_at, attached = (k, text[m + 1:]) if m < len(text) - 1 else (k + 1, None)
                if ch in spec.name_opts and value_at < end:
                    names.append(Word.literal(attached) if attached is not None else call.words[value_at])
                k = value_at
                break
        k += 1
    if spec.operands:
        for j in range(k, end):
            if operands >= spec.first_operand:
                names.append(call.words[j])
            operands += 1
    for word in names:
        an.name_target(name, word, RUN_VARS if name != "unset" else frozenset())


def _test(an: Analyzer, call: Call, i: int, end: int, name: str) -> Iterable[Finding]:
    """`test -v NAME` / `[ -v NAME ]` evaluates an array subscript in NAME."""
    for k in range(i + 1, end - 1):
        if call.texts[k] == "-v":
            an.name_target(f"{name} -v", call.words[k + 1], frozenset())
    return ()


def _let(an: Analyzer, call: Call, i: int, end: int, name: str) -> Iterator[Finding]:
    if any(w.path_text is None or arith_reads_variables(w.text) for w in call.words[i + 1:end]):
        yield Finding(LOCAL_MUTATION, f"let: {ARITH_NOTE}")


# `set` options that only make a script stricter or chattier; others change how later commands are
# parsed or run (-k: assignments anywhere; -T: traps inherited; posix, vi …).
_SET_FLAGS = frozenset("aeuxvfCnbhmBHPE")
_SET_NAMES = fs("allexport errexit nounset xtrace verbose noglob noclobber noexec pipefail notify hashall monitor "
                "braceexpand histexpand physical errtrace")


def _set(an: Analyzer, call: Call, i: int, end: int, name: str) -> Iterator[Finding]:
    args = call.texts[i + 1:end]
    k = 0
    while k < len(args):
        a = args[k]
        if a in ("--", "-") or a[:1] not in ("-", "+"):
            return  # the rest sets the positional parameters
        letters = set(a[1:])
        if not letters - {"o"} <= _SET_FLAGS:
            yield Finding(LOCAL_MUTATION, f"set {a} changes how bash runs later commands")
        if "o" in letters:  # `set -o NAME`, `set -euo pipefail`
            if k + 1 < len(args) and args[k + 1] not in _SET_NAMES:
                yield Finding(LOCAL_MUTATION, f"set {a} {args[k + 1]} changes how bash runs later commands")
            k += 1
        k += 1


def _shopt(an: Analyzer, call: Call, i: int, end: int, name: str) -> Iterator[Finding]:
    flags, _ = parse_opts(call.texts[i + 1:end])
    if flags & {"-s", "-u", "-o"}:
        yield Finding(LOCAL_MUTATION, "shopt changes how bash parses and expands later commands (aliases, globs)")


def _alias(an: Analyzer, call: Call, i: int, end: int, name: str) -> Iterator[Finding]:
    if any("=" in w.text or w.path_text is None for w in call.words[i + 1:end]):
        yield Finding(LOCAL_MUTATION, "alias defines a command that later lines run instead of the one they name")


def _eval(an: Analyzer, call: Call, i: int, end: int, name: str) -> Iterable[Finding]:
    call.nonpath.update(range(i + 1, end))
    an.run_script(" ".join(call.texts[i + 1:end]), call.words[i + 1:end])
    return ()


def _trap(an: Analyzer, call: Call, i: int, end: int, name: str) -> Iterable[Finding]:
    """`trap ACTION SIGNAL…` runs ACTION later (EXIT, DEBUG, ERR …): it is judged like any script."""
    k = i + 1
    while k < end and call.texts[k].startswith("-") and call.texts[k] != "-":
        if call.texts[k] == "--":
            k += 1
            break
        if call.texts[k] in ("-p", "-l", "-P"):
            return ()  # prints
        k += 1
    if end - k >= 2 and call.texts[k] != "-":
        call.nonpath.add(k)
        an.run_script(call.texts[k], call.words[k:k + 1])
    return ()


def _source(an: Analyzer, call: Call, i: int, end: int, name: str) -> Iterator[Finding]:
    if i + 1 < end:
        an.script_file(name, call.words[i + 1])
    else:
        yield Finding(LOCAL_MUTATION, MUTATING_PROGRAMS["source"])


def _su(an: Analyzer, call: Call, i: int, end: int, name: str) -> Iterator[Finding]:
    yield Finding(DESTRUCTIVE, "su runs commands as another user")
    for k in range(i + 1, end):
        a = call.texts[k]
        if a in ("-c", "--command") and k + 1 < end:
            call.nonpath.add(k + 1)
            an.run_script(call.texts[k + 1], call.words[k + 1:k + 2])
        elif a.startswith("--command="):
            call.nonpath.add(k)
            an.run_script(a.partition("=")[2], call.words[k:k + 1])


_SHELL_FLAGS = _SET_FLAGS | frozenset("cs")
_SHELL_LONG = fs("--norc --noprofile --posix --noediting --restricted --verbose --version --help")


def _shell(an: Analyzer, call: Call, i: int, end: int, name: str) -> Iterator[Finding]:
    """sh/bash/zsh …: `-c SCRIPT` is analysed; a script file is a change; stdin is judged by its source."""
    args = call.texts[i + 1:end]
    has_c = from_stdin = False
    k = 0
    while k < len(args):
        a = args[k]
        if a in ("--", "-"):
            from_stdin = from_stdin or a == "-"
            k += 1
            break
        if a.startswith("--"):
            if a not in _SHELL_LONG:
                yield Finding(LOCAL_MUTATION, f"{name} {a} runs start-up files or changes how the shell runs")
            k += 2 if a in ("--rcfile", "--init-file") else 1
            continue
        if a[:1] in ("-", "+") and len(a) > 1:
            has_c = has_c or "c" in a[1:]
            from_stdin = from_stdin or "s" in a[1:]
            if not set(a[1:]) <= _SHELL_FLAGS:  # -i and -l read start-up files; -O/-o change parsing
                yield Finding(LOCAL_MUTATION, f"{name} {a} runs start-up files or changes how the shell runs")
            k += 2 if ("o" in a[1:] or "O" in a[1:]) else 1
            continue
        break
    if has_c:
        if k < len(args):
            call.nonpath.add(i + 1 + k)
            an.run_script(args[k], call.words[i + 1 + k:i + 2 + k])
        return
    if k < len(args) and not from_stdin:
        an.script_file(name, call.words[i + 1 + k])
        return
    an.stdin_code(call, name, shell=True)


def _interpreter(an: Analyzer, call: Call, i: int, end: int, name: str) -> Iterator[Finding]:
    """python/node/perl …: inline code and script files are changes; code from a download is destructive."""
    args = call.texts[i + 1:end]
    if any(downloads(s) for w in call.words[i + 1:end] for s in w.subs):
        yield Finding(DESTRUCTIVE, f"{name} runs downloaded code")
        return
    k = 0
    while k < len(args):
        a = args[k]
        if a == "-m" and name == "python" and k + 1 < len(args):
            module = args[k + 1]
            call.nonpath.update((i + 1 + k, i + 2 + k))
            known = (an.handlers.get(module) or module in SUBCOMMANDS or module in READ_ONLY_PROGRAMS
                     or module in REMOTE_PROGRAMS)
            if known:
                words = [Word.literal(module), *call.words[i + 3 + k:end]]
                an.classify(Call(words, call.redirs, call.upstream), 0, len(words))
            else:
                yield Finding(LOCAL_MUTATION, f"python -m {module} runs code that may change files")
            return
        if a == "--" or a == "-":
            k += 1
            break
        if a.startswith("-") and len(a) > 1:
            if a in ("-e", "-c", "-E", "--eval", "-p", "--print") or (
                    not a.startswith("--") and any(ch in a[1:] for ch in "ceE")):
                call.nonpath.update(range(i + 1 + k, end))
                yield Finding(LOCAL_MUTATION, f"{name} runs inline code")
                return
            k += 2 if a in ("-W", "-X", "-I", "-r", "--require", "-M", "-Q") else 1
            continue
        an.script_file(name, call.words[i + 1 + k])
        return
    if k < len(args):
        an.script_file(name, call.words[i + 1 + k])
        return
    an.stdin_code(call, name, shell=False)


def _ssh(an: Analyzer, call: Call, i: int, end: int, name: str) -> Iterator[Finding]:
    yield Finding(REMOTE_ACTION, "ssh connects to a remote host")
    args = call.texts[i + 1:end]
    k = 0
    while k < len(args):
        a = args[k]
        if a == "--":
            k += 1
            break
        if not a.startswith("-") or len(a) == 1:
            break
        for m, ch in enumerate(a[1:], 1):
            if ch in "BbcDEeFIiJLlmOoPpQRSWw":
                if m == len(a) - 1:
                    k += 1
                break
        k += 1
    call.nonpath.update(range(i + 1 + k, end))  # the host and the remote command name remote things
    remote = args[k + 1:]
    if remote:
        effect, reasons = an.side_analysis(" ".join(remote))
        if effect == DESTRUCTIVE:
            yield Finding(DESTRUCTIVE, f"ssh runs a destructive command on a remote host ({reasons[0]})" if reasons
                   else "ssh runs a destructive command on a remote host")


def _rsync(an: Analyzer, call: Call, i: int, end: int, name: str) -> Iterator[Finding]:
    args = call.texts[i + 1:end]
    flags, operands = parse_opts(args, "eBfT", {"--rsh", "--filter", "--exclude", "--include", "--files-from",
                                                "--exclude-from", "--include-from", "--temp-dir", "--partial-dir"})
    if any(f.startswith("--delete") or f == "--remove-source-files" for f in flags):
        yield Finding(DESTRUCTIVE, "rsync --delete removes files that are not in the source")
    if any(re.match(r"[^/]*::|rsync://|[^/]+:", args[k]) for k in operands):
        yield Finding(REMOTE_ACTION, "rsync copies files to or from a remote host")
        call.nonpath.update(i + 1 + k for k in operands if ":" in args[k])
    else:
        yield Finding(LOCAL_MUTATION, "rsync copies files")


def _subcommand(an: Analyzer, call: Call, i: int, end: int, name: str) -> Iterator[Finding]:
    table = SUBCOMMANDS[name]
    args = call.texts[i + 1:end]
    words: list[str] = []
    k = 0
    while k < len(args) and len(words) < 2:
        a = args[k]
        if a == "--":
            break
        if a.startswith("-"):
            k += 2 if a in table.value_opts else 1
            continue
        words.append(a)
        k += 1
    if args[-1:] == ["--help"] and args[:-1] == words and (len(words) < 2 or " ".join(words) in table.effects):
        return  # `docker run --help`; but `docker run img --help` runs img, and `cargo run -- --help` runs code
    if not words:
        if table.bare != READ_ONLY:
            yield Finding(table.bare, f"{name} without a subcommand may change local files or state")
        return
    key = " ".join(words)
    effect = table.effects.get(key) or table.effects.get(words[0]) or table.default
    unsafe = next((a for a in args if a.partition("=")[0] in table.unsafe_opts), None)
    if unsafe and effect == READ_ONLY:
        yield Finding(LOCAL_MUTATION, f"{name} {unsafe.partition('=')[0]} can make it run other programs")
    sub = key if key in table.effects else words[0]
    if effect == LOCAL_MUTATION:
        yield Finding(effect, f"{name} {sub} may change local files or state")
    elif effect == REMOTE_ACTION:
        yield Finding(effect, f"{name} {sub} acts on a remote service")
    elif effect == DESTRUCTIVE:
        yield Finding(effect, f"{name} {sub} deletes data that is hard to restore")


HANDLERS: dict[str, Handler] = {
    **dict.fromkeys(SUBCOMMANDS, _subcommand), **dict.fromkeys(_NAME_BUILTINS, _name_builtin),
    "set": _set, "shopt": _shopt, "alias": _alias, "let": _let, "test": _test, "[": _test,
    "kill": _kill, "crontab": _crontab, "cd": _cd, "pushd": _cd,
    **dict.fromkeys(("export", "declare", "typeset", "local", "readonly"), _declare),
    "eval": _eval, "trap": _trap, "source": _source, ".": _source, "su": _su,
    **dict.fromkeys(SHELLS, _shell), **dict.fromkeys(INTERPRETERS, _interpreter),
    "ssh": _ssh, "rsync": _rsync,
}
