"""The patch envelope models are trained to write, applied all or nothing.

    *** Begin Patch
    *** Add File: path          followed by `+` lines (the whole new file)
    *** Delete File: path
    *** Update File: path
    *** Move to: new/path       (optional, right after Update File)
    @@ optional context header  then hunk lines: ` ` context, `-` removed, `+` added
                                (several `@@ header` lines in a row narrow the search step by step)
    *** End of File             (optional: the hunk ends at the end of the file)
    *** End Patch

Why it is built this way:

* Models misremember whitespace and typography, not content. Each hunk's old lines are looked for
  exactly first, then ignoring trailing whitespace, then ignoring surrounding whitespace, then with
  Unicode dashes, quotes and spaces read as their ASCII forms. The first level that finds the lines
  wins, so a faithful patch never lands on a merely similar place.
* Hunks apply in file order, as Codex's apply_patch applies them: each is looked for after the
  previous one, and one whose lines occur only earlier fails, saying so. A hunk of added lines only
  goes right after its `@@` header, or without one at the end of the file.
* Line breaks are the file's own: a line ends at CRLF, LF or a lone CR, as Codex splits them, every
  line keeps its own ending (a file may mix all three), an added line takes the file's first one,
  and an updated file ends with a line break.
* A patch is one change. Every file's new content is computed in memory before anything is written,
  so a hunk that does not apply changes nothing; the error names the file and hunk, says why, and
  shows the best partial match with its line number so the model can correct itself. Should a write
  itself fail (disk full), the files already written are put back.
* Paths come from the model: they are relative to the project root (or to the directory a
  `cd dir &&` before a patch sent as a command names, itself walked beneath the root), opened
  beneath the root handle (`auger.policy.fs`, never by name) and refused inside any git directory
  (`auger.policy.gitguard`). Absolute paths are refused. Writes are atomic and a file keeps its mode.
* A caller may pass a `guard`, shown each existing file (its resolved path, the path as the patch wrote it,
  its stat) before a byte of it is read: the tool refuses protected files there (tools/patch.py), so a hunk
  that does not match never shows the lines of one.
"""

from __future__ import annotations

import os
import re
import shlex
import stat
from dataclasses import dataclass, field, replace
from typing import Callable

from auger.changes.files import remove_beneath, write_beneath
from auger.policy.fs import RootHandle, read_fd
from auger.policy.gitguard import git_write_refusal
from auger.policy.paths import PathEscape

BEGIN = "*** Begin Patch"
END = "*** End Patch"
ADD = "*** Add File: "
DELETE = "*** Delete File: "
UPDATE = "*** Update File: "
MOVE = "*** Move to: "
EOF_MARK = "*** End of File"
MAX_FILE_BYTES = 32 << 20  # a file larger than this is not something a patch should rewrite in memory

Guard = Callable[[str, str, os.stat_result], None]  # (resolved path, path as written, stat): raises to refuse


class PatchError(Exception):
    """A patch that cannot be parsed or applied; the message says where and why, and nothing changed."""


# --------------------------------------------------------------------------- the parsed patch


@dataclass(frozen=True)
class Chunk:
    """One `@@` hunk: its lines tagged ' ' (or '' for an empty line), '-' or '+', and where to look."""

    headers: tuple[str, ...]  # the text of its `@@ …` lines: each is looked for after the one before
    lines: tuple[tuple[str, str], ...]
    end_of_file: bool
    line: int  # where the hunk starts in the patch text, for messages

    @property
    def old(self) -> tuple[str, ...]:
        """The lines the hunk expects in the file."""
        return tuple(text for tag, text in self.lines if tag != "+")


@dataclass(frozen=True)
class AddFile:
    path: str
    content: str


@dataclass(frozen=True)
class DeleteFile:
    path: str


@dataclass(frozen=True)
class UpdateFile:
    path: str
    move_to: str | None
    chunks: tuple[Chunk, ...]


FileOp = AddFile | DeleteFile | UpdateFile


