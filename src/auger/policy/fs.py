"""Opening files beneath a directory handle, so paths that commands control cannot redirect auger.

Checking a path and then opening it by name is a race: between the two, a sandboxed command can
swap a directory for a symlink to `~/.ssh` and the open follows it. So every file auger opens on
the model's behalf is opened relative to a handle on the project root (`RootHandle`, one O_PATH
descriptor held for the session), and everything after the open uses the descriptor.

How a path is opened:

* Fast path: one `openat2(root, path, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)`.
  The kernel refuses `..` above the root and any symlink anywhere in the path, atomically.
* When that meets a symlink (ELOOP), or the kernel has no openat2 (ENOSYS), the path is walked one
  component at a time from the root: each directory is opened with `O_NOFOLLOW` relative to its
  parent's descriptor, `..` pops back to the parent descriptor already held (never the kernel's
  `..`), and a symlink is read through the descriptor of the link itself (`readlinkat(fd, "")`) and
  spliced into the remaining path. A link whose target leaves the root is refused; one that stays
  inside is followed, so `docs -> ../shared/docs` keeps working. Nothing is ever resolved through
  an absolute path the kernel would walk on its own.

What this does not guard against: a directory already opened being moved out of the project while
we hold it. Only a process that can write both there and inside the project can do that, and it
then only reaches files it could already write.
"""

from __future__ import annotations

import errno
import os
import stat
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from auger.policy.paths import PathEscape

RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_BENEATH = 0x08
_OPENAT2_NR = {"x86_64": 437, "aarch64": 437, "arm64": 437}.get(os.uname().machine)
_MAX_LINKS = 40  # as the kernel's own limit on symlinks per lookup

_libc: Any = None  # ctypes, imported on first use: start-up time is measured
_open_how: Any = None
_openat2_works: bool | None = None if _OPENAT2_NR is not None else False


def set_openat2(enabled: bool | None) -> None:
    """Force the component walk (False) or go back to probing (None). For tests of the fallback."""
    global _openat2_works
    _openat2_works = False if enabled is False or _OPENAT2_NR is None else None


def openat2_available() -> bool:
    """Whether openat2 is in use (probing it once if not yet known)."""
    if _openat2_works is None:
        top = os.open("/", os.O_PATH | os.O_CLOEXEC)
        try:
            fd = _openat2(top, ".", os.O_PATH, 0, RESOLVE_BENEATH)
            if fd is not None:
                os.close(fd)
        except OSError:
            pass
        finally:
            os.close(top)
    return bool(_openat2_works)


def _openat2(dir_fd: int, path: str, flags: int, mode: int, resolve: int) -> int | None:
    """The descriptor, or None when this kernel has no openat2 (then the caller walks components)."""
    global _libc, _open_how, _openat2_works
    if _openat2_works is False or _OPENAT2_NR is None:  # the second only when the first is too
        return None
    import ctypes

    if _libc is None:
        class OpenHow(ctypes.Structure):  # struct open_how
            _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]

        _libc, _open_how = ctypes.CDLL(None, use_errno=True), OpenHow
    how = _open_how(flags | os.O_CLOEXEC, mode if flags & os.O_CREAT else 0, resolve)
    fd = _libc.syscall(ctypes.c_long(_OPENAT2_NR), ctypes.c_int(dir_fd), ctypes.c_char_p(os.fsencode(path)),
                       ctypes.byref(how), ctypes.c_size_t(ctypes.sizeof(how)))
    if fd >= 0:
        _openat2_works = True
        return int(fd)
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EPERM) and not _openat2_works:  # EPERM: a seccomp filter said no
        _openat2_works = False
        return None
    raise OSError(err, os.strerror(err), path)


@dataclass(frozen=True)
class Resolved:
    """Where a path really is: its symlink-free path relative to the root, and an open parent."""

    rel: str  # '/'-separated, '' for the root itself
    parent_fd: int  # O_PATH descriptor of the parent directory; the caller closes it
    name: str  # the last component ('' for the root itself)


