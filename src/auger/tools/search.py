"""Read-only search tools: `list_dir`, `glob` and `grep`.

All three see the project through `walk.py`, so they agree on what exists: ignored
files (`.gitignore` at every level, `.git/info/exclude`, `.ignore`/`.rgignore`) and the
`.git` directory are invisible, hidden files are not. `grep` runs ripgrep when it is
installed and a pure-Python search otherwise; the two are built to return identical
output on the same tree (same files, same lines, same order, same formatting), so a
session never behaves differently because of what happens to be installed. Set
`AUGER_GREP_BACKEND=python` (or `ripgrep`) to force a backend; it is read per call.

Known, deliberate limits of that equivalence (each would cost more than it is worth):
* Invalid UTF-8 bytes: rg matches raw bytes, and no regex item (not even `.`) matches
  an invalid byte; Python searches the text decoded with U+FFFD replacements, which
  `.`, `\\W` or `[^x]` do match. Patterns that only match through such a byte differ.
* A NUL byte deep in a large file: rg notices it only when its read buffer reaches
  it, so it may or may not report earlier lines; Python skips any file with a NUL.
* Regex dialects: constructs only one engine accepts are refused up front (see
  `_compile_regex`), but the two engines are not identical in every corner.

Paths come from the model, so every one is resolved beneath the session's root handle
(`auger.policy.fs`), directories are walked through descriptors, and every file the Python
backend reads is opened beneath the root with no symlink anywhere on its path. ripgrep
walks by path on its own, so each line it reports is checked against the file as read
beneath the root, and dropped if they differ (a directory swapped for a symlink while rg
ran). Output paths are relative to the project root. Blocking filesystem work runs in
worker threads.
"""

from __future__ import annotations

import asyncio
import codecs
import os
import re
import shutil
import stat
from pathlib import Path
from typing import Any, Callable, Iterator

from auger.lazy_dataclass import Deferred, dataclass
from auger.policy.fs import RootHandle, read_beneath
from auger.policy.paths import PathEscape, display
from auger.tools.base import READ_ONLY, ToolContext, ToolError, ToolResult, ToolSpec
from auger.tools.files import root_handle
from auger.tools.protection import WalkFilter, refuse_protected, skipped_note
from auger.tools.threads import in_thread
from auger.tools.walk import GlobError, PathFilter, WalkEntry, glob_matcher, path_sort_key, walk

LIST_DIR_MAX_ENTRIES = 500
GLOB_MAX_RESULTS = 200
GREP_MAX_LINE_CHARS = 500
BACKEND_ENV = "AUGER_GREP_BACKEND"

try:  # used only to refuse regex features ripgrep lacks; optional if Python moves it
    from re import _parser as _sre_parse  # type: ignore[attr-defined]  # private: typeshed omits it
except ImportError:  # pragma: no cover
    _sre_parse = None


# ------------------------------------------------------------------------ helpers


def _resolve(root: RootHandle, tool: str, raw: str) -> tuple[Path, bool]:
    """Resolve a model-supplied path beneath the root; it must exist. (path, is a directory)."""
    try:
        rel, fd = root.open_resolved(raw, os.O_PATH)
    except PathEscape as exc:
        raise ToolError(f"{tool}: {exc}") from None
    except OSError:
        raise ToolError(f"{tool}: no such file or directory: {raw!r}") from None
    try:
        is_dir = stat.S_ISDIR(os.fstat(fd).st_mode)
    finally:
        os.close(fd)
    return (root.path / rel if rel else root.path), is_dir


def _resolve_dir(root: RootHandle, tool: str, raw: str) -> Path:
    target, is_dir = _resolve(root, tool, raw)
    if not is_dir:
        raise ToolError(f"{tool}: {raw!r} is a file, not a directory")
    return target


def _refuse_target(ctx: ToolContext, tool: str, handle: RootHandle, target: Path, raw: str) -> None:
    """Refuse a protected file or directory named as the target (resolved, and as written)."""
    try:
        st: os.stat_result | None = os.lstat(target)
    except OSError:
        st = None
    spelled = os.path.normpath(handle.relative(raw))
    refuse_protected(ctx, tool, [(_rel(handle, target), st), (spelled, None)])