def parse_patch(text: str) -> list[FileOp]:
    """The file operations of a patch envelope, or PatchError naming the offending line."""
    lines = [line.removesuffix("\r") for line in text.strip().split("\n")]
    if len(lines) >= 2 and re.fullmatch(r"<<-?\s*(['\"]?)\w+\1", lines[0].strip()):
        lines = lines[1:-1]  # a heredoc's markers left around the patch
    if not lines or lines[0].strip() != BEGIN:
        raise PatchError(f"the patch must start with '{BEGIN}'")
    if len(lines) < 2 or lines[-1].strip() != END:
        raise PatchError(f"the patch must end with '{END}' (is it truncated?)")
    ops: list[FileOp] = []
    i, last = 1, len(lines) - 1
    while i < last:
        head = lines[i].strip()
        number = i + 1
        if head.startswith(ADD):
            body: list[str] = []
            i += 1
            while i < last and lines[i].startswith("+"):
                body.append(lines[i][1:])
                i += 1
            ops.append(AddFile(_path(head[len(ADD):], number), "".join(f"{b}\n" for b in body)))
        elif head.startswith(DELETE):
            ops.append(DeleteFile(_path(head[len(DELETE):], number)))
            i += 1
        elif head.startswith(UPDATE):
            path = _path(head[len(UPDATE):], number)
            i += 1
            move_to = None
            if i < last and lines[i].strip().startswith(MOVE):
                move_to = _path(lines[i].strip()[len(MOVE):], i + 1)
                i += 1
            chunks, i = _parse_chunks(lines, i, last)
            if not chunks:
                raise PatchError(f"patch line {number}: '{head}' has no hunks")
            ops.append(UpdateFile(path, move_to, tuple(chunks)))
        elif not head:
            i += 1
        else:
            raise PatchError(f"patch line {number}: {head[:80]!r} is not a file header; expected "
                             f"'{ADD}', '{DELETE}' or '{UPDATE}' followed by a path")
    if not ops:
        raise PatchError("the patch changes no files")
    return ops


def _path(raw: str, number: int) -> str:
    """A path as written in a header: non-empty and relative (the root handle judges the rest)."""
    path = raw.strip()
    if not path:
        raise PatchError(f"patch line {number}: the file header names no path")
    if os.path.isabs(path) or path.startswith("~"):
        raise PatchError(f"patch line {number}: {path!r} is absolute; patch paths are relative to the project root")
    if ".." in path.split("/"):
        raise PatchError(f"patch line {number}: {path!r} uses '..'; patch paths name files inside the project "
                         "root, relative to it, and never climb outside the project root")
    return path


def _parse_chunks(lines: list[str], i: int, last: int) -> tuple[list[Chunk], int]:
    """The hunks of one Update File section, and the index of the line after them."""
    chunks: list[Chunk] = []
    headers: list[str] = []
    body: list[tuple[str, str]] = []
    start = i + 1
    opened = False  # a hunk without `@@` is allowed only as the first one

    def close(eof: bool) -> None:
        nonlocal body, headers, opened
        if opened or body:
            if not body:
                raise PatchError(f"patch line {start}: the hunk has no lines")
            chunks.append(Chunk(tuple(headers), tuple(body), eof, start))
        body, headers, opened = [], [], False

    while i < last:
        line = lines[i]
        if line.strip() == EOF_MARK:
            close(True)
            i += 1
            continue
        if line.startswith("*** "):
            break
        if not line.strip() and not body and not opened:
            i += 1  # blank lines between hunks (after `*** End of File`, say) only separate them
            continue
        if line == "@@" or line.startswith("@@ "):
            if body or not opened:  # `@@` lines in a row are one hunk's headers, narrowing step by step
                close(False)
                start = i + 1
            opened = True
            if line[3:].strip():
                headers.append(line[3:])
        elif line[:1] in (" ", "-", "+") or line == "":
            if not opened and chunks:
                raise PatchError(f"patch line {i + 1}: a hunk after the first must start with '@@'")
            if not opened and not body:
                start = i + 1
            body.append((line[:1], line[1:]))  # tag '' for an empty line: context, or a separator
        else:
            raise PatchError(f"patch line {i + 1}: {line[:80]!r} is not a hunk line; each line of a hunk "
                             "starts with ' ' (context), '-' (removed) or '+' (added)")
        i += 1
    while body and body[-1] == ("", "") and len(body) > 1:
        body.pop()  # empty lines before the next file header separate sections; they are not context
    close(False)
    return chunks, i


# --------------------------------------------------------------------------- matching

_PUNCTUATION = str.maketrans({
    **dict.fromkeys("\u2010\u2011\u2012\u2013\u2014\u2015\u2212", "-"),
    **dict.fromkeys("\u2018\u2019\u201a\u201b", "'"),
    **dict.fromkeys("\u201c\u201d\u201e\u201f", '"'),
    **dict.fromkeys("\u00a0\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u202f\u205f\u3000", " "),
})
_LEVELS = (
    lambda s: s,
    str.rstrip,
    str.strip,
    lambda s: s.translate(_PUNCTUATION).strip(),
)


