"""What the last snapshot saw of a small tree — each directory's names, each recorded file's stat data and blob
id — so that the next snapshot can tell what changed, and write its tree, without running git.

Why: a snapshot by git is five processes (three listings side by side, then `update-index` and `write-tree`).
From a large parent each start blocks the event loop, and together they were most of a tool step that changes a
file (10–15 ms of 25). Git's ignore rules are only needed for a name a snapshot has not seen: when every name in
the tree is one the last snapshot saw, what the next one holds is the last one's files, less those gone, with the
content they have now. Directory listings and `lstat` tell that; a file whose stat data moved is hashed here, and
the tree objects on the changed paths are written directly (git_objects.py). Anything else is git's to decide.

What keeps it exact (the snapshot store makes and checks the manifest; this module only describes the tree):
* It is made only for a tree it can describe whole: at most MAX_NAMES names; the snapshot left nothing out with
  a warning or for lack of budget; no repository nested in a directory it walks.
* Every name is accounted for: a recorded file, a directory walked, a directory git never enters (an ignore
  pattern names it: what appears inside stays ignored; one file in it is kept as a witness, since git stops
  naming it once it is empty), a file left out for its size (its stat data is kept: the commit message names
  size and mtime), or a name the caller explains (auger's own, a protected file; such a file must stay a file).
  A directory whose contents are all ignored is walked, and what is inside it is then explained: a new name
  there could change what git lists. An unexplained name (one that appeared since) means no manifest.
* Directories are opened beneath their parents without following links (`Dirs`): one swapped for a link makes
  the look fail; nothing outside the tree is ever read.
* Stat data is compared as git's index compares it (inode, mode, size, mtime and ctime in ns), with git's rule for
  racy entries: a file whose mtime or ctime is not older than the moment its stat data was taken (less a margin
  for coarse file-system clocks) is hashed again.
* A new name, a gone left-out path or witness, a type turned directory or a directory turned link, a changed or
  removed `.gitignore` or `.augerignore`, a left-out file changed: `look` says so (None) and git takes it.
The git index is left as it was: what git compares next is then more than what changed, never less.
"""

from __future__ import annotations

import json
import os
import stat
import time
from dataclasses import asdict, field
from pathlib import Path
from typing import Callable, Iterable, Mapping

from auger.changes import git_objects
from auger.lazy_dataclass import Deferred, dataclass
from auger.policy.fs import read_fd

MANIFEST = "auger-tree.json"
MAX_NAMES = 5000  # names in the tree (files, directories, left-out paths): a larger tree is git's alone
MAX_INDEX_BYTES = 1 << 19  # a snapshot index larger than this holds more files than are walked here
MAX_HASHED = 64 << 20  # bytes a manifest may hash to be made (a tree of large files is git's alone)
RACY_NS = 2_000_000_000  # stat data this close to when it was taken is not trusted (FAT keeps 2 s)
RULE_FILES = frozenset({".gitignore", ".augerignore"})  # a change to one changes what is listed or protected
TREE, LINK, PLAIN, EXEC = "40000", "120000", "100644", "100755"
_NEVER_ENTERED = [-1]  # a directory git never enters: only that it still is one counts
_NOT_A_DIRECTORY = [-2]  # a file left out (ignored, protected, auger's own): only that it is no directory counts

Stat = list[int]  # [inode, size, mtime ns, ctime ns, st_mode]


@dataclass
class Manifest(Deferred):
    """One snapshot's view of the tree; `key` names the limits and rules it was made under."""

    key: str
    since: int  # ns: stat data not older than this is racy
    tree: str
    unrecorded: str  # the commit message's trailer naming what was left out ("" when nothing was)
    kept: dict[str, int]  # files whose permission bits are not the usual ones
    files: dict[str, list]  # path -> [git mode, blob id, *Stat]; a zero Stat: hash it again
    trees: dict[str, str]  # directory holding recorded files -> its tree id ("" is the root)
    dirs: dict[str, list[str]]  # directory walked -> its names (parents before children)
    watch: dict[str, Stat] = field(default_factory=dict)  # left-out paths: a file's Stat, or a type marker
    indexed: bool = True  # whether the snapshot index holds `tree` (False once a snapshot was taken from this)
    packs: list[int] = field(default_factory=list)  # `packs_stamp` then: a gc since may have pruned its objects
    # a directory git never enters -> a file in it: git names such a directory only while it holds a file
    witness: dict[str, str] = field(default_factory=dict)


