"""The file tools: `read_file`, `write_file`, `edit_file`.

Design choices, and why:

* Every path is opened beneath the session's handle on the project root
  (`auger.policy.fs`): nothing outside the root is ever read or written, whatever `..`,
  absolute path or symlink the model sends, and a directory swapped for a symlink between
  a check and the open cannot redirect it. After the open, only the descriptor is used.
* Nothing is written inside a git directory (`auger.policy.gitguard`): git would run
  what is planted there outside any sandbox.
* Files are handled as bytes and decoded with UTF-8 `surrogateescape`: a file that
  is not valid UTF-8 (latin-1, a stray byte) can still be read and edited, and the
  bytes outside the edited region are written back exactly as they were.
* Writes are atomic (temp file in the same directory, then a rename, both relative
  to the parent directory's descriptor) so a
  crash or a full disk never leaves a half-written source file behind; the old
  file's permission bits are carried over so an executable script stays one.
* A file the session has read is stamped (mtime, size). If it changed on disk
  since (the user edited it, a formatter ran), writing over it would silently
  discard that change, so the tools refuse and ask the model to read it again.
* Blocking I/O runs on a thread (`tools/threads.py`) so a large file never stalls the loop.
* When the session has the editor's buffers (`ToolContext.state.client_files`, ACP), the path is
  resolved and every check above runs exactly as for a local file; only the text is read from and
  written to the editor, so the model sees unsaved changes and the user sees the edit in place.
"""

from __future__ import annotations

import contextlib
import difflib
import errno
import io
import os
import stat
from pathlib import Path
from typing import Any, Iterable, Iterator

from auger.lazy_dataclass import Deferred, dataclass
from auger.lazy_regex import lazy_compile
from auger.policy.fs import Resolved, RootHandle, read_fd, replace_file
from auger.policy.gitguard import git_write_refusal
from auger.policy.paths import PathEscape, display
from auger.tools.base import (
    LOCAL_MUTATION,
    READ_ONLY,
    ClientFiles,
    FileStamp,
    ProtectedFileRefused,
    ToolContext,
    ToolError,
    ToolResult,
    ToolSpec,
)
from auger.tools.protection import refuse_protected
from auger.tools.threads import in_thread

DEFAULT_LIMIT = 2000  # lines read_file shows when no limit is given
MAX_LINE_CHARS = 2000  # longer lines are cut, so one minified line cannot flood the context
MAX_PAGE_CHARS = 100_000  # one read_file answer stops here (about 25k tokens); page on with offset
BINARY_SNIFF_BYTES = 8192  # a NUL byte in this prefix marks a file as binary (as git does)
SNIPPET_CONTEXT = 2  # lines of context around an edit in edit_file's output
SNIPPET_MAX_LINES = 40  # edit_file's snippet stays short even for a large replacement

ENCODING = "utf-8"
ERRORS = "surrogateescape"  # undecodable bytes become lone surrogates and round-trip exactly

# read_file shows lines as `{n:>6}\t{line}`; models often paste that prefix into old_string.
_LINE_NUMBER_PREFIX = lazy_compile(r"^\s*\d+\t")
# Lone surrogates produced by surrogateescape, shown to the model as U+FFFD.
_ESCAPED_BYTE = lazy_compile("[\udc80-\udcff]")


# --------------------------------------------------------------------------- helpers


def root_handle(ctx: ToolContext) -> RootHandle:
    """The session's handle on the project root, opened on first use and kept for the session."""
    handle = ctx.state.root_handle
    if handle is None or handle.path != ctx.root:
        handle = ctx.state.root_handle = RootHandle(ctx.root)
    return handle


@dataclass
class _Target(Deferred):
    """A model-supplied path, resolved beneath the root: where it is and an open parent directory."""

    where: Resolved
    path: Path  # absolute, symlink-free: the key for read stamps and created files
    rel: str  # as shown to the model
    spelled: str  # root-relative as the model wrote it (before links were followed): protected names count there too

    @property
    def dir_fd(self) -> int:
        return self.where.parent_fd

    @property
    def name(self) -> str:
        return self.where.name