class RootHandle:
    """An O_PATH descriptor on a directory, opened once; everything beneath it is opened through it."""

    def __init__(self, root: Path | str, alias: Path | None = None) -> None:
        """`alias`: another directory whose absolute paths name the same files beneath this root (the
        project, for the copy pending mode's tools work on)."""
        self.path = Path(root)
        self.alias = alias
        self.fd = os.open(self.path, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        self._finalizer = weakref.finalize(self, os.close, self.fd)

    def close(self) -> None:
        self._finalizer()

    def relative(self, raw: str | os.PathLike[str]) -> str:
        """A model-supplied path as a path relative to the root (not yet resolved: `..` may remain).

        An absolute path (or `~/…`) must lie under the root, as written or once resolved (the
        root reached through an alias of one of its parents, `/tmp` for `/private/tmp`). Only the
        string is computed here; what lies under the root is then walked beneath the handle, so
        links inside it are judged like those of any relative path. NUL bytes and lone
        surrogates (no file name can hold them) are refused with a clear message.
        """
        text = os.fspath(raw)
        if "\x00" in text:
            raise PathEscape(f"path contains a NUL byte: {text!r}")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise PathEscape(f"path is not valid UTF-8 text: {text!r}") from None
        if text.startswith("~"):
            text = os.path.expanduser(text)
        if not os.path.isabs(text):
            if os.path.normpath(text).split("/")[0] == "..":  # climbs out even before any symlink
                raise self._escape(os.fspath(raw))
            return text
        root_parts = self.path.parts
        parts = Path(os.path.normpath(text)).parts
        if parts[:len(root_parts)] == root_parts:
            return "/".join(parts[len(root_parts):])
        alias_parts = self.alias.parts if self.alias is not None else None
        if alias_parts and parts[:len(alias_parts)] == alias_parts:
            return "/".join(parts[len(alias_parts):])
        real = Path(os.path.realpath(text)).parts  # the root itself reached through an alias
        if real[:len(root_parts)] == root_parts:
            return "/".join(real[len(root_parts):])
        raise self._escape(os.fspath(raw))

    def _escape(self, raw: str) -> PathEscape:
        return PathEscape(f"path {raw!r} is outside the project root {self.path}; "
                          "only files inside the project can be accessed")

    def resolve(self, raw: str | os.PathLike[str], *, follow: bool = True, links: bool = True,
                make_parents: bool = False) -> Resolved:
        """Walk `raw` from the root, component by component, without ever leaving it.

        `follow`: a symlink as the last component is followed (inside the root) rather than returned.
        `links=False`: any symlink before the last component is refused (ELOOP).
        `make_parents`: missing directories on the way are created (mkdirat, no following).
        The last component need not exist. Raises PathEscape for anything that would leave the
        root, OSError for the rest.
        """
        pending = [p for p in self.relative(raw).split("/") if p not in ("", ".")]
        quick = self._resolve_plain(pending, follow)
        if quick is not None:
            return quick
        pending.reverse()  # a stack: the next component is at the end
        stack: list[tuple[str, int]] = []  # (name, O_PATH fd) from the root down
        hops = 0

        def current() -> int:
            return stack[-1][1] if stack else self.fd

        try:
            while pending:
                name = pending.pop()
                if name == "..":
                    if not stack:
                        raise self._escape(os.fspath(raw))
                    os.close(stack.pop()[1])
                    continue
                if name == ".":
                    continue
                last = not pending
                try:
                    fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=current())
                except FileNotFoundError:
                    if last:  # a file to be created: the parent exists, the name does not
                        return Resolved("/".join([*(n for n, _ in stack), name]), os.dup(current()), name)
                    if not make_parents:
                        raise
                    os.mkdir(name, 0o777, dir_fd=current())
                    fd = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=current())
                kind = stat.S_IFMT(os.fstat(fd).st_mode)
                if kind == stat.S_IFLNK and (follow or not last):
                    if not links:
                        os.close(fd)
                        raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), os.fspath(raw))
                    target = os.readlink("", dir_fd=fd)
                    os.close(fd)
                    hops += 1
                    if hops > _MAX_LINKS:
                        raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), os.fspath(raw))
                    if os.path.isabs(target):
                        root_parts = self.path.parts
                        parts = Path(os.path.normpath(target)).parts
                        if parts[:len(root_parts)] != root_parts:
                            raise self._escape(os.fspath(raw))
                        while stack:
                            os.close(stack.pop()[1])
                        target = "/".join(parts[len(root_parts):])
                    pending.extend(reversed([p for p in target.split("/") if p not in ("", ".")]))
                    continue
                if last:
                    os.close(fd)
                    return Resolved("/".join([*(n for n, _ in stack), name]), os.dup(current()), name)
                if kind != stat.S_IFDIR:
                    os.close(fd)
                    raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), name)
                stack.append((name, fd))
            rel = "/".join(n for n, _ in stack)
            if not stack:
                return Resolved("", os.dup(self.fd), "")
            name, fd = stack.pop()
            return Resolved(rel, os.dup(current()), name)
        finally:
            for _, fd in stack:
                os.close(fd)

    def _resolve_plain(self, parts: list[str], follow: bool) -> Resolved | None:
        """The common case in one openat2: no `..`, no symlink on the way to the parent, and a
        last component that is not a symlink to follow. None sends the caller to the walk."""
        if not parts or ".." in parts:
            return None
        try:
            parent = _openat2(self.fd, "/".join(parts[:-1]) or ".", os.O_PATH | os.O_DIRECTORY, 0,
                              RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS)
        except OSError:
            return None  # a symlink, a missing or non-directory parent: the walk says which
        if parent is None:
            return None
        try:
            last = os.stat(parts[-1], dir_fd=parent, follow_symlinks=False)
            if follow and stat.S_ISLNK(last.st_mode):
                os.close(parent)
                return None
        except FileNotFoundError:
            pass
        except OSError:
            os.close(parent)
            return None
        return Resolved("/".join(parts), parent, parts[-1])

    def open_resolved(self, raw: str | os.PathLike[str], flags: int) -> tuple[str, int]:
        """(symlink-free path relative to the root, descriptor) of `raw`, opened with `flags`
        through its parent's descriptor; links are followed only while they stay inside."""
        where = self.resolve(raw)
        try:
            if not where.name:
                return "", os.open(".", flags | os.O_CLOEXEC, dir_fd=where.parent_fd)
            return where.rel, os.open(where.name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=where.parent_fd)
        finally:
            os.close(where.parent_fd)

    def open(self, raw: str | os.PathLike[str], flags: int, mode: int = 0o666, *, follow: bool = True) -> int:
        """Open `raw` beneath the root with `flags`; see `open_beneath`."""
        return open_beneath(self, raw, flags, mode, follow=follow)