def read(snapdir: Path) -> Manifest | None:
    """The manifest kept in the snapshot repository, whatever it was made under (its `key` says)."""
    try:
        return Manifest(**json.loads((snapdir / MANIFEST).read_bytes()))
    except (OSError, ValueError, TypeError):
        return None


def packs_stamp(snapdir: Path) -> list[int]:
    """The pack directory's inode and mtime: any `git gc` (this auger's, another's) writes a pack there, and
    only a gc prunes objects, so a manifest made before one may name objects gone (this auger's own gc forgets
    the manifest too)."""
    try:
        st = os.stat(snapdir / "objects" / "pack")
    except OSError:
        return []
    return [st.st_ino, st.st_mtime_ns]


def unindexed(manifest: Manifest | None) -> tuple[str, dict[str, int], set[str]] | None:
    """The tree, permission bits and files of the last snapshot when one was taken from `manifest` (whatever it
    was made under): the snapshot index is older, and must be made that tree before git takes the next."""
    if manifest is None or manifest.indexed:
        return None
    tree, kept = manifest.tree, manifest.kept
    if not (isinstance(tree, str) and len(tree) == 40 and isinstance(kept, dict)
            and all(isinstance(bits, int) for bits in kept.values()) and isinstance(manifest.files, dict)):
        return None
    return tree, kept, set(manifest.files)


def save(snapdir: Path, manifest: Manifest) -> None:
    tmp = snapdir / (MANIFEST + ".tmp")
    tmp.write_text(json.dumps(asdict(manifest), separators=(",", ":")))
    os.replace(tmp, snapdir / MANIFEST)


def forget(snapdir: Path) -> None:
    """No manifest: the next snapshot is git's (after objects were pruned, or the index was rebuilt)."""
    try:
        os.unlink(snapdir / MANIFEST)
    except FileNotFoundError:
        pass


def now_racy() -> int:
    """The `since` of stat data taken from now on."""
    return time.time_ns() - RACY_NS


def stat_of(st: os.stat_result) -> Stat:
    return [st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_mode]


def git_mode(st: os.stat_result) -> str:
    """The mode git records for a file (core.filemode: only the owner's execute bit counts)."""
    if stat.S_ISLNK(st.st_mode):
        return LINK
    return EXEC if st.st_mode & stat.S_IXUSR else PLAIN


def blob_id(data: bytes) -> str:
    return git_objects.object_id("blob", data)


class Dirs:
    """The tree's directories, each opened beneath its parent without following a symlink (O_NOFOLLOW): a
    directory swapped for a link while the tree is looked at makes the look fail, never read what lies
    elsewhere. A few are kept open (parents are looked at before their children)."""

    KEEP = 64

    def __init__(self, root: Path) -> None:
        self.root = root
        self._open: dict[str, int] = {}

    def __enter__(self) -> Dirs:
        return self

    def __exit__(self, *exc: object) -> None:
        for fd in self._open.values():
            os.close(fd)
        self._open.clear()

    def fd(self, rel: str) -> int:
        """An open descriptor of the directory `rel` ("" is the root); OSError when it is none (now)."""
        fd = self._open.pop(rel, None)
        if fd is None:
            if rel:
                parent, _, name = rel.rpartition("/")
                fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                             dir_fd=self.fd(parent))
            else:
                fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        self._open[rel] = fd  # (most recently used last)
        while len(self._open) > self.KEEP:
            os.close(self._open.pop(next(iter(self._open))))
        return fd

    def names(self, rel: str) -> list[str]:
        return os.listdir(self.fd(rel))

    def lstat(self, path: str) -> os.stat_result:
        parent, _, name = path.rpartition("/")
        return os.lstat(name, dir_fd=self.fd(parent))

    def read(self, path: str, seen: os.stat_result, limit: int) -> bytes | None:
        """A file's bytes (a symlink's target), as long as it is what `seen` saw and within `limit`; else None."""
        parent, _, name = path.rpartition("/")
        try:
            where = self.fd(parent)
            if stat.S_ISLNK(seen.st_mode):
                target = os.fsencode(os.readlink(name, dir_fd=where))
                return target if stat_of(os.lstat(name, dir_fd=where)) == stat_of(seen) else None
            if not stat.S_ISREG(seen.st_mode) or seen.st_size > limit:
                return None
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=where)
        except OSError:
            return None
        try:
            data = read_fd(fd)
            after = os.fstat(fd)
        except OSError:
            return None
        finally:
            os.close(fd)
        return data if stat_of(after) == stat_of(seen) and len(data) == seen.st_size else None