@contextlib.contextmanager
def _locate(ctx: ToolContext, raw: str, *, write: bool = False, make_parents: bool = False) -> Iterator[_Target]:
    """Resolve `raw` beneath the root (symlinks followed only while they stay inside), holding its
    parent directory open for the duration; or explain, as a ToolError, why it cannot be.

    `write`: refuse a target in a git directory, as spelled and where it would land (both before
    any parent is created), and where it really landed."""
    handle = root_handle(ctx)
    try:
        if write:
            _refuse_git(handle, os.path.normpath(handle.relative(raw)))
            _refuse_git(handle, _landing(handle, raw))
        where = handle.resolve(raw, make_parents=make_parents)
    except PathEscape as e:
        raise ToolError(str(e)) from None
    except FileNotFoundError:
        raise ToolError(f"{raw} does not exist (a directory on its path does not exist either: "
                        f"{_first_missing(handle, raw)})") from None
    except NotADirectoryError:
        raise ToolError(f"{raw} does not exist: a parent of it is an existing file, not a directory") from None
    except OSError as e:
        raise ToolError(f"cannot access {raw}: {e.strerror or e}") from None
    path = ctx.root / where.rel if where.rel else ctx.root
    try:
        if write:
            _refuse_git(handle, where.rel)
        yield _Target(where, path, display(ctx.root, path), os.path.normpath(handle.relative(raw)))
    finally:
        os.close(where.parent_fd)


def _landing(handle: RootHandle, raw: str) -> str:
    """Where a write to `raw` would land before any missing directory is made: the deepest
    existing directory on its path, resolved (links inside followed), plus the rest as written
    (which, not existing, holds no link)."""
    parts = [p for p in handle.relative(raw).split("/") if p not in ("", ".")]
    for n in range(len(parts), -1, -1):
        try:
            where = handle.resolve("/".join(parts[:n]) or ".")
        except (OSError, ValueError):
            continue
        os.close(where.parent_fd)
        return os.path.normpath("/".join([where.rel or ".", *parts[n:]]))
    return os.path.normpath("/".join(parts) or ".")


def _first_missing(handle: RootHandle, raw: str) -> str:
    """The first directory of `raw` that does not exist, for the error message."""
    parts = [p for p in handle.relative(raw).split("/") if p]
    for n in range(1, len(parts)):
        try:
            os.close(handle.open("/".join(parts[:n]), os.O_PATH))
        except (OSError, ValueError):
            return "/".join(parts[:n])
    return "/".join(parts[:-1]) or "."


def _open_existing(t: _Target) -> int | None:
    """Open the target for reading through its parent's descriptor (never through a symlink: one
    that appeared since the resolution is refused), or None when nothing is there. O_NONBLOCK so a
    FIFO cannot hang the open; the type is checked on the descriptor before any read."""
    if not t.name:  # the root itself
        return os.open(".", os.O_RDONLY | os.O_CLOEXEC, dir_fd=t.dir_fd)
    try:
        return os.open(t.name, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=t.dir_fd)
    except FileNotFoundError:
        return None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise ToolError(f"{t.rel} was replaced by a symlink while being opened; refused") from None
        raise ToolError(f"cannot access {t.rel}: {e.strerror or e}") from None


def _guard(ctx: ToolContext, tool: str, t: _Target, st: os.stat_result | None) -> None:
    """Refuse a protected file: by its resolved path (and inode, `st`) or by the path as written."""
    refuse_protected(ctx, tool, [(t.rel, st), (t.spelled, None)])


def _missing(ctx: ToolContext, t: _Target, hint: str = "") -> ToolError:
    """A "does not exist" error that names similarly spelled siblings, since typos are common."""
    msg = f"{t.rel} does not exist"
    try:
        dfd = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=t.dir_fd)
        try:
            names = os.listdir(dfd)
        finally:
            os.close(dfd)
    except OSError:
        names = []
    parent = t.path.parent
    lowered = {n.lower(): n for n in names}
    close = [lowered[t.name.lower()]] if t.name.lower() in lowered else []
    close += [n for n in difflib.get_close_matches(t.name, names, n=3, cutoff=0.6) if n not in close]
    if close:
        msg += "; did you mean " + " or ".join(display(ctx.root, parent / n) for n in close[:3]) + "?"
    return ToolError(msg + hint)


def _require_regular_file(st: os.stat_result, rel: str, tool: str) -> None:
    """Refuse directories and special files (a FIFO would block a read forever)."""
    if stat.S_ISDIR(st.st_mode):
        raise ToolError(f"{rel} is a directory, not a file; {tool} works on files only")
    if not stat.S_ISREG(st.st_mode):
        raise ToolError(f"{rel} is not a regular file (device, socket or pipe); {tool} refuses it")