def seek(lines: list[str], pattern: tuple[str, ...], start: int, eof: bool = False) -> int | None:
    """Where `pattern` occurs in `lines` at or after `start`, trying ever more tolerant comparisons.

    With `eof` the end of the file is tried first, since that is where the hunk says it belongs."""
    if not pattern:
        return start
    span = len(pattern)
    if span > len(lines):
        return None
    first = len(lines) - span if eof and len(lines) - span >= start else start
    for norm in _LEVELS:
        want = [norm(p) for p in pattern]
        for at in range(first, len(lines) - span + 1):
            if all(norm(lines[at + k]) == want[k] for k in range(span)):
                return at
        if first != start:
            for at in range(start, first):
                if all(norm(lines[at + k]) == want[k] for k in range(span)):
                    return at
    return None


def nearest(lines: list[str], pattern: tuple[str, ...]) -> str:
    """The best partial match of `pattern` in `lines`, as a short note for the model."""
    norm = _LEVELS[-1]
    want = [norm(p) for p in pattern]
    best, best_at = 0, -1
    for at in range(max(1, len(lines) - len(pattern) + 1)):
        score = sum(1 for k, w in enumerate(want) if at + k < len(lines) and norm(lines[at + k]) == w)
        if score > best:
            best, best_at = score, at
    if best == 0:
        return "no line of it was found in the file"
    diff = next((k for k, w in enumerate(want) if best_at + k >= len(lines) or norm(lines[best_at + k]) != w), None)
    if diff is None:
        return f"all of its lines match at line {best_at + 1}"
    found = lines[best_at + diff] if best_at + diff < len(lines) else "(end of file)"
    return (f"best partial match at line {best_at + 1} ({best} of {len(pattern)} lines match); "
            f"at line {best_at + diff + 1} the hunk expects {pattern[diff]!r} but the file has {found!r}")


def _not_found(lines: list[str], pattern: tuple[str, ...], cursor: int) -> str:
    """Why `pattern` is not at or after line `cursor`: it occurs only before it (the hunks are out of
    order), or the best partial match, so the model can correct the hunk."""
    earlier = seek(lines, pattern, 0) if cursor else None
    if earlier is not None:
        return (f"could not be found after line {cursor}, where the hunk before it ends: they match only "
                f"earlier, at line {earlier + 1}. Hunks apply in the order of the file's lines: move this hunk "
                "before the one it follows, or join the two")
    return f"could not be found after line {cursor}; {nearest(lines, pattern)}"


_BREAK = re.compile(r"\r\n|\r|\n")


def _split_lines(text: str) -> tuple[list[str], list[str]]:
    """A file's lines and the line break ending each ('' after an unterminated last line). As in
    Codex's apply_patch, a line ends at CRLF, at LF or at a lone CR, wherever it stands, so a file
    that mixes the three (an old Mac line pasted into a Windows file) still splits into the lines a
    model sees and patches."""
    lines: list[str] = []
    ends: list[str] = []
    pos = 0
    for match in _BREAK.finditer(text):
        lines.append(text[pos:match.start()])
        ends.append(match.group())
        pos = match.end()
    if pos < len(text):
        lines.append(text[pos:])
        ends.append("")
    return lines, ends


def apply_chunks(text: str, chunks: tuple[Chunk, ...], path: str) -> str:
    """`text` with every hunk applied in order, or PatchError naming the hunk that did not fit. A
    byte order mark is no part of the first line: it is set aside and put back, as Codex does."""
    bom = "\ufeff" if text.startswith("\ufeff") else ""
    lines, ends = _split_lines(text[len(bom):])
    newline = next((end for end in ends if end), "\n")  # what an added line ends with: the file's first break
    edits: list[tuple[int, int, list[tuple[str, str]]]] = []
    cursor = 0
    for n, chunk in enumerate(chunks, start=1):
        where = f"{path}: hunk {n} (patch line {chunk.line})"
        for header in chunk.headers:
            at = seek(lines, (header,), cursor)
            if at is None:
                raise PatchError(f"{where}: the context line '@@ {header}' {_not_found(lines, (header,), cursor)}")
            cursor = at + 1
        body, old = chunk.lines, chunk.old
        if not old:  # only added lines: right after its header, else at the end; later hunks look from here
            at = cursor if chunk.headers and not chunk.end_of_file else len(lines)
            edits.append((at, 0, _replacement(body, lines, ends, at, newline)))
            continue
        found = seek(lines, old, cursor, chunk.end_of_file)
        if found is None and body[-1][1] == "" and body[-1][0] in (" ", ""):  # a blank line added at the end
            body = body[:-1]
            old = old[:-1]
            found = seek(lines, old, cursor, chunk.end_of_file) if old else None
        if found is None:
            raise PatchError(f"{where}: the lines it changes {_not_found(lines, chunk.old, cursor)}")
        edits.append((found, len(old), _replacement(body, lines, ends, found, newline)))
        cursor = found + len(old)
    edits.sort(key=lambda edit: edit[0])  # stable: two insertions at one place keep the patch's order
    result = list(zip(lines, ends, strict=True))
    for at, count, new in reversed(edits):
        result[at:at + count] = new
    return bom + "".join(line + (end or newline) for line, end in result)  # every line ends, the last one too


