"""Handlers for file tools whose effect depends on their arguments: rm, chmod, find, sed, awk, tar, …

Each returns its findings; any command it runs (`find -exec`) goes back to the analyzer.
"""

from __future__ import annotations

import os
import re
from typing import Iterator

from auger.lazy_regex import lazy_compile
from auger.policy.shell.analyzer import Analyzer, Handler
from auger.policy.shell.calls import BLOCK_DEVICE, DISCARD_TARGETS, Call, cluster, is_device, parse_opts
from auger.policy.shell.programs import DOWNLOADERS, MUTATING_PROGRAMS, OUTPUT_OPERAND, REMOTE_PROGRAMS, fs
from auger.policy.shell.readonly_options import AWK, SED, TABLES, TAR_LISTING, first_unsafe
from auger.policy.shell.syntax import Word
from auger.policy.shell.verdict import DESTRUCTIVE, LOCAL_MUTATION, REMOTE_ACTION, Finding


def _rm(an: Analyzer, call: Call, i: int, end: int, name: str) -> Iterator[Finding]:
    args = call.texts[i + 1:end]
    flags, operands = parse_opts(args)
    destructive = False
    if flags & {"-r", "-R", "--recursive"}:
        yield Finding(DESTRUCTIVE, f"rm {cluster(args, 'rR', '--recursive')} removes files recursively")
        destructive = True
    if "--no-preserve-root" in flags:
        yield Finding(DESTRUCTIVE, "rm --no-preserve-root may remove the whole filesystem")
        destructive = True
    for k in operands:
        what = an.critical(call.words[i + 1 + k])
        if what:
            yield Finding(DESTRUCTIVE, f"rm removes {what}")
            destructive = True
    if not destructive:
        yield Finding(LOCAL_MUTATION, "rm deletes files")


def _chmod(an: Analyzer, call: Call, i: int, end: int, name: str) -> Iterator[Finding]:
    args = call.texts[i + 1:end]
    flags, operands = parse_opts(args, long_values={"--reference", "--from"})
    if flags & {"-R", "--recursive"}:
        for k in operands:
            what = an.critical(call.words[i + 1 + k])
            if what:
                yield Finding(DESTRUCTIVE, f"{name} -R changes {what}")
                return
    yield Finding(LOCAL_MUTATION, MUTATING_PROGRAMS[name])


_FIND_VALUES = fs("-name -iname -path -ipath -wholename -iwholename -regex -iregex -regextype -type -xtype -size "
                  "-newer -anewer -cnewer -mtime -mmin -atime -amin -ctime -cmin -perm -user -group -uid -gid "
                  "-links -inum -samefile -lname -ilname -maxdepth -mindepth -used -fstype -context -printf "
                  "-files0-from")
_FIND_FLAGS = fs("-empty -nouser -nogroup -readable -writable -executable -depth -d -mount -xdev -follow -noleaf "
                 "-ignore_readdir_race -noignore_readdir_race -daystart -print -print0 -ls -prune -quit -true "
                 "-false -not -a -and -o -or -help --help -version --version -warn -nowarn")
_FIND_ACTIONS = fs("-exec -execdir -ok -okdir -delete -fprint -fprint0 -fprintf -fls")  # judged one by one


