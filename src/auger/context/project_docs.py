"""Project docs: the AGENTS.md files that tell the agent how a project wants to be worked on.

Discovery is pure file reading (no git, no subprocess) and never raises: a file the user cannot read,
a binary file or a wrong encoding becomes a warning, because a broken doc must not stop a session.

Layout rule: from the repository root down to the working directory, each directory contributes at
most one file — `AGENTS.override.md` if present (a local, usually untracked, replacement), else
`AGENTS.md`, else the first of the caller's fallback names (e.g. `CLAUDE.md`). The root comes first so
that more specific, deeper instructions are read last and can refine the general ones.

The repository is not trusted: a doc in the project (`stop_at`, else `cwd`) is opened beneath a
handle on the project, and a doc in a directory above it beneath a handle on that directory with no
symlink followed, so an `AGENTS.md` that is a symlink out (to `~/.ssh/id_rsa`, say) is skipped with a
warning instead of being sent to the model — even when the project sits inside a larger repository
(a home directory kept in git) that also holds the secret. A fallback name must be a plain file name;
`../x`, `a/b` or an absolute path is refused. The user's own config dir is trusted and read as it is.

A doc may import other files with a line holding only `@path` (context/doc_imports.py), read beneath
the same handle as the doc itself (the global doc's: the user's config dir); the imports count
towards the same byte budget.

A protected file (secrets/protected.py: `.env`, keys, what `.augerignore` lists) is never read as a doc or
an import outside the user's config dir, by its name, where a symlink leads or its inode: an `AGENTS.md`
that is a link to `.env`, or an `@.env` line, would put the secret in the model's first request.
"""

from __future__ import annotations

import errno
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from auger.context.doc_imports import ImportMissing, ImportRefused, expand_imports
from auger.policy.fs import RootHandle, read_beneath
from auger.secrets.protected import ProtectedFiles
from auger.secrets.settings import SecretsSettings

OVERRIDE_NAME = "AGENTS.override.md"
DOC_NAME = "AGENTS.md"
DEFAULT_MAX_BYTES = 32768


@dataclass
class ProjectDocs:
    """The concatenated docs, the files they came from (root first), the files they imported, and what
    went wrong reading them."""

    text: str = ""
    sources: list[Path] = field(default_factory=list)
    imports: list[Path] = field(default_factory=list)
    truncated: bool = False
    warnings: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.text)


def find_repo_root(cwd: Path, stop_at: Path | None = None) -> Path | None:
    """The nearest directory at or above `cwd` holding `.git` (a directory, or a file in worktrees and
    submodules); None if there is none. With `stop_at`, directories above it are not looked at, so a
    caller can keep discovery inside a known project even when it sits in someone else's repository."""
    cwd = _absolute(cwd)
    stop = _absolute(stop_at) if stop_at is not None else None
    for directory in (cwd, *cwd.parents):
        if _exists(directory / ".git"):
            return directory
        if stop is not None and directory == stop:
            break
    return None