def _check_fresh(ctx: ToolContext, path: Path, rel: str, st: os.stat_result | None,
                 verb: str) -> None:
    """Refuse to overwrite a file that changed on disk since this session read it.

    Only files the session has read are checked: for those the model's picture of the
    content may be outdated, and writing would silently discard someone else's change.
    """
    seen = ctx.state.read_stamps.get(path)
    if seen is None or st is None:
        return
    if FileStamp(st.st_mtime_ns, st.st_size) != seen:
        raise ToolError(
            f"{rel} has changed on disk since you last read it (modified by someone else); "
            f"read it again with read_file before {verb} it"
        )


def _is_binary(data: bytes) -> bool:
    return b"\x00" in data[:BINARY_SNIFF_BYTES]


def _binary_error(rel: str, size: int, tool: str) -> ToolError:
    return ToolError(
        f"{rel} is a binary file ({size:,} bytes, contains NUL bytes); {tool} only handles text"
    )


def _shown(text: str) -> str:
    """Text as the model sees it: undecodable bytes become U+FFFD, a CR before LF is hidden."""
    if text.endswith("\r"):
        text = text[:-1]
    return _ESCAPED_BYTE.sub("\ufffd", text)


def _cut(line: str) -> str:
    """Cut an over-long line, saying how much was dropped so the model knows it is partial."""
    if len(line) <= MAX_LINE_CHARS:
        return line
    return f"{line[:MAX_LINE_CHARS]} [... {len(line) - MAX_LINE_CHARS:,} more chars cut]"


def _numbered(n: int, line: str) -> str:
    return f"{n:>6}\t{_cut(_shown(line))}"


def _count_lines(text: str) -> int:
    """Lines as an editor counts them: a final line without a newline still counts."""
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def _split_keepends(text: str) -> list[str]:
    """Split on "\\n" only; str.splitlines would also split on \\f, \\x1c, U+2028 and so on."""
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def _unified_diff(old: str, new: str, rel: str, created: bool = False) -> str:
    """A unified diff old vs new that `patch`/`git apply` would accept."""
    out: list[str] = []
    for line in difflib.unified_diff(
        _split_keepends(_shown_all(old)), _split_keepends(_shown_all(new)),
        fromfile="/dev/null" if created else f"a/{rel}", tofile=f"b/{rel}",
    ):
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


def _shown_all(text: str) -> str:
    """Whole-text variant of `_shown` for diffs: keeps CRs (real content there) and turns
    escaped bytes into U+FFFD, since lone surrogates cannot be stored or sent as UTF-8."""
    return _ESCAPED_BYTE.sub("\ufffd", text)


def _umask() -> int:
    """The process umask, to give new files the mode `open()` would have given them.

    Read from /proc where possible; setting-and-restoring the umask is racy with threads.
    """
    with contextlib.suppress(OSError, ValueError), open("/proc/self/status", encoding="ascii",
                                                        errors="replace") as f:
        for line in f:
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _write(ctx: ToolContext, t: _Target, data: bytes, mode: int | None) -> None:
    """Replace the target atomically (see `replace_file`) and stamp it as this session's own write.

    `mode` is the permission bits to keep (the old file's), or None for a new file.
    """
    st = replace_file(t.dir_fd, t.name, data, 0o666 & ~_umask() if mode is None else mode)
    ctx.state.read_stamps[t.path] = FileStamp(st.st_mtime_ns, st.st_size)


def _refuse_git(handle: RootHandle, rel: str) -> None:
    why = git_write_refusal(handle, rel)
    if why is not None:
        raise ToolError(why)


def _encode(text: str, what: str) -> bytes:
    """Encode back to bytes; escaped bytes round-trip, other lone surrogates are refused."""
    try:
        return text.encode(ENCODING, ERRORS)
    except UnicodeEncodeError as e:
        raise ToolError(
            f"{what} contains a character that cannot be written as UTF-8 "
            f"({text[e.start:e.end]!r} at offset {e.start})"
        ) from None


def _check_writable(path: Path, rel: str, st: os.stat_result | None) -> None:
    """Refuse read-only files: os.replace would otherwise quietly bypass the permission."""
    if st is not None and not os.access(path, os.W_OK):
        raise ToolError(f"{rel} is read-only (no write permission); it was left unchanged")


# --------------------------------------------------------------------------- read_file