def survey(dirs_of: Dirs, files: Mapping[str, object], *, never_entered: set[str], all_ignored: set[str],
           left_out: Mapping[str, list], own: Callable[[str], bool], protected: Callable[[str], bool],
           ) -> tuple[dict[str, list[str]], dict[str, os.stat_result], dict[str, Stat], dict[str, str]] | None:
    """Walk the tree as a snapshot just recorded it: (dirs, the stat data of each recorded file, watch,
    witnesses), or None when a name cannot be accounted for or the tree is too large. `files`: the snapshot's files;
    `never_entered`: directories an ignore pattern names; `all_ignored`: directories whose contents git found
    all ignored; `left_out`: ignored files left out for their size (as the commit message has them: [why,
    size, mtime]); `own`: auger's own paths (excluded: never entered); `protected`: files never recorded."""
    dirs: dict[str, list[str]] = {}
    seen: dict[str, os.stat_result] = {}
    watch: dict[str, Stat] = {}
    witness: dict[str, str] = {}
    pending = [""]
    names = 0
    while pending:
        here = pending.pop()
        try:
            listed = sorted(dirs_of.names(here))
        except OSError:
            return None
        names += len(listed)
        if names > MAX_NAMES:
            return None
        dirs[here] = listed
        ignored_here = here in all_ignored or below(here, all_ignored)
        for name in listed:
            path = f"{here}/{name}" if here else name
            if name == ".git":
                if here:
                    return None  # a repository of its own: git lists it apart
                continue  # the project's own repository: never recorded
            try:
                st = dirs_of.lstat(path)
            except OSError:
                return None
            if path in files:
                if not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
                    return None
                seen[path] = st
            elif stat.S_ISDIR(st.st_mode):
                if path in never_entered:
                    found = _a_file_in(dirs_of, path)
                    if found is None:
                        return None
                    witness[path] = found
                    watch[path] = _NEVER_ENTERED
                elif own(path):
                    watch[path] = _NEVER_ENTERED
                else:
                    pending.append(path)
            elif path in left_out:
                if stat_of(st)[1:3] != left_out[path][1:3]:
                    return None  # changed since git listed it
                watch[path] = stat_of(st)
            elif ignored_here or own(path) or protected(path):
                watch[path] = stat_of(st) if name in RULE_FILES else _NOT_A_DIRECTORY  # (one would hold new names)
            else:
                return None  # a name the snapshot did not account for
    if len(seen) != len(files) or any(d not in dirs for d in all_ignored):
        return None
    return dict(sorted(dirs.items())), seen, watch, witness


def _a_file_in(dirs_of: Dirs, top: str, budget: int = 256) -> str | None:
    """A file somewhere in the directory `top` (looking at no more than `budget` names), or None."""
    pending = [top]
    while pending and budget > 0:
        here = pending.pop()
        try:
            listed = dirs_of.names(here)
        except OSError:
            return None
        for name in listed[:budget]:
            budget -= 1
            path = f"{here}/{name}"
            try:
                is_dir = stat.S_ISDIR(dirs_of.lstat(path).st_mode)
            except OSError:
                return None
            if not is_dir:
                return path
            pending.append(path)
    return None