def _replacement(body: tuple[tuple[str, str], ...], lines: list[str], ends: list[str], at: int,
                 newline: str) -> list[tuple[str, str]]:
    """The hunk's new lines with their breaks; a context line keeps the file's own text (its
    whitespace, its dashes, its line break) even when only a tolerant comparison matched it, so a
    hunk changes only what it marks."""
    out: list[tuple[str, str]] = []
    k = at
    for tag, text in body:
        if tag == "+":
            out.append((text, newline))
            continue
        if tag != "-":
            out.append((lines[k], ends[k]))
        k += 1
    return out


# --------------------------------------------------------------------------- applying


@dataclass
class PatchResult:
    """What a patch did, by project-relative path."""

    added: list[str] = field(default_factory=list)
    modified: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    moved: list[tuple[str, str]] = field(default_factory=list)

    def summary(self) -> str:
        rows = ([f"A {p}" for p in self.added] + [f"M {p}" for p in self.modified]
                + [f"R {a} -> {b}" for a, b in self.moved] + [f"D {p}" for p in self.deleted])
        return "\n".join(rows)


@dataclass
class _Plan:
    """New content per resolved path (None: remove), the original content and mode of each."""

    root: RootHandle
    guard: Guard | None = None
    new: dict[str, bytes | None] = field(default_factory=dict)
    modes: dict[str, int | None] = field(default_factory=dict)  # None: a new file, the umask decides
    before: dict[str, tuple[bytes, int | None] | None] = field(default_factory=dict)

    def resolve(self, raw: str, follow: bool = True) -> str:
        """The symlink-free relative path of `raw`, refused if it leaves the root or enters git.
        `follow=False`: a symlink as the last component is the file meant, not what it points to."""
        rel = self._existing(raw, follow)
        if not rel:
            raise PatchError(f"{raw!r} names the project root itself, not a file")
        why = git_write_refusal(self.root, rel)
        if why is not None:
            raise PatchError(why)
        return rel

    def _existing(self, raw: str, follow: bool = True) -> str:
        """`raw` resolved beneath the root; below a directory that does not exist yet (the patch will
        create it) nothing can be a link, so the rest is appended as written."""
        try:
            where = self.root.resolve(raw, follow=follow)
        except PathEscape as exc:
            raise PatchError(str(exc)) from None
        except FileNotFoundError:
            head, _, tail = raw.rstrip("/").rpartition("/")
            if not head:
                raise PatchError(f"{raw}: cannot be resolved") from None
            parent = self._existing(head)
            return f"{parent}/{tail}" if parent else tail
        except OSError as exc:
            raise PatchError(f"{raw}: {exc.strerror or exc}") from None
        os.close(where.parent_fd)
        return where.rel

    def current(self, rel: str, raw: str) -> tuple[bytes, int | None] | None:
        """The file's bytes and permission bits as the patch has left them so far (None: absent)."""
        if rel in self.new:
            data = self.new[rel]
            return None if data is None else (data, self.modes[rel])
        if rel not in self.before:
            self.before[rel] = self._read(rel, raw)
        return self.before[rel]

    def _read(self, rel: str, raw: str) -> tuple[bytes, int | None] | None:
        try:
            fd = self.root.open(rel, os.O_RDONLY | os.O_NONBLOCK, follow=False)
        except FileNotFoundError:
            return None
        except (OSError, PathEscape) as exc:
            raise PatchError(f"{raw}: cannot read it ({getattr(exc, 'strerror', None) or exc})") from None
        try:
            st = os.fstat(fd)
            if self.guard is not None:
                self.guard(rel, raw, st)
            if not stat.S_ISREG(st.st_mode):
                raise PatchError(f"{raw} is not a regular file")
            if st.st_size > MAX_FILE_BYTES:
                raise PatchError(f"{raw} is larger than {MAX_FILE_BYTES >> 20} MB; edit it another way")
            return read_fd(fd), stat.S_IMODE(st.st_mode)
        except OSError as exc:
            raise PatchError(f"{raw}: cannot read it ({exc.strerror or exc})") from None
        finally:
            os.close(fd)

    def is_link(self, rel: str) -> bool:
        if rel in self.new:
            return False
        try:
            fd = self.root.open(rel, os.O_PATH | os.O_NOFOLLOW, follow=False)
        except OSError:
            return False
        try:
            return stat.S_ISLNK(os.fstat(fd).st_mode)
        finally:
            os.close(fd)

    def put(self, rel: str, data: bytes | None, mode: int | None) -> None:
        self.new[rel] = data
        self.modes[rel] = mode