def _walk_beneath(root: RootHandle, target: Path, **kw: Any) -> Iterator[WalkEntry]:
    """`walk` from a directory opened beneath the root (no symlink on its symlink-free path)."""
    try:
        fd = root.open(_rel(root, target), os.O_RDONLY | os.O_DIRECTORY, follow=False)
    except (OSError, ValueError):
        return  # swapped for something else since it was resolved: nothing to list
    try:
        yield from walk(target, start_fd=fd, **kw)
    finally:
        os.close(fd)


def _rel(root: RootHandle, path: Path) -> str:
    """A path under the root, relative to it ('.' for the root)."""
    return display(root.path, path)


def _clean_glob(tool: str, pattern: str) -> str:
    """Drop a leading './' (models write it; as a glob it would match nothing)."""
    negated = pattern.startswith("!")
    body = pattern[1:] if negated else pattern
    while body.startswith("./"):
        body = body[2:]
    if not body.strip():
        raise ToolError(f"{tool}: the glob pattern is empty")
    return ("!" if negated else "") + body


def _compile_glob(tool: str, pattern: str) -> Callable[[str], bool]:
    try:
        return glob_matcher(pattern)
    except GlobError as exc:
        raise ToolError(f"{tool}: invalid glob pattern {pattern!r}: {exc}") from None


# ---------------------------------------------------------------------- list_dir


def _list_dir(ctx: ToolContext, handle: RootHandle, raw_path: str, depth: int) -> ToolResult:
    root = handle.path
    target = _resolve_dir(handle, "list_dir", raw_path)
    _refuse_target(ctx, "list_dir", handle, target, raw_path)
    hidden = WalkFilter(ctx)
    header = display(root, target).rstrip("/") + "/"
    lines = [header]
    total = 0
    for entry in _walk_beneath(handle, target, max_depth=depth, include_dirs=True, include_symlinks=True):
        if hidden.excludes(display(root, Path(entry.path)), entry.kind == "dir"):
            continue
        total += 1
        if total > LIST_DIR_MAX_ENTRIES:
            continue  # keep walking only to count what is not shown
        if entry.kind == "dir":
            label = entry.name + "/"
        elif entry.kind == "symlink":
            label = f"{entry.name} -> {entry.link if entry.link is not None else '?'}"
        else:
            label = entry.name
        lines.append("  " * entry.depth + label)
    if total == 0:
        lines.append("  (empty, or everything in it is ignored)")
    elif total > LIST_DIR_MAX_ENTRIES:
        lines.append(
            f"… {total - LIST_DIR_MAX_ENTRIES} more entries not shown; "
            "list a subdirectory or use a smaller depth"
        )
    if hidden.left_out:
        lines.append(hidden.note())
    return ToolResult(
        "\n".join(lines),
        metadata={"entries": total, "truncated": total > LIST_DIR_MAX_ENTRIES, "protected": len(hidden.left_out)},
    )