def look(dirs_of: Dirs, manifest: Manifest, own: Callable[[str], bool]
         ) -> tuple[dict[str, os.stat_result], set[str], set[str]] | None:
    """What may have changed since the manifest: (recorded paths whose stat data moved or is racy, with their
    stat data now; recorded paths gone; directories walked gone), or None when git must look (see the module
    docstring). `own`: auger's own paths, which may come and go (a session database's journal)."""
    gone_dirs: set[str] = set()
    gone: set[str] = set()
    for here, names in manifest.dirs.items():
        if here in gone_dirs or below(here, gone_dirs):
            continue
        try:
            now = dirs_of.names(here)  # (opened without following a link: a directory turned link fails)
        except OSError:
            return None
        if any(not own(f"{here}/{name}" if here else name) for name in set(now).difference(names)):
            return None  # a new name: git's ignore rules decide what it is
        for name in set(names).difference(now):
            path = f"{here}/{name}" if here else name
            if own(path):
                continue
            if path in manifest.files:
                gone.add(path)
            elif path in manifest.dirs:
                gone_dirs.add(path)
            else:
                return None  # a left-out path went away: git writes the new trailers
    for path in manifest.files:
        if below(path, gone_dirs):
            gone.add(path)
    if any(os.path.basename(path) in RULE_FILES for path in gone):
        return None  # what is ignored or protected changes with it
    for path in manifest.witness.values():
        try:
            if stat.S_ISDIR(dirs_of.lstat(path).st_mode):
                return None
        except OSError:
            return None  # maybe empty now: then git names it no more
    changed: dict[str, os.stat_result] = {}
    for path, (_mode, _oid, *was) in manifest.files.items():
        if path in gone:
            continue
        try:
            st = dirs_of.lstat(path)
        except OSError:
            return None
        if stat_of(st) != was or max(st.st_mtime_ns, st.st_ctime_ns) >= manifest.since:
            changed[path] = st  # (a rule file among them: the caller gives way to git if its content changed)
    for path, was in manifest.watch.items():
        if below(path, gone_dirs):
            return None
        if own(path):
            continue
        try:
            st = dirs_of.lstat(path)
        except OSError:
            return None
        if was in (_NEVER_ENTERED, _NOT_A_DIRECTORY):
            if stat.S_ISDIR(st.st_mode) != (was == _NEVER_ENTERED):
                return None
        elif stat_of(st) != was or max(st.st_mtime_ns, st.st_ctime_ns) >= manifest.since:
            return None
    return changed, gone, gone_dirs


def write_trees(gitdir: Path, files: Mapping[str, list], trees: Mapping[str, str],
                touched: Iterable[str]) -> dict[str, str]:
    """The tree ids of every directory holding files, after `touched` paths changed: those on a touched
    path written (git_objects), the others as `trees` has them. The root's is at ""."""
    affected = {""}
    for path in touched:
        parent = os.path.dirname(path)
        while parent not in affected:
            affected.add(parent)
            parent = os.path.dirname(parent)
    kids: dict[str, dict[str, tuple[str, str]]] = {d: {} for d in affected}
    for path, (mode, oid, *_) in files.items():
        parent, _, name = path.rpartition("/")
        if parent in kids:
            kids[parent][name] = (mode, oid)
        while parent:
            up, _, name = parent.rpartition("/")
            if up in kids:
                kids[up][name] = (TREE, parent)
            parent = up
    made = {d: oid for d, oid in trees.items() if d not in affected}
    for here in sorted(affected, key=lambda d: -d.count("/") - (d != "")):
        entries = []
        for name, (mode, ref) in kids[here].items():
            oid = made.get(ref) if mode == TREE else ref
            if oid is None:
                if ref not in affected:
                    raise KeyError(f"no tree id kept for {ref}")
                continue  # a directory left without files: git stores no empty tree
            key = os.fsencode(name) + (b"/" if mode == TREE else b"")
            entries.append((key, mode.encode() + b" " + os.fsencode(name) + b"\0" + bytes.fromhex(oid)))
        if entries or not here:
            made[here] = git_objects.write_object(gitdir, "tree", b"".join(e for _, e in sorted(entries)))
    return made


def below(path: str, dirs: set[str]) -> bool:
    parent = os.path.dirname(path)
    while parent:
        if parent in dirs:
            return True
        parent = os.path.dirname(parent)
    return False