@dataclass
class _Page(Deferred):
    lines: list[tuple[int, str]]  # (1-based number, decoded line with its ending stripped)
    total: int  # lines in the whole file
    valid_utf8: bool


def _read_page(fd: int, offset: int, limit: int) -> _Page:
    """Stream the file, keeping only the requested lines, so huge logs cost little memory."""
    os.lseek(fd, 0, os.SEEK_SET)
    with open(fd, "rb", closefd=False) as f:
        return _page_of(f, offset, limit)


def _page_of(raw_lines: Iterable[bytes], offset: int, limit: int) -> _Page:
    """The requested lines of a file given as its raw lines (a local file, or an editor's buffer)."""
    shown: list[tuple[int, str]] = []
    valid = True
    total = 0
    last = offset + limit - 1
    budget = MAX_PAGE_CHARS
    for total, raw in enumerate(raw_lines, start=1):
        try:
            raw.decode(ENCODING)
        except UnicodeDecodeError:
            valid = False
        if offset <= total <= last and budget > 0:
            line = raw.decode(ENCODING, ERRORS).rstrip("\n")
            budget -= min(len(line), MAX_LINE_CHARS) + 8
            if budget < 0 and shown:
                last = total - 1  # the page is full; the footer says where to go on
                continue
            shown.append((total, line))
    return _Page(shown, total, valid)


def _editor(ctx: ToolContext, writing: bool = False) -> ClientFiles | None:
    """The editor's buffers, when the session has them for this direction."""
    client = ctx.state.client_files
    return client if client is not None and (client.writes if writing else client.reads) else None


def _editor_text(text: str, what: str) -> str:
    """Text the editor can take: JSON carries Unicode only, so bytes kept undecoded (surrogateescape)
    cannot go through it; refused rather than altered."""
    try:
        text.encode(ENCODING)
    except UnicodeEncodeError as e:
        raise ToolError(f"{what} holds bytes that are not UTF-8 (offset {e.start}); the editor takes only text, "
                        "so it was left unchanged") from None
    return text


def _stamp_disk(ctx: ToolContext, path: Path) -> None:
    """After the editor wrote a file: the stamp of what is on disk now (the editor may save later)."""
    try:
        ctx.state.read_stamps[path] = FileStamp.of(path)
    except OSError:
        ctx.state.read_stamps.pop(path, None)