async def _list_dir_handler(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    return await in_thread(
        _list_dir, ctx, root_handle(ctx), args.get("path", "."), args.get("depth", 2)
    )


LIST_DIR = ToolSpec(
    name="list_dir",
    description=(
        "List a directory as a tree `depth` levels deep (default 2), directories first; "
        "ignored files and .git are left out, hidden files shown; at most "
        f"{LIST_DIR_MAX_ENTRIES} entries."
    ),
    parameters={
        "type": "object",
        "properties": {
            "path": {
                "type": "string",
                "description": "Directory to list, relative to the project root.",
                "default": ".",
            },
            "depth": {
                "type": "integer",
                "minimum": 1,
                "description": "How many levels to show; 1 lists only direct children.",
                "default": 2,
            },
        },
        "required": [],
        "additionalProperties": False,
    },
    handler=_list_dir_handler,
    effect=READ_ONLY,
    parallel_safe=True,
    starts_early=True,
)


# -------------------------------------------------------------------------- glob


def _glob(ctx: ToolContext, handle: RootHandle, pattern: str, raw_path: str) -> ToolResult:
    root = handle.path
    target = _resolve_dir(handle, "glob", raw_path)
    _refuse_target(ctx, "glob", handle, target, raw_path)
    hidden = WalkFilter(ctx)
    pattern = _clean_glob("glob", pattern)
    matches = _compile_glob("glob", pattern)
    found = sorted(
        (shown for e in _walk_beneath(handle, target)
         if matches(e.rel) and not hidden.excludes(shown := display(root, Path(e.path)))),
        key=path_sort_key,
    )
    note = [hidden.note()] if hidden.left_out else []
    if not found:
        where = "" if target == root else f" under {display(root, target)}/"
        return ToolResult("\n".join([f"No files match {pattern}{where}", *note]),
                          metadata={"files": 0, "protected": len(hidden.left_out)})
    lines = found[:GLOB_MAX_RESULTS]
    if len(found) > GLOB_MAX_RESULTS:
        lines.append(
            f"… {len(found) - GLOB_MAX_RESULTS} more files not shown; narrow the pattern or path"
        )
    return ToolResult(
        "\n".join([*lines, *note]),
        metadata={"files": len(found), "truncated": len(found) > GLOB_MAX_RESULTS, "protected": len(hidden.left_out)},
    )


async def _glob_handler(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    return await in_thread(_glob, ctx, root_handle(ctx), args["pattern"], args.get("path", "."))


GLOB = ToolSpec(
    name="glob",
    description=(
        "Find files by pattern: without '/' it matches names at any depth (`test_*.py`); "
        "with '/', paths under `path` (`src/**/*.ts`: `**` spans directories). `{a,b}` works; "
        "a leading `!` excludes. Skips ignored files and .git. Returns sorted paths relative to "
        f"the project root, at most {GLOB_MAX_RESULTS}."
    ),
    parameters={
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "Glob pattern, e.g. `src/**/*.py`."},
            "path": {
                "type": "string",
                "description": "Directory to search from, relative to the project root.",
                "default": ".",
            },
        },
        "required": ["pattern"],
        "additionalProperties": False,
    },
    handler=_glob_handler,
    effect=READ_ONLY,
    parallel_safe=True,
    starts_early=True,
)


# -------------------------------------------------------------------------- grep

Match = tuple[str, int, str]  # (display path, line number, line text)


@dataclass
class _GrepJob(Deferred):
    """Everything both backends need, worked out once so they cannot disagree."""

    handle: RootHandle
    root: Path
    target: Path
    is_file: bool
    pattern: str
    regex: re.Pattern[str]
    prefilter: re.Pattern[str] | None  # whole-file test to skip files fast
    glob: str | None
    matches_glob: Callable[[str], bool] | None
    case_insensitive: bool
    max_results: int
    backend: str  # "ripgrep" or "python"
    rg: str | None  # the rg executable when backend == "ripgrep"
    hidden: WalkFilter  # protected files: never searched, whatever the backend


_UNSUPPORTED_OPS = {
    "ASSERT": "lookahead/lookbehind assertions",
    "ASSERT_NOT": "lookahead/lookbehind assertions",
    "GROUPREF": "backreferences",
    "GROUPREF_EXISTS": "conditional groups",
    "ATOMIC_GROUP": "atomic groups",
    "POSSESSIVE_REPEAT": "possessive quantifiers",
}


def _unportable(pattern: str) -> str | None:
    """Why ripgrep's regex engine would reject a pattern Python accepts, if it would.

    Refusing these in both backends keeps grep's answer independent of the backend.
    """
    if _sre_parse is None:  # pragma: no cover
        return None

    def scan(sub: Any) -> str | None:
        for op, av in sub:
            name = getattr(op, "name", str(op))
            if name in _UNSUPPORTED_OPS:
                return f"{_UNSUPPORTED_OPS[name]} are not supported"
            if name == "LITERAL" and av == 10:
                return "a newline can never match: lines are searched one at a time"
            if name == "AT" and getattr(av, "name", "") == "AT_END_STRING":
                return "\\Z is not supported; use $"
            for child in _subpatterns(av):
                if (problem := scan(child)) is not None:
                    return problem
        return None

    try:
        return scan(_sre_parse.parse(pattern))
    except Exception:  # pragma: no cover - only a best-effort extra check
        return None