def discover_project_docs(cwd: Path, *, fallback_names: Sequence[str] = (), max_bytes: int = DEFAULT_MAX_BYTES,
                          stop_at: Path | None = None, project: Path | None = None,
                          secrets: SecretsSettings | None = None) -> ProjectDocs:
    """Collect the project docs that apply in `cwd`, root first, capped at `max_bytes` of doc content.

    The root is the repository root (the first directory with `.git` walking up); without one it is
    `stop_at` when `cwd` lies inside it, else `cwd` alone — outside a repository there is no way to know
    which parent directories belong to the project, and reading a stray `~/AGENTS.md` would surprise.
    `project` (default: `stop_at`, else `cwd`) is the directory whose handle docs inside it are read
    beneath: a session working in a subdirectory still reads its project's docs as the project's.
    `secrets`: the configuration's `[secrets]` (default: auger's defaults), whose protected files are not read.
    """
    cwd = _absolute(cwd)
    warnings: list[str] = []
    stop = _absolute(stop_at) if stop_at is not None else None
    if stop is not None and not _is_within(cwd, stop):
        warnings.append(f"{cwd} is not inside {stop}; looking for project docs in {cwd} only")
        stop = None
    root = find_repo_root(cwd, stop) or stop or cwd
    names = [OVERRIDE_NAME, DOC_NAME]
    for name in fallback_names:
        if not plain_file_name(name):
            warnings.append(f"project_doc_fallback_filenames: {name!r} is not a plain file name "
                            "(no '/', '..' or absolute path); ignored")
        elif name not in names:
            names.append(name)
    if project is not None and _is_within(cwd, _absolute(project)):
        project = _absolute(project)
        if _is_within(root, project):
            root = project  # a repository nested in the project (cwd in it): the project's own docs apply too
    else:
        project = stop if stop is not None else cwd
    files: list[_Doc] = []
    imports: list[Path] = []
    for directory in _chain(root, cwd):
        inside = _is_within(directory, project)
        try:
            handle = RootHandle(project if inside else directory)
        except OSError as exc:
            warnings.append(f"{directory}: cannot open ({exc.strerror or exc}); its docs are skipped")
            continue
        try:
            guard = ProtectedFiles(handle.path, secrets)
            found = _first_doc(handle, directory.relative_to(handle.path).as_posix(), names, warnings, follow=inside,
                               guard=guard)
            if found is not None:
                text = _with_imports(found[0], _read_doc(found[0], found[1], warnings), handle, max_bytes,
                                     follow=inside, root_name="the project", warnings=warnings, imported=imports,
                                     guard=guard)
                files.append((found[0], found[0].relative_to(root).as_posix(), text))
        finally:
            handle.close()
    docs = _concatenate(files, max_bytes)
    docs.imports = imports
    docs.warnings[:0] = warnings
    return docs


def file_docs(root: Path, rel: str, label: str, max_bytes: int = DEFAULT_MAX_BYTES) -> ProjectDocs:
    """One more instruction file inside the project (the memory file, `.auger/memory.md`), read beneath
    the project's handle as its docs are, imports included; empty when there is no such file."""
    root = _absolute(root)
    warnings: list[str] = []
    imports: list[Path] = []
    rel_dir, _, name = rel.rpartition("/")
    try:
        handle = RootHandle(root)
    except OSError as exc:
        return ProjectDocs(warnings=[f"{root}: cannot open ({exc.strerror or exc}); {rel} is not read"])
    try:
        guard = ProtectedFiles(handle.path)
        found = _first_doc(handle, rel_dir or ".", [name], warnings, follow=True, guard=guard)
        text = None if found is None else _with_imports(
            found[0], _read_doc(found[0], found[1], warnings), handle, max_bytes, follow=True,
            root_name="the project", warnings=warnings, imported=imports, guard=guard)
    finally:
        handle.close()
    docs = _concatenate([(root / rel, label, text)], max_bytes)
    docs.imports = imports
    docs.warnings[:0] = warnings
    return docs


def doc_path(directory: Path, fallback_names: Sequence[str] = ()) -> Path:
    """The doc a directory contributes, by the layout rule (the override, AGENTS.md, a fallback name);
    `AGENTS.md` when it has none yet — where a new line of instructions for that directory goes."""
    directory = _absolute(directory)
    for name in (OVERRIDE_NAME, DOC_NAME, *(n for n in fallback_names if plain_file_name(n))):
        if _is_file(directory / name):
            return directory / name
    return directory / DOC_NAME


def plain_file_name(name: object) -> bool:
    """A name that can only mean a file in the directory it is looked up in."""
    return (isinstance(name, str) and name not in ("", ".", "..") and "/" not in name and "\\" not in name
            and "\0" not in name)