def _find(an: Analyzer, call: Call, i: int, end: int, name: str) -> Iterator[Finding]:
    args = call.texts[i + 1:end]
    n = len(args)
    k = 0
    while k < n and (args[k] in ("-H", "-L", "-P") or args[k].startswith("-O") or args[k] == "-D"):
        k += 2 if args[k] == "-D" else 1
    starts = []
    view = call.option_view(i + 1, end)
    if call.extra or None in view[:k]:
        yield Finding(LOCAL_MUTATION, "a find argument is only known when it runs (it could be -delete)")
    while k < n and not args[k].startswith("-") and args[k] not in ("(", "!", ")", ","):
        if view[k] is None:
            yield Finding(LOCAL_MUTATION, "a find argument is only known when it runs (it could be -delete)")
        starts.append(i + 1 + k)
        k += 1
    while k < n:
        a = args[k]
        if view[k] is None:
            yield Finding(LOCAL_MUTATION, "a find argument is only known when it runs (it could be -delete)")
        elif a in _FIND_VALUES or re.fullmatch(r"-newer[aBcmt][aBcmt]", a):
            k += 2
            continue
        elif a.startswith("-") and a not in _FIND_FLAGS and a not in _FIND_ACTIONS:
            yield Finding(LOCAL_MUTATION, f"find {a} is not known to leave it read-only")
        if a in ("-exec", "-execdir", "-ok", "-okdir"):
            j = k + 1
            while j < n and not (args[j] == ";" or (args[j] == "+" and args[j - 1] == "{}")):
                j += 1
            yield Finding(LOCAL_MUTATION, f"find {a} runs a command on each file")
            an.classify(call, i + 1 + k + 1, i + 1 + j)
            k = j + 1
            continue
        if a == "-delete":
            what = next((w for w in (an.critical(call.words[s]) for s in starts) if w), None)
            yield Finding(DESTRUCTIVE, f"find -delete removes files in {what}" if what else
                   "find -delete deletes every file its expression matches")
        elif a in ("-fprint", "-fprint0", "-fprintf", "-fls"):
            yield Finding(LOCAL_MUTATION, f"find {a} writes to a file")
        k += 1


def _fd(an: Analyzer, call: Call, i: int, end: int, name: str) -> Iterator[Finding]:
    for k in range(i + 1, end):
        if call.texts[k] in ("-x", "--exec", "-X", "--exec-batch"):
            yield Finding(LOCAL_MUTATION, f"{name} {call.texts[k]} runs a command on each file")
            stop = next((j for j in range(k + 1, end) if call.texts[j] == ";"), end)
            an.classify(call, k + 1, stop)
            return


def _sed(an: Analyzer, call: Call, i: int, end: int, name: str) -> Iterator[Finding]:
    args = call.texts[i + 1:end]
    view = call.option_view(i + 1, end)
    if None in view:
        yield Finding(LOCAL_MUTATION, f"{name}'s script or options are only known when it runs")
    else:
        unsafe = first_unsafe(SED, view)  # -i and -f are allowed there: they are judged below
        if unsafe:
            yield Finding(LOCAL_MUTATION, f"{name}: {unsafe} is not known to leave it read-only")
    scripts: list[str] = []
    in_place = script_file = False
    k = 0
    while k < len(args):
        a = args[k]
        if a == "--":
            break
        if a.startswith("--"):
            opt, eq, value = a.partition("=")
            if opt == "--in-place":
                in_place = True
            elif opt == "--expression":
                scripts.append(value if eq else (args[k + 1] if k + 1 < len(args) else ""))
                call.nonpath.add(i + 1 + k + (0 if eq else 1))
                k += 0 if eq else 1
            elif opt == "--file":
                script_file = True
                k += 0 if eq else 1
            elif opt in ("--line-length",) and not eq:
                k += 1
        elif a.startswith("-") and len(a) > 1:
            for m, ch in enumerate(a[1:], 1):
                if ch == "i":
                    in_place = True
                    break  # the rest is a backup suffix
                if ch in "efl":
                    rest = a[m + 1:]
                    if not rest:
                        k += 1
                        rest = args[k] if k < len(args) else ""
                        call.nonpath.add(i + 1 + k)
                    if ch == "e":
                        scripts.append(rest)
                    elif ch == "f":
                        script_file = True
                    break
        elif not scripts and not script_file:
            scripts.append(a)
            call.nonpath.add(i + 1 + k)
        k += 1
    if in_place:
        yield Finding(LOCAL_MUTATION, "sed -i edits files in place")
    if script_file:
        yield Finding(LOCAL_MUTATION, "sed -f runs a script file that may write files")
    if any(_sed_program_writes(s) for s in scripts):
        yield Finding(LOCAL_MUTATION, "the sed script writes files or runs commands")


def _skip_delimited(s: str, i: int, delim: str) -> int:
    n = len(s)
    while i < n:
        if s[i] == "\\":
            i += 2
            continue
        if s[i] == delim:
            return i + 1
        i += 1
    return n