def _subpatterns(av: Any) -> Iterator[Any]:
    """The sub-patterns nested anywhere inside one parsed regex node's argument."""
    if _sre_parse is not None and isinstance(av, _sre_parse.SubPattern):
        yield av
    elif isinstance(av, (list, tuple)):
        for item in av:
            yield from _subpatterns(item)


def _compile_regex(pattern: str, case_insensitive: bool) -> tuple[re.Pattern[str], re.Pattern[str] | None]:
    """Compile with Python `re`, refusing what would make the two backends disagree.

    Python validates first so both backends word syntax errors the same way; then the
    constructs that only one engine understands (or reads differently) are refused.
    """
    if "[[:" in pattern:  # rg: a POSIX class; Python: a nested-set warning and a different class
        raise ToolError(
            f"grep: invalid regex {pattern!r}: POSIX classes like [[:alpha:]] are not "
            "supported; use \\w, \\d, \\s or ranges like [a-zA-Z]"
        )
    if re.search(r"(?<!\\)\{,\d", pattern):  # Python: {0,n}; rg: a syntax error
        raise ToolError(f"grep: invalid regex {pattern!r}: write {{0,n}} instead of {{,n}}")
    flags = re.IGNORECASE if case_insensitive else 0
    try:
        regex = re.compile(pattern, flags)
    except re.error as exc:
        raise ToolError(f"grep: invalid regex {pattern!r}: {exc}") from None
    problem = _unportable(pattern)
    if problem:
        raise ToolError(f"grep: invalid regex {pattern!r}: {problem}")
    # A match in a line is also a match in the whole text under MULTILINE, except for
    # string anchors and flags scoped off inside the pattern, which we leave alone.
    prefilter_safe = not any(s in pattern for s in ("\\A", "\\Z", "(?-"))
    prefilter = re.compile(pattern, flags | re.MULTILINE) if prefilter_safe else None
    return regex, prefilter


def _decode(data: bytes) -> str | None:
    """File bytes as text the way ripgrep reads them, or None for a binary file.

    Like rg: a UTF-8 BOM is dropped and UTF-16 with a BOM is transcoded; anything else
    is UTF-8 with invalid bytes replaced. Binary means a NUL byte. (rg only notices a
    NUL where its read buffer happens to reach before it stops; "anywhere in the file"
    is the closest fixed rule, and agrees with rg on every file whose NUL sits in the
    first 64 KiB or nowhere.)
    """
    if data.startswith(codecs.BOM_UTF8):
        text = data[3:].decode("utf-8", "replace")
    elif data.startswith(codecs.BOM_UTF16_LE):
        text = data[2:].decode("utf-16-le", "replace")
    elif data.startswith(codecs.BOM_UTF16_BE):
        text = data[2:].decode("utf-16-be", "replace")
    elif b"\0" in data:
        return None
    else:
        return data.decode("utf-8", "replace")
    return None if "\0" in text else text


def _read_text(handle: RootHandle, path: Path) -> str | None:
    """A file under the root, read beneath it with no symlink on the way (see module doc)."""
    try:
        return _decode(read_beneath(handle, _rel(handle, path)))
    except PathEscape as exc:
        raise OSError(f"not readable beneath the project root: {exc}") from None


def _choose_backend() -> tuple[str, str | None]:
    """("ripgrep", rg path) or ("python", None), from AUGER_GREP_BACKEND at call time."""
    choice = os.environ.get(BACKEND_ENV, "").strip().lower()
    if choice == "python":
        return "python", None
    rg = shutil.which("rg")
    if choice in ("ripgrep", "rg") and rg is None:
        raise ToolError(f"grep: {BACKEND_ENV}={choice} but no `rg` executable is on PATH")
    return ("ripgrep", rg) if rg else ("python", None)