def open_beneath(root: RootHandle, raw: str | os.PathLike[str], flags: int, mode: int = 0o666, *,
                 follow: bool = True) -> int:
    """Open `raw` beneath `root` and return the descriptor (O_CLOEXEC, never through a symlink out).

    `follow=False` refuses a symlink anywhere in the path (ELOOP); with `follow=True` symlinks that
    stay inside the root are followed component by component.
    """
    rel = root.relative(raw)
    if ".." not in rel.split("/"):  # with `..` the walk decides, and says "outside the root" clearly
        try:
            resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS
            fd = _openat2(root.fd, rel or ".", flags, mode, resolve)
        except OSError as exc:
            if exc.errno != errno.ELOOP or not follow:
                raise
            fd = None  # a symlink on the way: the walk follows it if it stays inside
        if fd is not None:
            return fd
    where = root.resolve(rel, follow=follow, links=follow)
    try:
        if not where.name:
            return os.open(".", flags | os.O_CLOEXEC, mode, dir_fd=where.parent_fd)
        return os.open(where.name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=where.parent_fd)
    finally:
        os.close(where.parent_fd)


def read_fd(fd: int) -> bytes:
    """All of a file's bytes from its descriptor (which stays open)."""
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


def replace_file(parent_fd: int, name: str, data: bytes, mode: int) -> os.stat_result:
    """Atomically put `data` at `name` in the directory `parent_fd`: a new temp file beside it
    (O_CREAT|O_EXCL|O_NOFOLLOW, so nothing planted there is followed), fsync, renameat over the
    name. Returns the new file's stat. The rename replaces whatever entry is there, symlink or not,
    and never writes through it."""
    tmp = f".{name[:100]}.{os.urandom(6).hex()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=parent_fd)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fchmod(fd, mode)
            os.fsync(fd)
            st = os.fstat(fd)
        finally:
            os.close(fd)
        os.replace(tmp, name, src_dir_fd=parent_fd, dst_dir_fd=parent_fd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=parent_fd)
        except OSError:
            pass
        raise
    return st


def read_beneath(root: RootHandle, raw: str | os.PathLike[str], *, limit: int | None = None,
                 follow: bool = True) -> bytes:
    """The bytes of the regular file `raw` beneath `root` (symlinks followed only inside it, or
    with `follow=False` not at all).

    Raises PathEscape for a path or link leading out, IsADirectoryError / OSError(EINVAL) for
    anything but a regular file (a FIFO would block a read forever), OSError(EFBIG) past `limit`.
    """
    fd = open_beneath(root, raw, os.O_RDONLY | os.O_NONBLOCK, follow=follow)
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), os.fspath(raw))
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", os.fspath(raw))
        if limit is not None and st.st_size > limit:
            raise OSError(errno.EFBIG, os.strerror(errno.EFBIG), os.fspath(raw))
        return read_fd(fd)
    finally:
        os.close(fd)