# Puts back what the patch's text stands for in a file: (the patch's text, the file's text now, its path) →
# the text to apply. The session's redaction of secrets (tools/patch.py) passes one; it raises PatchError.
Reveal = Callable[[str, str, str], str]


def plan_patch(root: RootHandle, ops: list[FileOp], reveal: Reveal | None = None,
               guard: Guard | None = None) -> tuple[_Plan, PatchResult]:
    """Every file's new content, computed in memory; PatchError if any part does not apply."""
    plan, result = _Plan(root, guard), PatchResult()
    for op in ops:
        if isinstance(op, DeleteFile) and plan.is_link(rel := plan.resolve(op.path, follow=False)):
            plan.put(rel, None, None)  # the link goes, never the file it points to
            result.deleted.append(rel)
            continue
        rel = plan.resolve(op.path)
        now = plan.current(rel, op.path)
        if isinstance(op, AddFile):
            content = op.content
            if reveal is not None:
                content = reveal(content, "" if now is None else now[0].decode("utf-8", "surrogateescape"), op.path)
            plan.put(rel, content.encode("utf-8", "surrogateescape"), None if now is None else now[1])
            (result.added if now is None else result.modified).append(rel)
        elif isinstance(op, DeleteFile):
            if now is None:
                raise PatchError(f"cannot delete {op.path}: it does not exist")
            plan.put(rel, None, None)
            result.deleted.append(rel)
        else:
            if now is None:
                raise PatchError(f"cannot update {op.path}: it does not exist")
            text = now[0].decode("utf-8", "surrogateescape")
            chunks = op.chunks if reveal is None else _revealed(op, text, reveal)
            data = apply_chunks(text, chunks, op.path).encode("utf-8", "surrogateescape")
            if op.move_to is None:
                plan.put(rel, data, now[1])
                result.modified.append(rel)
                continue
            dest = plan.resolve(op.move_to)
            plan.current(dest, op.move_to)  # remember what was there, to put it back on failure
            plan.put(rel, None, None)
            plan.put(dest, data, now[1])
            result.moved.append((rel, dest))
    return plan, result


def _revealed(op: UpdateFile, text: str, reveal: Reveal) -> tuple[Chunk, ...]:
    """The update's hunks with what their lines stand for in the file (`text`) put back."""
    return tuple(replace(chunk, headers=tuple(reveal(h, text, op.path) for h in chunk.headers),
                         lines=tuple((tag, reveal(line, text, op.path)) for tag, line in chunk.lines))
                 for chunk in op.chunks)


def plan_patch_text(root: RootHandle, text: str, workdir: str | None = None, reveal: Reveal | None = None,
                    guard: Guard | None = None) -> tuple[_Plan, PatchResult]:
    """Parse `text` and plan it beneath `root`; with `workdir` (a `cd dir &&` before the patch), its
    paths are relative to that directory, which must lie inside the root."""
    return plan_patch(root, patch_ops(root, text, workdir), reveal, guard)


def patch_ops(root: RootHandle, text: str, workdir: str | None = None) -> list[FileOp]:
    """The operations of `text`, their paths relative to the root (`workdir` joined in front)."""
    ops = parse_patch(text)
    return _beneath(ops, resolve_workdir(root, workdir)) if workdir else ops


def op_paths(ops: list[FileOp]) -> list[str]:
    """Every path the operations name (a move's destination too), once each, in order."""
    paths = [op.path for op in ops] + [op.move_to for op in ops if isinstance(op, UpdateFile) and op.move_to]
    return list(dict.fromkeys(paths))