def _first_doc(handle: RootHandle, rel_dir: str, names: list[str], warnings: list[str],
               *, follow: bool, guard: ProtectedFiles | None = None) -> tuple[Path, bytes | OSError] | None:
    """The first of `names` in the directory that is a regular file beneath the handle, read at once
    (so what was checked is what is read); a name leading out is skipped with a warning. With
    `follow=False` no symlink is followed at all. With `guard`, a protected file is skipped with a warning."""
    for name in names:
        rel = name if rel_dir == "." else f"{rel_dir}/{name}"
        try:
            if guard is not None and guard.beneath(handle, rel, follow=follow):
                warnings.append(f"{handle.path / rel}: a protected file (a secret the agent may not read); skipped")
                continue
            return handle.path / rel, read_beneath(handle, rel, follow=follow)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            continue
        except ValueError:  # PathEscape
            warnings.append(f"{handle.path / rel}: a symlink out of the project; skipped")
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                warnings.append(f"{handle.path / rel}: a symlink (loop, or above the project); skipped")
            elif exc.errno != errno.EINVAL:  # EINVAL: a FIFO or device, never a doc
                return handle.path / rel, exc
    return None


def global_doc_path(config_dir: Path) -> Path:
    """The user's global instructions file in force: `AGENTS.override.md` if there is one, else
    `AGENTS.md` (which need not exist yet: it is where new global instructions go)."""
    config_dir = _absolute(config_dir)
    override = config_dir / OVERRIDE_NAME
    return override if _is_file(override) else config_dir / DOC_NAME


def global_docs(config_dir: Path, max_bytes: int = DEFAULT_MAX_BYTES) -> ProjectDocs:
    """The user's own instructions for every project: `AGENTS.override.md` else `AGENTS.md` in the
    config dir. Its header names the full path, so it is never mistaken for the project's AGENTS.md.
    Its imports are read beneath the config dir."""
    path = global_doc_path(config_dir)
    if not _is_file(path):
        return ProjectDocs()
    warnings: list[str] = []
    imports: list[Path] = []
    try:
        data: bytes | OSError = path.read_bytes()
    except OSError as exc:
        data = exc
    text = _read_doc(path, data, warnings)
    try:
        handle = RootHandle(path.parent)
    except OSError as exc:
        warnings.append(f"{path.parent}: cannot open ({exc.strerror or exc}); imports are not read")
    else:
        try:
            text = _with_imports(path, text, handle, max_bytes, follow=True, root_name="your config directory",
                                 warnings=warnings, imported=imports)
        finally:
            handle.close()
    docs = _concatenate([(path, str(path), text)], max_bytes)
    docs.imports = imports
    docs.warnings[:0] = warnings
    return docs


def user_instructions(*docs: ProjectDocs) -> str | None:
    """The first context message of a session: the global docs, the project docs (and the project's
    memory file), in one tagged block. None when there is nothing to say, so the engine sends no empty
    message."""
    parts = [d.text for d in docs if d.text]
    if not parts:
        return None
    return "<user_instructions>\n" + "\n\n".join(parts) + "\n</user_instructions>"


# --- internals ---------------------------------------------------------------------------------------


_Doc = tuple[Path, str, str | None]  # (path, label, text: None when it could not be read)


def _with_imports(path: Path, text: str | None, handle: RootHandle, max_bytes: int, *, follow: bool,
                  root_name: str, warnings: list[str], imported: list[Path],
                  guard: ProtectedFiles | None = None) -> str | None:
    """The doc's text with its `@path` imports expanded, each read beneath `handle` as the doc was (a protected
    file, with `guard`, refused)."""
    if text is None:
        return None

    def read(rel: str) -> str:
        if guard is not None and guard.beneath(handle, rel, follow=follow):
            raise ImportRefused("a protected file (a secret the agent may not read)")
        try:
            data = read_beneath(handle, rel, limit=max(0, max_bytes), follow=follow)
        except ValueError:  # PathEscape
            raise ImportRefused(f"a symlink out of {root_name}") from None
        except FileNotFoundError:
            raise ImportMissing("no such file") from None
        except OSError as exc:
            why = {errno.ELOOP: f"a symlink (loop, or out of {root_name})", errno.EISDIR: "a directory",
                   errno.EINVAL: "not a regular file",
                   errno.EFBIG: f"larger than project_doc_max_bytes ({max_bytes})"}.get(exc.errno or 0)
            raise ImportRefused(why or f"cannot read it ({exc.strerror or exc})") from None
        if b"\0" in data:
            raise ImportRefused("a binary file")
        return data.decode("utf-8", errors="replace")

    expansion = expand_imports(text, path.relative_to(handle.path).as_posix(), read, max_bytes=max_bytes,
                               root_name=root_name)
    warnings.extend(f"{handle.path}/{note}" for note in expansion.notes)
    imported.extend(handle.path / rel for rel in expansion.imported)
    return expansion.text