def _sed_program_writes(script: str) -> bool:
    """Can this sed program write files or run commands (`w`, `W`, `e`, `s///w`, `s///e`)?"""
    i, n = 0, len(script)
    while i < n:
        c = script[i]
        if c in " \t\n;{}!" or c.isdigit() or c in "$,~+":
            i += 1
        elif c == "/" or c == "\\":
            if c == "\\":
                if i + 1 >= n:
                    break
                delim, i = script[i + 1], i + 2
            else:
                delim, i = "/", i + 1
            i = _skip_delimited(script, i, delim)
            while i < n and script[i] in "IM":
                i += 1
        elif c in "wWe":
            return True
        elif c in "sy":
            if i + 1 >= n or script[i + 1] in "\n\\":
                return False
            delim = script[i + 1]
            j = _skip_delimited(script, _skip_delimited(script, i + 2, delim), delim)
            if c == "s":
                while j < n and (script[j].isdigit() or script[j] in "gpiImMe"):
                    if script[j] == "e":
                        return True
                    j += 1
                if j < n and script[j] == "w":
                    return True
            i = j
        elif c in "aicrR#:":  # text, file name or label to the end of the line
            j = script.find("\n", i)
            i = n if j < 0 else j
        elif c in "btT":
            j = i + 1
            while j < n and script[j] not in ";\n":
                j += 1
            i = j
        else:
            i += 1
    return False


_AWK_UNSAFE = lazy_compile(r"\bsystem\s*\(|\|\s*&|\|\s*getline|\bprintf?\b[^;{}\n]*?[>|]")


def _awk(an: Analyzer, call: Call, i: int, end: int, name: str) -> Iterator[Finding]:
    args = call.texts[i + 1:end]
    view = call.option_view(i + 1, end)
    if None in view:
        yield Finding(LOCAL_MUTATION, f"the {name} program or options are only known when it runs")
    else:
        unsafe = first_unsafe(AWK, view)  # -f is allowed there: it is judged below
        if unsafe:
            yield Finding(LOCAL_MUTATION, f"{name}: {unsafe} is not known to leave it read-only")
    programs: list[str] = []
    k = 0
    while k < len(args):
        a = args[k]
        if a == "--":
            k += 1
            break
        if not a.startswith("-") or a == "-":
            break
        value = args[k + 1] if k + 1 < len(args) else ""
        opt, eq, attached = a.partition("=")
        if opt in ("-f", "--file") or a.startswith("-f"):
            yield Finding(LOCAL_MUTATION, f"{name} -f runs a program file that may write files")
            return
        if opt in ("-i", "--include") and (attached or a[2:] or value) in ("inplace", "inplace.awk"):
            yield Finding(LOCAL_MUTATION, f"{name} -i inplace edits files in place")
        if opt in ("-e", "--source"):
            programs.append(attached if eq else value)
        takes_value = len(a) == 2 and a[1] in "FvfieEWl" or opt in ("--field-separator", "--assign", "--source",
                                                                    "--include", "--load")
        if takes_value and not eq:
            k += 1
            call.nonpath.add(i + 1 + k)
        k += 1
    if not programs and k < len(args):
        programs.append(args[k])
        call.nonpath.add(i + 1 + k)
    if any(_AWK_UNSAFE.search(p) for p in programs):
        yield Finding(LOCAL_MUTATION, f"the {name} program writes files or runs commands")


def _allow_listed(an: Analyzer, call: Call, i: int, end: int, name: str) -> Iterator[Finding]:
    """A program that only reads with the options in its allow-list (readonly_options.TABLES)."""
    unsafe = first_unsafe(TABLES[name], call.option_view(i + 1, end))
    if unsafe:
        yield Finding(LOCAL_MUTATION, f"{name}: {unsafe} is not known to leave it read-only")
    args = call.texts[i + 1:end]
    if name == "date" and any(not args[k].startswith("+")
                              for k in parse_opts(args, "dfr", {"--date", "--file", "--reference"})[1]):
        yield Finding(LOCAL_MUTATION, "date with a time operand sets the system clock")
    elif name == "hostname" and parse_opts(args)[1]:
        yield Finding(LOCAL_MUTATION, "hostname with an argument renames the machine")
    elif name in ("bat", "batcat") and args[:1] == ["cache"]:
        yield Finding(LOCAL_MUTATION, f"{name} cache rebuilds its cache files")