def resolve_workdir(root: RootHandle, raw: str) -> str:
    """The directory `raw` names, as a symlink-free path relative to the root, walked beneath the
    root handle like every path: PatchError when it leads outside (by `..` or a link) or is not a
    directory."""
    try:
        where = root.resolve(raw)
    except PathEscape as exc:
        raise PatchError(f"cd {raw}: {exc}") from None
    except OSError as exc:
        raise PatchError(f"cd {raw}: {exc.strerror or exc}") from None
    try:
        st = os.stat(where.name or ".", dir_fd=where.parent_fd, follow_symlinks=False)
    except OSError:
        raise PatchError(f"cd {raw}: there is no such directory") from None
    finally:
        os.close(where.parent_fd)
    if not stat.S_ISDIR(st.st_mode):
        raise PatchError(f"cd {raw}: not a directory")
    return where.rel


def _beneath(ops: list[FileOp], base: str) -> list[FileOp]:
    """The operations with their paths taken relative to `base` (relative to the root)."""
    if not base:
        return ops

    def under(path: str) -> str:
        return f"{base}/{path}"

    moved: list[FileOp] = []
    for op in ops:
        if isinstance(op, UpdateFile):
            moved.append(replace(op, path=under(op.path), move_to=under(op.move_to) if op.move_to else None))
        else:
            moved.append(replace(op, path=under(op.path)))
    return moved


def apply_patch(root: RootHandle, text: str, workdir: str | None = None, reveal: Reveal | None = None,
                guard: Guard | None = None) -> PatchResult:
    """Parse and apply `text` beneath `root` (its paths relative to `workdir` when given), all or
    nothing. Raises PatchError (nothing changed), or what `guard` raises."""
    plan, result = plan_patch_text(root, text, workdir, reveal, guard)
    done: list[str] = []
    try:
        for rel, data in plan.new.items():
            _write(root, rel, data, plan.modes[rel])
            done.append(rel)
    except (OSError, PathEscape) as exc:
        for rel in reversed(done):  # put back what was already written
            old = plan.before.get(rel)
            try:
                _write(root, rel, None if old is None else old[0], None if old is None else old[1])
            except (OSError, PathEscape):
                pass
        raise PatchError(f"writing the patch failed ({getattr(exc, 'strerror', None) or exc}); "
                         "no file was changed") from None
    return result


def _write(root: RootHandle, rel: str, data: bytes | None, mode: int | None) -> None:
    """Put `data` at `rel` (None: remove it)."""
    if data is None:
        remove_beneath(root, rel)
    else:
        write_beneath(root, rel, data, mode)


# --------------------------------------------------------------------------- from a shell command


@dataclass(frozen=True)
class ShellPatch:
    """A patch a model sent as a shell command, and the directory it asked to `cd` into first."""

    patch: str
    workdir: str | None


_NAMES = ("apply_patch", "applypatch")
_HEREDOC = re.compile(
    r"\A\s*(?:cd\s+(?P<cd>'[^']*'|\"[^\"]*\"|[^\s;&|]+)\s*&&\s*)?(?:apply_patch|applypatch)\s*"
    r"<<(?P<dash>-?)\s*(?P<q>['\"]?)(?P<tag>\w+)(?P=q)[ \t]*\n(?P<body>.*?\n)?[ \t]*(?P=tag)\s*\Z", re.S)


def extract_from_shell(command: str | list[str]) -> ShellPatch | None:
    """The patch in `apply_patch <<'EOF' … EOF` or `apply_patch "<patch>"` (optionally after
    `cd dir &&`), or None when the command is something else and should run as a command."""
    if isinstance(command, list):
        if len(command) == 2 and command[0] in _NAMES:
            return ShellPatch(command[1], None)
        if len(command) == 3 and command[0] in ("bash", "sh") and command[1] in ("-c", "-lc"):
            return extract_from_shell(command[2])
        return None
    match = _HEREDOC.match(command)
    if match:
        body = match["body"] or ""
        if match["dash"]:
            body = "\n".join(line.lstrip("\t") for line in body.split("\n"))
        cd = match["cd"]
        return ShellPatch(body, shlex.split(cd)[0] if cd else None)
    try:
        words = shlex.split(command)
    except ValueError:
        return None
    if len(words) == 2 and words[0] in _NAMES and words[1].lstrip().startswith(BEGIN):
        return ShellPatch(words[1], None)
    if len(words) == 5 and words[0] == "cd" and words[2] == "&&" and words[3] in _NAMES:
        return ShellPatch(words[4], words[1])
    return None