async def read_file(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    """Show part of a text file with line numbers, and stamp it for the stale-write check."""
    offset: int = args.get("offset", 1)
    limit: int = args.get("limit", DEFAULT_LIMIT)
    editor = _editor(ctx)

    def work() -> tuple[_Target, os.stat_result, _Page | bytes | None]:
        with _locate(ctx, args["path"]) as t:
            fd = _open_existing(t)
            if fd is None:
                raise _missing(ctx, t)
            try:
                # Stamp before reading: if the file changes while we read, the stamp is the older
                # one, so a later edit is refused rather than allowed on outdated content.
                st = os.fstat(fd)
                _guard(ctx, "read_file", t, st)
                _require_regular_file(st, t.rel, "read_file")
                head = os.pread(fd, BINARY_SNIFF_BYTES, 0)
                if _is_binary(head):
                    return t, st, head
                return t, st, None if editor is not None else _read_page(fd, offset, limit)
            except OSError as e:
                raise ToolError(f"cannot read {t.rel}: {e.strerror or e}") from None
            finally:
                os.close(fd)

    t, st, page = await in_thread(work)
    path, rel = t.path, t.rel
    if isinstance(page, bytes):
        raise _binary_error(rel, st.st_size, "read_file")
    if page is None:  # the editor's buffer of the file resolved above
        assert editor is not None
        text = await editor.read_text(path)
        page = _page_of(io.BytesIO(_encode(text, rel)), offset, limit)

    meta: dict[str, Any] = {"path": rel, "total_lines": page.total}
    if page.total == 0:
        ctx.state.read_stamps[path] = FileStamp(st.st_mtime_ns, st.st_size)
        return ToolResult(f"{rel} is empty (0 lines).", metadata=meta)
    if offset > page.total:
        raise ToolError(
            f"offset {offset} is past the end of {rel}: the file has {page.total} "
            f"line{'s' if page.total != 1 else ''}"
        )

    out: list[str] = []
    if not page.valid_utf8:
        out.append(
            f"[note: {rel} is not valid UTF-8; undecodable bytes are shown as \ufffd. "
            "edit_file keeps them unchanged outside the text you replace.]"
        )
    out.extend(_numbered(n, line) for n, line in page.lines)
    first, end = page.lines[0][0], page.lines[-1][0]
    if end < page.total:
        out.append(
            f"[showing lines {first}-{end} of {page.total}; "
            f"call read_file with offset={end + 1} to read more]"
        )
    ctx.state.read_stamps[path] = FileStamp(st.st_mtime_ns, st.st_size)
    meta.update(first_line=first, last_line=end, valid_utf8=page.valid_utf8)
    return ToolResult("\n".join(out), metadata=meta)


def _read_existing(ctx: ToolContext, t: _Target, tool: str) -> tuple[os.stat_result, bytes] | None:
    """(stat, bytes) of the regular file at the target, read through one descriptor; None if absent. A protected
    file is refused before a byte of it is read."""
    fd = _open_existing(t)
    if fd is None:
        return None
    try:
        st = os.fstat(fd)
        _guard(ctx, tool, t, st)
        _require_regular_file(st, t.rel, tool)
        return st, read_fd(fd)
    finally:
        os.close(fd)


# --------------------------------------------------------------------------- write_file


def _revealed(ctx: ToolContext, text: str, original: str, rel: str) -> str:
    """`text` (what the model wants written where `original` is now) with the values of the secret markers
    it kept put back; a ToolError for a marker that cannot be (auger/secrets/redact.py `reveal`), so a
    marker is never written into a file."""
    if ctx.secrets is None or "[secret:" not in text:
        return text
    from auger.secrets.redact import Unrestorable

    try:
        return ctx.secrets.reveal(text, original)
    except Unrestorable as exc:
        raise ToolError(f"Not written: {exc.explain(rel)}.") from None


async def write_file(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    """Create or overwrite a whole file, atomically, refusing to clobber unseen changes."""
    content: str = args["content"]
    _encode(content, "content")
    editor = _editor(ctx, writing=True)
    if editor is not None:
        _editor_text(content, "content")

    def work() -> tuple[str, Path, bool, str | None, str]:
        with _locate(ctx, args["path"], write=True, make_parents=True) as t:
            found = _read_existing(ctx, t, "write_file")
            old: str | None = ""
            if found is not None:
                st, old_bytes = found
                _check_fresh(ctx, t.path, t.rel, st, "overwriting")
                _check_writable(t.path, t.rel, st)
                old = None if _is_binary(old_bytes) else old_bytes.decode(ENCODING, ERRORS)
            text = _revealed(ctx, content, old or "", t.rel)
            data = _encode(text, "content")
            if editor is not None:
                return t.rel, t.path, found is None, old, text  # written by the editor, below
            try:
                _write(ctx, t, data, None if found is None else stat.S_IMODE(found[0].st_mode))
            except OSError as e:
                raise ToolError(f"cannot write {t.rel}: {e.strerror or e}") from None
            return t.rel, t.path, found is None, old, text

    rel, path, created, old, content = await in_thread(work)
    data = _encode(content, "content")
    if editor is not None:
        await editor.write_text(path, content)
        _stamp_disk(ctx, path)
    if created:
        ctx.state.created_files.add(path)
    n = _count_lines(content)
    verb = "Created" if created else "Overwrote"
    if old is None:  # a text diff against binary content would be noise
        diff = f"Binary file a/{rel} replaced by text file b/{rel}\n"
    else:
        diff = _unified_diff(old, content, rel, created)
    return ToolResult(
        f"{verb} {rel} ({n} line{'s' if n != 1 else ''}, {len(data):,} bytes).",
        metadata={"path": rel, "created": created, "diff": diff},
    )


# --------------------------------------------------------------------------- edit_file


def _line_of(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def _fuzzy_match_line(text: str, old: str) -> int | None:
    """First line where `old` matches if all whitespace is ignored, else None.

    Only used to hint *why* an exact match failed (indentation, tabs vs spaces), so a
    cheap, slightly lenient comparison is fine.
    """
    def squash(s: str) -> str:
        return "".join(s.split())

    want = [squash(line) for line in old.split("\n")]
    while want and not want[0]:
        want.pop(0)
    while want and not want[-1]:
        want.pop()
    if not want:
        return None
    have = [squash(line) for line in text.split("\n")]
    n = len(want)
    for i in range(len(have) - n + 1):
        if n == 1:
            if want[0] in have[i]:
                return i + 1
        elif (have[i].endswith(want[0]) and have[i + n - 1].startswith(want[-1])
              and have[i + 1:i + n - 1] == want[1:-1]):
            return i + 1
    return None


def _not_found(text: str, old: str, rel: str) -> ToolError:
    """Explain a failed match, pointing at the likely cause where one can be seen."""
    msg = f"old_string was not found in {rel}."
    lines = [line for line in old.split("\n") if line.strip()]
    if lines and all(_LINE_NUMBER_PREFIX.match(line) for line in lines):
        msg += (" It seems to include the line-number prefixes that read_file shows;"
                " remove them and use only the file's text.")
    else:
        at = _fuzzy_match_line(text, old)
        if at is not None:
            msg += (f" A match ignoring whitespace exists near line {at}: the indentation or"
                    " whitespace differs. Copy the exact text (tabs/spaces) from read_file.")
        else:
            msg += " Read the file again and copy the exact text to replace."
    return ToolError(msg)


def _snippet(text: str, first_line: int, last_line: int) -> str:
    """Numbered lines around the changed region, kept short."""
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    start = max(1, first_line - SNIPPET_CONTEXT)
    end = min(len(lines), last_line + SNIPPET_CONTEXT)
    out: list[str] = []
    for n in range(start, end + 1):
        if len(out) == SNIPPET_MAX_LINES:
            out.append(f"[... {end - n + 1} more lines]")
            break
        out.append(_numbered(n, lines[n - 1]))
    return "\n".join(out)


@dataclass
class _Edit(Deferred):
    old_text: str
    new_text: str
    count: int
    first_index: int  # where the first replacement starts
    new_len: int  # length of the replacement as inserted (CRLF-adjusted)


def _apply_edit(text: str, old: str, new: str, replace_all: bool, rel: str) -> _Edit:
    """Replace `old` by `new` in `text`, or raise a ToolError the model can act on."""
    count = text.count(old)
    if count == 0 and "\n" in old and "\r\n" in text:
        # The model writes "\n"; a CRLF file needs "\r\n" on both sides to stay CRLF.
        crlf_old = old.replace("\r\n", "\n").replace("\n", "\r\n")
        if crlf_old in text:
            old = crlf_old
            new = new.replace("\r\n", "\n").replace("\n", "\r\n")
            count = text.count(old)
    if count == 0:
        raise _not_found(text, old, rel)
    if count > 1 and not replace_all:
        at = []
        start = 0
        for _ in range(min(count, 5)):
            i = text.index(old, start)
            at.append(str(_line_of(text, i)))
            start = i + len(old)
        more = ", ..." if count > 5 else ""
        raise ToolError(
            f"old_string matches {count} times in {rel} (at lines {', '.join(at)}{more}); "
            "include more surrounding context to make it unique, or set replace_all=true "
            "to replace every occurrence"
        )
    new_text = text.replace(old, new) if replace_all else text.replace(old, new, 1)
    return _Edit(text, new_text, count, text.index(old), len(new))


async def edit_file(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    """Replace an exact, unique string in a file, leaving every other byte untouched."""
    old: str = args["old_string"]
    new: str = args["new_string"]
    replace_all: bool = args.get("replace_all", False)
    if old == "":
        raise ToolError("old_string is empty; to create or replace a whole file use write_file")
    if old == new:
        raise ToolError("old_string and new_string are identical; there is nothing to change")

    editor = _editor(ctx, writing=True) if _editor(ctx) is not None else None  # an edit reads, then writes

    def work() -> tuple[str, Path, _Edit | None]:
        with _locate(ctx, args["path"], write=True) as t:
            found = _read_existing(ctx, t, "edit_file")
            if found is None:
                raise _missing(ctx, t, "; use write_file to create a new file")
            st, data = found
            _check_fresh(ctx, t.path, t.rel, st, "editing")
            if _is_binary(data):
                raise _binary_error(t.rel, len(data), "edit_file")
            _check_writable(t.path, t.rel, st)
            if editor is not None:
                return t.rel, t.path, None  # the editor's text is edited, below
            text = data.decode(ENCODING, ERRORS)
            edit = _apply_edit(text, _revealed(ctx, old, text, t.rel), _revealed(ctx, new, text, t.rel), replace_all,
                               t.rel)
            try:
                _write(ctx, t, _encode(edit.new_text, "new_string"), stat.S_IMODE(st.st_mode))
            except OSError as e:
                raise ToolError(f"cannot edit {t.rel}: {e.strerror or e}") from None
            return t.rel, t.path, edit

    rel, path, edit = await in_thread(work)
    if edit is None:
        assert editor is not None
        text = await editor.read_text(path)
        edit = _apply_edit(text, _revealed(ctx, old, text, rel), _revealed(ctx, new, text, rel), replace_all, rel)
        await editor.write_text(path, _editor_text(edit.new_text, rel))
        _stamp_disk(ctx, path)
    first = _line_of(edit.new_text, edit.first_index)
    last = _line_of(edit.new_text, edit.first_index + max(edit.new_len - 1, 0))
    head = f"Edited {rel}: {edit.count} replacement{'s' if edit.count != 1 else ''}."
    if edit.count > 1:
        head += " The first changed region:"
    return ToolResult(
        head + "\n" + _snippet(edit.new_text, first, last),
        metadata={"path": rel, "replacements": edit.count,
                  "diff": _unified_diff(edit.old_text, edit.new_text, rel)},
    )


# --------------------------------------------------------------------------- previews


async def preview_change(args: dict[str, Any], ctx: ToolContext) -> str:
    """The unified diff a write_file/edit_file call would make, without making it (for approvals)."""

    def work() -> str:
        try:
            with _locate(ctx, args["path"]) as t:
                found, rel = _read_existing(ctx, t, "preview"), t.rel
        except ToolError as exc:
            if "content" not in args or isinstance(exc, ProtectedFileRefused):  # an edit needs the file
                raise
            found, rel = None, os.path.normpath(root_handle(ctx).relative(args["path"]))  # new directories too
        old = "" if found is None else found[1].decode(ENCODING, ERRORS)
        if "content" in args:
            return _unified_diff(old, _revealed(ctx, args["content"], old, rel), rel, created=found is None)
        edit = _apply_edit(old, _revealed(ctx, args["old_string"], old, rel),
                           _revealed(ctx, args["new_string"], old, rel), args.get("replace_all", False), rel)
        return _unified_diff(edit.old_text, edit.new_text, rel)

    try:
        return await in_thread(work)
    except (ToolError, OSError) as exc:
        return f"(no preview: {exc})"


# --------------------------------------------------------------------------- specs


READ_FILE = ToolSpec(
    name="read_file",
    description=(
        "Read a text file as numbered lines (`cat -n` style; the numbers are not part of the "
        "file): up to 2000 lines from `offset` (1-based), each cut at 2000 characters; page "
        "with offset/limit. Read a file before editing it."
    ),
    parameters={
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "Relative to the project root."},
            "offset": {"type": "integer", "minimum": 1,
                       "description": "First line to show, 1-based (default 1)."},
            "limit": {"type": "integer", "minimum": 1,
                      "description": f"Maximum number of lines to show (default {DEFAULT_LIMIT})."},
        },
        "required": ["path"],
    },
    handler=read_file,
    effect=READ_ONLY,
    parallel_safe=True,
    starts_early=True,
)

WRITE_FILE = ToolSpec(
    name="write_file",
    description=(
        "Create a file, or replace a file's entire content. Parent directories are created. "
        "Prefer edit_file for changing part of an existing file. Refused if the file changed "
        "on disk since you read it (read it again first)."
    ),
    parameters={
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "Relative to the project root."},
            "content": {"type": "string", "description": "The complete new content of the file."},
        },
        "required": ["path", "content"],
    },
    handler=write_file,
    effect=LOCAL_MUTATION,
    previewer=preview_change,
    parallel_safe=False,
)

EDIT_FILE = ToolSpec(
    name="edit_file",
    description=(
        "Replace text in a file. old_string must match exactly, whitespace included (without "
        "read_file's line numbers), and be unique unless replace_all; add surrounding lines to "
        "make it unique. The rest of the file stays byte for byte. Refused if the file changed "
        "on disk since you read it."
    ),
    parameters={
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "Relative to the project root."},
            "old_string": {"type": "string", "description": "The exact text to replace."},
            "new_string": {"type": "string", "description": "The text to put in its place."},
            "replace_all": {"type": "boolean",
                            "description": "Replace every occurrence (default false)."},
        },
        "required": ["path", "old_string", "new_string"],
    },
    handler=edit_file,
    effect=LOCAL_MUTATION,
    previewer=preview_change,
    parallel_safe=False,
)

TOOLS = [READ_FILE, WRITE_FILE, EDIT_FILE]