def _prepare_grep(ctx: ToolContext, handle: RootHandle, args: dict[str, Any]) -> _GrepJob:
    pattern: str = args["pattern"]
    case_insensitive = bool(args.get("case_insensitive", False))
    regex, prefilter = _compile_regex(pattern, case_insensitive)
    target, is_dir = _resolve(handle, "grep", args.get("path", "."))
    _refuse_target(ctx, "grep", handle, target, args.get("path", "."))
    is_file = not is_dir
    glob = args.get("glob")
    matches_glob = None
    if glob is not None and not is_file:  # like rg, an explicit file is searched as is
        glob = _clean_glob("grep", glob)
        matches_glob = _compile_glob("grep", glob)
    else:
        glob = None
    backend, rg = _choose_backend()
    return _GrepJob(
        handle=handle,
        root=handle.path,
        target=target,
        is_file=is_file,
        pattern=pattern,
        regex=regex,
        prefilter=prefilter,
        glob=glob,
        matches_glob=matches_glob,
        case_insensitive=case_insensitive,
        max_results=int(args.get("max_results", 100)),
        backend=backend,
        rg=rg,
        hidden=WalkFilter(ctx),
    )


def _python_search(job: _GrepJob) -> tuple[list[Match], list[str]]:
    """The fallback backend: walk, read, decode, match line by line."""
    matches: list[Match] = []
    errors: list[str] = []
    if job.is_file:
        paths: Any = [str(job.target)]
    else:
        paths = (e.path for e in _walk_beneath(job.handle, job.target)
                 if (job.matches_glob is None or job.matches_glob(e.rel))
                 and not job.hidden.excludes_file(display(job.root, Path(e.path))))
    search = job.regex.search
    for path in paths:
        try:
            text = _read_text(job.handle, Path(path))
        except OSError as exc:
            errors.append(f"{display(job.root, Path(path))}: {exc.strerror or exc}")
            continue
        if text is None or (job.prefilter is not None and not job.prefilter.search(text)):
            continue
        lines = text.split("\n")
        if lines[-1] == "":
            lines.pop()  # the text after the final newline is not a line
        shown = display(job.root, Path(path))
        matches.extend((shown, number, line) for number, line in enumerate(lines, 1) if search(line))
    return matches, errors


_RG_LINE_NUMBER = re.compile(rb"(\d+):")


def _rg_command(rg: str, job: _GrepJob) -> list[str]:
    cmd = [
        rg, "--no-config", "--no-heading", "-n", "--with-filename", "--null",
        "--color", "never", "--hidden",
        # Make rg read exactly the ignore files the walker reads.
        "--no-require-git", "--no-ignore-global", "--no-ignore-messages",
    ]
    if job.case_insensitive:
        cmd.append("-i")
    if job.glob is not None:
        cmd += ["--glob", job.glob]
    # After the user's glob: for rg the last matching glob wins, and .git stays out.
    cmd += ["--glob", "!.git", "-e", job.pattern, "--", str(job.target)]
    return cmd


