"""A commit and the ref that names it, written into a git repository without running git.

Why: a snapshot ends by storing a commit of the tree git just wrote and a ref that keeps it. As
`git commit-tree` and `git update-ref` that is two processes, each costing more (a process start from
a large parent, the repository's configuration read) than the few hundred bytes they write, on the
path of a tool step. Both are git's stable on-disk formats:

* a loose object is `<type> <size>\\0<body>`, zlib-compressed, stored as `objects/xx/yyyy…` under its
  SHA-1 (written, as git does, to a new temporary file of a random name, made read-only and renamed in place);
* a loose ref is a file under `refs/` holding the id and a newline, put in place by renaming a
  `<ref>.lock` file, as git does.

Only what `git init` makes without configuration is written here: SHA-1 object names and refs kept
as files. `plain()` says whether a repository is one; the caller uses git for any other.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
import zlib
from pathlib import Path

LOOSE_COMPRESSION = 1  # git's default for loose objects (core.looseCompression): speed over size


def plain(gitdir: Path) -> bool:
    """Whether the repository names objects by SHA-1 and keeps refs as files: no `extensions` in its
    configuration (they are how git marks SHA-256 objects and the reftable ref store)."""
    try:
        config = (gitdir / "config").read_text(errors="replace").lower()
    except OSError:
        return False
    return "[extensions]" not in config.replace(" ", "")


def commit_body(tree: str, message: str, name: str, email: str, when: int | None = None) -> bytes:
    """A commit object's body, as `git commit-tree TREE` writes it: no parent, author and committer
    alike, the time in UTC."""
    stamp = f"{name} <{email}> {int(time.time()) if when is None else when} +0000"
    return f"tree {tree}\nauthor {stamp}\ncommitter {stamp}\n\n{message}".encode()


def object_id(kind: str, body: bytes) -> str:
    """An object's id: the SHA-1 of its header and body."""
    return hashlib.sha1(f"{kind} {len(body)}\0".encode() + body).hexdigest()


def write_object(gitdir: Path, kind: str, body: bytes, oid: str | None = None) -> str:
    """Store an object (if it is not stored already) and return its id (`oid`: its id, when already known)."""
    data = f"{kind} {len(body)}\0".encode() + body
    oid = oid or hashlib.sha1(data).hexdigest()
    folder = gitdir / "objects" / oid[:2]
    final = folder / oid[2:]
    if final.exists():
        return oid
    folder.mkdir(exist_ok=True)
    tmp = folder / f"tmp_obj_{os.urandom(8).hex()}"  # a new file of a random name, as git makes it
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(zlib.compress(data, LOOSE_COMPRESSION))
        os.chmod(tmp, 0o444)
        os.replace(tmp, final)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return oid


def write_ref(gitdir: Path, ref: str, oid: str) -> None:
    """Point `ref` (e.g. refs/auger/snapshots/<id>) at `oid`. The caller holds the repository alone,
    so a lock file found is one a killed git left behind."""
    path = gitdir / ref
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = path.with_name(path.name + ".lock")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(lock)
    fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    try:
        os.write(fd, f"{oid}\n".encode())
    finally:
        os.close(fd)
    os.replace(lock, path)