def _concatenate(files: list[_Doc], max_bytes: int) -> ProjectDocs:
    """Join `(path, label, text)` files into one text under a byte budget for the docs' own content
    (headers and the truncation note are not counted: they are a few bytes and the user cannot
    shorten them)."""
    docs = ProjectDocs()
    parts: list[str] = []
    budget = max(0, max_bytes)
    for index, (path, label, text) in enumerate(files):
        if text is None or not text.strip():
            continue  # empty or unreadable: nothing to head with a comment
        data = text.strip("\n").encode("utf-8")
        if len(data) <= budget:
            parts.append(f"<!-- {label} -->\n{data.decode('utf-8')}")
            docs.sources.append(path)
            budget -= len(data)
            continue
        kept = _cut_utf8(data, budget)
        left_out = len(data) - len(kept)
        later = len(files) - index - 1
        more = f" and {later} more file{'s' if later != 1 else ''}" if later else ""
        note = (f"[truncated: project docs are limited to {max_bytes} bytes; "
                f"{left_out} bytes of {label}{more} left out]")
        if kept.strip():
            parts.append(f"<!-- {label} -->\n{kept.decode('utf-8')}\n{note}")
            docs.sources.append(path)
        else:
            parts.append(note)
        docs.truncated = True
        docs.warnings.append(f"{path}: project docs exceed {max_bytes} bytes; cut in this file, "
                             f"{left_out} bytes{more} left out")
        break
    docs.text = "\n\n".join(parts)
    return docs


def _read_doc(path: Path, data: bytes | OSError, warnings: list[str]) -> str | None:
    """The file's text, decoded leniently: a mis-encoded doc still carries useful instructions."""
    if isinstance(data, OSError):
        warnings.append(f"{path}: cannot read ({data.strerror or data}); skipped")
        return None
    if b"\0" in data:
        warnings.append(f"{path}: looks like a binary file (contains NUL bytes); skipped")
        return None
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        warnings.append(f"{path}: not valid UTF-8 (byte {exc.start}); undecodable bytes replaced with U+FFFD")
        return data.decode("utf-8", errors="replace")


def _cut_utf8(data: bytes, limit: int) -> bytes:
    """The longest prefix of at most `limit` bytes that does not split a character."""
    if limit >= len(data):
        return data
    end = limit
    while end > 0 and (data[end] & 0xC0) == 0x80:  # data[end] continues the character before the cut
        end -= 1
    return data[:end]


def _chain(root: Path, cwd: Path) -> list[Path]:
    """Directories from `root` down to `cwd`, both included (just `cwd` if it is not under `root`)."""
    if not _is_within(cwd, root):
        return [cwd]
    chain = [cwd, *[p for p in cwd.parents if _is_within(p, root)]]
    return chain[::-1]


def _absolute(path: Path) -> Path:
    """Symlinks resolved, so the walk up follows the real tree (as git does) and paths compare equal."""
    try:
        return Path(path).expanduser().resolve()
    except (OSError, RuntimeError):
        return Path(path).expanduser().absolute()


def _is_within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except OSError:
        return False


def _is_file(path: Path) -> bool:
    """A regular file (after symlinks): never a FIFO or device whose read could block or never end."""
    try:
        return path.is_file()
    except OSError:
        return False