async def _rg_search(rg: str, job: _GrepJob) -> tuple[list[Match], list[str]]:
    """The ripgrep backend; rg's own output order is nondeterministic, we sort later."""
    proc = await asyncio.create_subprocess_exec(
        *_rg_command(rg, job),
        cwd=str(job.target.parent if job.is_file else job.target),  # --glob is cwd-relative
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        stdout, stderr = await proc.communicate()
    except asyncio.CancelledError:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        raise
    # 0: matches, 1: none, 2: errors, possibly alongside matches. Per-file errors start
    # with the (absolute) path; anything else with no output means rg refused to run.
    err_lines: list[str] = []
    if proc.returncode not in (0, 1):
        err_lines = [ln.rstrip() for ln in stderr.decode("utf-8", "replace").splitlines() if ln.strip()]
        if not stdout and err_lines and not err_lines[0].startswith("/"):
            if any("regex" in ln for ln in err_lines):
                raise ToolError(f"grep: invalid regex {job.pattern!r}: " + "\n".join(err_lines[:8]))
            raise ToolError("grep: ripgrep failed: " + "\n".join(err_lines[:8]))
        err_lines = err_lines or [f"rg exited with status {proc.returncode}"]
    matches = await in_thread(_parse_rg_output, stdout, job)
    return matches, err_lines


def _parse_rg_output(stdout: bytes, job: _GrepJob) -> list[Match]:
    """Parse `path NUL line:text` records, dropping rg's binary-file warnings.

    With a glob, rg lets a matching `--glob` override ignore rules; the `glob` tool
    does not, so results are re-checked against the glob and the walker's rules.
    """
    keep: dict[str, str | None] = {}  # absolute path -> display path, or None to drop
    path_filter = PathFilter(job.target) if job.matches_glob is not None else None
    target = str(job.target)
    matches: list[Match] = []
    for record in stdout.split(b"\n"):
        nul = record.find(b"\0")
        if nul < 0:
            continue  # e.g. "WARNING: stopped searching binary file after match"
        number = _RG_LINE_NUMBER.match(record, nul + 1)
        if number is None:
            continue
        path = os.fsdecode(record[:nul])
        if path not in keep:
            shown: str | None = display(job.root, Path(path))
            if path_filter is not None and job.matches_glob is not None:
                rel = os.path.relpath(path, target).replace(os.sep, "/")
                if not (job.matches_glob(rel) and path_filter.includes(rel)):
                    shown = None
            keep[path] = shown
        shown = keep[path]
        if shown is not None:
            text = record[number.end():].decode("utf-8", "replace")
            matches.append((shown, int(number.group(1)), text))
    return matches


def _confirmed(job: _GrepJob, matches: list[Match], errors: list[str]) -> tuple[list[Match], list[str]]:
    """rg's lines that the file, read beneath the root, really has at that line number, and its
    per-file errors about paths that exist beneath the root.

    rg opens files by path; if a directory was swapped for a symlink while it ran, what it
    read (or failed to read) may lie outside the project. Re-reading through the handle
    cannot be redirected, so a line that does not match what is there is dropped, and so
    is an error naming a file that is not there. rg prints each file's lines together, so
    one file is held at a time."""
    kept: list[Match] = []
    current: str | None = None
    lines: list[str] | None = None
    for shown, number, text in matches:
        if shown != current:
            current = shown
            try:
                decoded = _decode(read_beneath(job.handle, shown))
            except (OSError, ValueError):
                decoded = None
            lines = None if decoded is None else decoded.split("\n")
        if lines is not None and 0 < number <= len(lines) and lines[number - 1] == text:
            kept.append((shown, number, text))
    return kept, [line for line in errors if not line.startswith("/") or _names_a_file_beneath(job, line)]


def _names_a_file_beneath(job: _GrepJob, line: str) -> bool:
    """Whether an rg error line `PATH: message` starts with a path that exists beneath the root."""
    cut = line.find(": ")
    while cut != -1:
        path = Path(line[:cut])
        if path == job.root or job.root in path.parents:
            try:
                os.close(job.handle.open(display(job.root, path), os.O_PATH, follow=False))
                return True
            except (OSError, ValueError):
                pass
        cut = line.find(": ", cut + 1)
    return False


def _unprotected(job: _GrepJob, matches: list[Match]) -> list[Match]:
    """ripgrep's matches in files that are not protected (it reads them by itself: their lines go no further)."""
    verdicts: dict[str, bool] = {}
    kept = []
    for match in matches:
        if match[0] not in verdicts:
            verdicts[match[0]] = job.hidden.excludes_file(match[0])
        if not verdicts[match[0]]:
            kept.append(match)
    return kept


def _left_out(job: _GrepJob) -> int:
    """How many protected paths the search left out: those the last scan found under the target that a walk
    would search (not ignored, matching the glob). Counted from the scan, never from what the files hold, so
    the number says nothing of their content and is the same with either backend."""
    if job.is_file:
        return 0
    included = PathFilter(job.target)
    count = 0
    for rel in sorted(job.hidden.found):
        path = job.root / rel
        if path == job.target or job.target not in path.parents or rel in job.hidden.grant:
            continue
        inner = path.relative_to(job.target).as_posix()
        if included.includes(inner) and (job.matches_glob is None or job.matches_glob(inner)):
            count += 1
    return count


def _format_grep(job: _GrepJob, matches: list[Match], errors: list[str]) -> ToolResult:
    matches.sort(key=lambda m: (path_sort_key(m[0]), m[1]))
    lines: list[str] = []
    for shown, number, text in matches[: job.max_results]:
        text = text.removesuffix("\r")  # CRLF files: the line, not its terminator
        if len(text) > GREP_MAX_LINE_CHARS:
            text = text[:GREP_MAX_LINE_CHARS] + "…"
        lines.append(f"{shown}:{number}:{text}")
    if not matches:
        lines.append("No matches")
    elif len(matches) > job.max_results:
        lines.append(
            f"… {len(matches) - job.max_results} more matches not shown; "
            "raise max_results or narrow the pattern, path or glob"
        )
    if errors:
        more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
        lines.append(f"(some files could not be searched: {'; '.join(errors[:3])}{more})")
    left_out = _left_out(job)
    if left_out:
        lines.append(skipped_note(left_out))
    return ToolResult(
        "\n".join(lines),
        metadata={
            "backend": job.backend,
            "matches": len(matches),
            "files": len({m[0] for m in matches}),
            "truncated": len(matches) > job.max_results,
            "protected": left_out,
        },
    )


def _binary_target(job: _GrepJob) -> bool:
    """An explicitly named binary file: rg would search it (unlike in a walk); we don't."""
    if not job.is_file:
        return False
    try:
        return _read_text(job.handle, job.target) is None
    except OSError as exc:
        raise ToolError(f"grep: cannot read {display(job.root, job.target)}: {exc.strerror}") from None


def _prepare_and_check(ctx: ToolContext, root: RootHandle, args: dict[str, Any]) -> tuple[_GrepJob, bool]:
    job = _prepare_grep(ctx, root, args)
    return job, _binary_target(job)


async def _grep_handler(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    job, binary = await in_thread(_prepare_and_check, ctx, root_handle(ctx), args)
    if binary:
        return ToolResult(
            f"{display(job.root, job.target)} is a binary file; not searched",
            metadata={"backend": job.backend, "matches": 0, "files": 0, "truncated": False},
        )
    if job.rg is not None:
        matches, errors = await _rg_search(job.rg, job)
        matches, errors = await in_thread(_confirmed, job, _unprotected(job, matches), errors)
    else:
        matches, errors = await in_thread(_python_search, job)
    return await in_thread(_format_grep, job, matches, errors)


GREP = ToolSpec(
    name="grep",
    description=(
        "Search file contents for a regular expression (ripgrep syntax: no lookaround). Prints "
        "sorted `path:line:text` lines, at most max_results (default 100), each cut at "
        f"{GREP_MAX_LINE_CHARS} chars. `glob` limits which files (glob tool syntax). Skips ignored "
        "files, .git and binary files."
    ),
    parameters={
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "Regular expression to search for."},
            "path": {
                "type": "string",
                "description": "File or directory to search, relative to the project root.",
                "default": ".",
            },
            "glob": {
                "type": "string",
                "description": "Only search files matching this glob, e.g. `*.py`.",
            },
            "case_insensitive": {"type": "boolean", "default": False},
            "max_results": {
                "type": "integer",
                "minimum": 1,
                "description": "Maximum number of matching lines to show.",
                "default": 100,
            },
        },
        "required": ["pattern"],
        "additionalProperties": False,
    },
    handler=_grep_handler,
    effect=READ_ONLY,
    parallel_safe=True,
    starts_early=True,
)

TOOLS = [LIST_DIR, GLOB, GREP]