def _output_operand(an: Analyzer, call: Call, i: int, end: int, name: str) -> Iterator[Finding]:
    flags, operands = parse_opts(call.texts[i + 1:end], "fsw" if name == "uniq" else "cgnlos")
    if len(operands) >= 2 and call.texts[i + 1 + operands[1]] != "-":
        yield Finding(LOCAL_MUTATION, f"{name} writes its output to '{call.texts[i + 1 + operands[1]]}'")


def _tee(an: Analyzer, call: Call, i: int, end: int, name: str) -> Iterator[Finding]:
    _, operands = parse_opts(call.texts[i + 1:end], long_values={"--output-error"})
    for k in operands:
        word = call.words[i + 1 + k]
        path = os.path.normpath(word.path_text) if word.path_text else None
        if path and is_device(path, DISCARD_TARGETS):
            continue
        if path and BLOCK_DEVICE.match(path):
            yield Finding(DESTRUCTIVE, f"tee writes to the disk device '{word.text}'")
        else:
            yield Finding(LOCAL_MUTATION, f"tee writes to '{word.text}'")


def _tar(an: Analyzer, call: Call, i: int, end: int, name: str) -> Iterator[Finding]:
    """Listing an archive reads; every other mode writes. Listing stays read-only only with options
    that cannot run programs (`--to-command`, `-I PROG`, `--checkpoint-action=exec=…`, `-f host:file`)."""
    view = call.option_view(i + 1, end)
    if view and view[0] is not None and not view[0].startswith("-"):
        view[0] = "-" + view[0]  # the old style: `tar tvf x.tar`
    shorts = "".join(a[1:] for a in view if a and a.startswith("-") and not a.startswith("--"))
    if not ("t" in shorts or "--list" in view):
        yield Finding(LOCAL_MUTATION, f"{name} writes files")
        return
    unsafe = first_unsafe(TAR_LISTING, view)
    if unsafe:
        yield Finding(LOCAL_MUTATION, f"{name}: {unsafe} is not known to leave a listing read-only")
    elif "--force-local" not in view and any(a and re.match(r"[^/.-][^/]*:", a) for a in view):
        yield Finding(LOCAL_MUTATION, f"{name} with host:file runs a remote shell")


def _unzip(an: Analyzer, call: Call, i: int, end: int, name: str) -> Iterator[Finding]:
    flags, _ = parse_opts(call.texts[i + 1:end], "dx")
    if not flags & {"-l", "-t", "-v", "-Z", "-z"}:
        yield Finding(LOCAL_MUTATION, f"{name} extracts files")


def _journalctl(an: Analyzer, call: Call, i: int, end: int, name: str) -> Iterator[Finding]:
    for a in call.texts[i + 1:end]:
        option = a.partition("=")[0]
        if option in ("--vacuum-size", "--vacuum-time", "--vacuum-files", "--rotate", "--flush"):
            yield Finding(LOCAL_MUTATION, f"journalctl {option} deletes or moves logs")
            return


def _download(an: Analyzer, call: Call, i: int, end: int, name: str) -> Iterator[Finding]:
    """curl, wget …: remote; the files they write are remembered (running one later is destructive)."""
    yield Finding(REMOTE_ACTION, f"{name} {REMOTE_PROGRAMS[name]}")
    for k in range(i + 1, end):
        option, eq, value = call.texts[k].partition("=")
        if option in ("-o", "--output", "-O", "--output-document"):
            if eq:
                an.note_download(Word.literal(value))
            elif k + 1 < end:
                an.note_download(call.words[k + 1])


HANDLERS: dict[str, Handler] = {
    "rm": _rm, "chmod": _chmod, "chown": _chmod, "chgrp": _chmod, "find": _find, "fd": _fd, "fdfind": _fd,
    "sed": _sed, "gsed": _sed, "awk": _awk, "gawk": _awk, "mawk": _awk, "nawk": _awk,
    **dict.fromkeys(TABLES, _allow_listed), **dict.fromkeys(OUTPUT_OPERAND, _output_operand),
    "tee": _tee, "tar": _tar, "bsdtar": _tar, "gtar": _tar, "unzip": _unzip,
    "journalctl": _journalctl, **dict.fromkeys(DOWNLOADERS, _download),
}
