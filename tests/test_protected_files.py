"""Protected files (secrets/protected.py): which paths the patterns protect and why, `.augerignore` (a project only
adds, and a line once read stays for the session), the bounded scan (bulk directories last), hard links and
renames by inode; snapshots never record one and undo never touches one; Landlock's split keeps a writable
directory writable; `auger secrets check`, its JSON and the git history it warns about."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path

import pytest

from auger.changes.diff import changes, unified_diff
from auger.changes.snapshots import SnapshotStore, snapshot_dir
from auger.changes.undo import undo
from auger.policy import landlock
from auger.secrets.protected import ProtectedFiles, normalized
from auger.secrets.settings import SecretsSettings, _merge
from tests.support.harness import auger_cli
from tests.support.planted_secrets import git_project, plant

DEFAULTS = {
    ".env": True, "sub/dir/.env": True, ".env.local": True, ".env.production": True, ".ENV": True,
    ".env.example": False, "a/.env.sample": False, ".env.template": False, ".envrc": False, "env.txt": False,
    "server.pem": True, "x/y.KEY": True, "cert.p12": True, "c.pfx": True, "id_rsa": True, "id_rsa.pub": True,
    "keys/id_ed25519": True, ".netrc": True, ".pypirc": True, "web/.npmrc": True, "terraform.tfstate": True,
    "terraform.tfstate.backup": True, "credentials.json": True, "gcp/credentials-prod.json": True,
    ".git-credentials": True, "creds.json": False, "README.md": False, "keyboard.py": False, "src/main.py": False,
}


@pytest.mark.parametrize("path", DEFAULTS)
def test_the_defaults_protect_what_a_user_expects(tmp_path, path):
    assert (ProtectedFiles(tmp_path).why(path) is not None) == DEFAULTS[path]


def test_patterns_read_as_gitignore_does_later_ones_win_and_a_directory_covers_what_it_holds(tmp_path):
    settings = _merge({"files": ["config/prod/*", "vault/", "**/deploy/*.yml", "!.env.local", "data/[ab]?.csv"],
                       "allow": [".env.test"]}, {"files": ["*.kdbx"]})
    protected = ProtectedFiles(tmp_path, settings)
    assert protected.why(".env.local") is None  # the user's `!` unprotects a default
    assert protected.why(".env.test") is None and protected.allowed(".env.test") == ".env.test"
    assert protected.why("config/prod/db.yml").pattern == "config/prod/*"
    assert protected.why("x/config/prod/db.yml") is None  # anchored: a '/' in the middle ties it to the root
    reason = protected.why("vault/deep/inner.txt")
    assert reason.pattern == "vault/" and reason.matched == "vault" and "covers its directory vault/" in reason.describe()
    assert protected.why("vault", is_dir=False) is None  # `vault/` names directories only
    assert protected.why("a/b/deploy/app.yml").source == "user config"
    assert protected.why("data/a1.csv") is not None and protected.why("data/c1.csv") is None
    assert protected.why("home/pw.KDBX").source == "project config"
    assert protected.why("sub/../.env").path == ".env" and normalized("./a//b/") == "a/b"


def test_a_project_only_adds_its_negations_are_ignored_and_said(tmp_path):
    settings = _merge({}, {"files": ["!.env", "secrets/"], "allow": [".env"], "redact": False})
    assert "!.env" not in settings.files and "secrets/" in settings.files
    assert any("'!.env' ignored" in p for p in settings.diagnostics)
    assert any("'allow' ignored" in p for p in settings.diagnostics)
    (tmp_path / ".augerignore").write_text("private/\n!id_rsa\n\\!literal\n")
    protected = ProtectedFiles(tmp_path, settings)
    assert protected.why("id_rsa") is not None and protected.why("private/x").source == ".augerignore"
    assert protected.why("!literal") is not None  # an escaped `!` is a name, not a negation
    assert any("'!id_rsa' ignored" in p for p in protected.diagnostics)


def test_an_augerignore_line_stays_in_force_for_the_session_once_read(tmp_path):
    ignore = tmp_path / ".augerignore"
    ignore.write_text("notes/private.md\n")
    protected = ProtectedFiles(tmp_path)
    assert protected.why("notes/private.md") is not None
    ignore.write_text("other.txt\n")  # a command rewrites it to unprotect the file
    assert protected.why("notes/private.md") is not None and protected.why("other.txt") is not None
    ignore.unlink()
    assert protected.why("notes/private.md") is not None
    assert ProtectedFiles(tmp_path).why("notes/private.md") is None  # the next session reads the file as it is


def test_a_scan_finds_links_and_renames_by_inode_and_walks_bulk_directories_last(tmp_path):
    plant(tmp_path)
    (tmp_path / "node_modules" / "pkg").mkdir(parents=True)
    (tmp_path / "node_modules" / "pkg" / ".env").write_text("x")
    (tmp_path / "zz").mkdir()
    (tmp_path / "zz" / "server.key").write_text("k")
    protected = ProtectedFiles(tmp_path)
    scan = protected.scan()
    assert {".env", "id_rsa", "secrets/prod.pem", "config/private.yml", "backup.txt", "zz/server.key",
            "node_modules/pkg/.env"} <= set(scan.paths) and scan.complete
    assert "notes.md" not in scan.paths  # a symlink to .env: commands reach the covered .env through it
    # a bound: the shallow directories are seen before the bulk ones
    small = ProtectedFiles(tmp_path, scan_limit=len(os.listdir(tmp_path)) + 3).scan()
    assert not small.complete and "zz/server.key" in small.paths and "node_modules/pkg/.env" not in small.paths
    os.rename(tmp_path / ".env", tmp_path / "renamed.txt")
    again = protected.look_again()
    assert "renamed.txt" in again.paths and ".env" not in again.paths
    assert protected.check("renamed.txt", os.stat(tmp_path / "renamed.txt")).same_as == ".env"
    (tmp_path / ".env.new").write_text("y")
    assert ".env.new" in protected.look_again().paths


def _store(tmp_path: Path, root: Path, protected: ProtectedFiles) -> SnapshotStore:
    return SnapshotStore(root, snapshot_dir(tmp_path / "data", root), protected=protected)


def _blobs(store: SnapshotStore) -> bytes:
    return subprocess.run(["git", "--git-dir", str(store.snapdir), "cat-file", "--batch-all-objects", "--batch"],
                          capture_output=True).stdout


def test_snapshots_never_record_a_protected_file_and_undo_neither_restores_nor_removes_one(tmp_path):
    root = tmp_path / "proj"
    root.mkdir()
    (root / "a.txt").write_text("one\n")
    (root / ".env").write_text("OLD-SECRET\n")
    (root / "key.pem").write_text("PEM-SECRET\n")
    unprotected = _store(tmp_path, root, ProtectedFiles(root, SecretsSettings(files=(), file_sources=())))
    old = asyncio.run(unprotected.snapshot())  # as an earlier version of auger recorded it
    assert ".env" in asyncio.run(unprotected.entries(old))
    store = _store(tmp_path, root, ProtectedFiles(root))
    before = asyncio.run(store.snapshot())
    assert not {".env", "key.pem"} & set(asyncio.run(store.entries(before)))  # dropped from the index
    (root / "a.txt").write_text("two\n")
    (root / ".env").write_text("NEW-SECRET\n")
    (root / "fresh.key").write_text("FRESH-SECRET\n")
    after = asyncio.run(store.snapshot())
    assert b"NEW-SECRET" not in _blobs(store) and b"FRESH-SECRET" not in _blobs(store)
    assert [c.path for c in asyncio.run(changes(store, old, after))] == ["a.txt"]
    assert "SECRET" not in asyncio.run(unified_diff(store, old, after))
    result = asyncio.run(undo(store, old, after, force=True))  # back to the snapshot that held .env
    assert (root / "a.txt").read_text() == "one\n"
    assert (root / ".env").read_text() == "NEW-SECRET\n" and (root / "fresh.key").exists()
    assert ".env" not in result.written + result.removed


def test_an_index_cleared_by_the_same_rules_is_not_listed_again_and_one_another_rule_set_filled_is(tmp_path,
                                                                                                     monkeypatch):
    """Each process's first snapshot used to list the whole index to clear it of protected paths; now only when
    the rules differ from those it was last cleared by. A session allowed to record `.env` (other rules) leaves
    it in the index: the next snapshot by the usual rules, in a new process or one already running, clears it."""
    import auger.changes.snapshots as snapshots

    listed_whole: list[int] = []
    git = SnapshotStore.git

    async def counted(self, *args, **kwargs):
        if args[:3] == ("ls-files", "-z", "-c") and len(args) == 3:
            listed_whole.append(1)
        return await git(self, *args, **kwargs)

    monkeypatch.setattr(snapshots.SnapshotStore, "git", counted)
    root = tmp_path / "proj"
    root.mkdir()
    (root / "a.txt").write_text("one\n")
    (root / ".env").write_text("SECRET\n")
    running = _store(tmp_path, root, ProtectedFiles(root))
    asyncio.run(running.snapshot())
    (root / "a.txt").write_text("two\n")
    asyncio.run(_store(tmp_path, root, ProtectedFiles(root)).snapshot())  # a new process, the same rules
    assert listed_whole == []
    allowing = _store(tmp_path, root, ProtectedFiles(root, SecretsSettings(allow=(".env",))))
    with_env = asyncio.run(allowing.snapshot())
    assert ".env" in asyncio.run(allowing.entries(with_env))
    (root / "a.txt").write_text("three\n")
    after = asyncio.run(running.snapshot())  # the process that cleared it before
    assert ".env" not in asyncio.run(running.entries(after)) and listed_whole == [1, 1]
    assert ".env" not in asyncio.run(_store(tmp_path, root, ProtectedFiles(root)).entries(after))
    (root / "a.txt").write_text("four\n")
    asyncio.run(_store(tmp_path, root, ProtectedFiles(root)).snapshot())
    assert listed_whole == [1, 1]


def test_landlock_keeps_a_split_writable_directory_writable_but_not_readable(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b.txt").write_text("b")
    (tmp_path / ".env").write_text("s")
    rules = dict(landlock.plan([str(tmp_path)], [str(tmp_path / ".env")], ro_all=False))
    assert rules[str(tmp_path)] == "w"  # new entries can be made there; before this it was "ls" (read-only)
    assert rules[str(tmp_path / "a")] == "rw" and rules[str(tmp_path / "b.txt")] == "rw"
    assert str(tmp_path / ".env") not in rules


def test_secrets_check_lists_what_is_protected_and_why_and_warns_about_git_history(project, isolated_home):
    plant(project)
    git_project(project, "HISTORY-SECRET")
    (isolated_home / "config.toml").write_text('[secrets]\nallow = [".env.test"]\nfiles = ["*.kdbx"]\n')
    out = auger_cli("secrets", "check", home=isolated_home, cwd=project)
    assert out.returncode == 1, out.stderr  # git's history holds a protected file
    text = out.stdout
    assert ".env  " in text and "'.env' (default)" in text and "secrets/prod.pem" in text
    assert "backup.txt" in text and "the same file as .env" in text
    assert "'config/private.yml' (.augerignore)" in text and "'!.env' ignored" in text
    assert ".env.test  ('.env.test')" in text and "user config: *.kdbx" in text
    assert "old/.env  (in earlier commits; git show" in text
    assert "PLANTED" not in text and "HISTORY-SECRET" not in text  # names and patterns, never a value
    report = json.loads(auger_cli("secrets", "check", "--json", "-c", "sandbox=landlock", home=isolated_home,
                                  cwd=project).stdout)
    assert {p["path"] for p in report["protected"]} >= {".env", "id_rsa", "secrets/prod.pem", "config/private.yml",
                                                         "backup.txt", ".env.local"}
    assert report["allowed"] == [{"path": ".env.test", "pattern": ".env.test"}]
    assert report["committed"] == [{"path": "old/.env", "tracked": False, "commit": report["committed"][0]["commit"]}]
    assert report["sandbox"]["kind"] == "landlock" and any("names stay visible" in x for x in report["sandbox"]["limits"])
    clean = project.parent / "clean"
    clean.mkdir()
    quiet = auger_cli("secrets", "check", "-C", str(clean), home=isolated_home)
    assert quiet.returncode == 0 and "(nothing)" in quiet.stdout
