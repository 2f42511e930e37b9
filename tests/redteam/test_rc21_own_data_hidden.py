"""auger's own files are hidden from commands: another project's conversations in sessions.db, a token
in config.toml, another project's deleted key file in the snapshot store, the cache, and a session
database kept elsewhere (`--db`) with its -wal file — in the platformdirs layout and under AUGER_HOME.
What a session's commands need in there stays: the user's skills, and a worktree session's own tree
and the objects it borrows. Judged by the secret's bytes in what the model reads, with controls."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from auger.changes.worktree import create_worktree
from auger.config import home_dirs
from tests.support.harness import run_session
from tests.support.mock_openai import MockChatServer, Reply, ToolCall
from tests.support.redteam_sandbox import KINDS, shell

SECRET = "rc21-OWN-DATA-SECRET"
LAYOUTS = ("platformdirs", "auger-home")


@pytest.fixture
def user_home(tmp_path: Path, monkeypatch) -> Path:
    """A home directory of the user's (bwrap shows a home even when it lies under the temp dir)."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "AUGER_HOME"):
        monkeypatch.delenv(name, raising=False)
    return home


def _layout(name: str, home: Path, monkeypatch) -> dict[str, Path]:
    if name == "auger-home":
        monkeypatch.setenv("AUGER_HOME", str(home / ".auger"))
    dirs = home_dirs()
    assert all(home in path.parents for path in dirs.values()), dirs
    return dirs


def _other_project_session(tmp_path: Path, db: Path, *overrides: str) -> None:
    """Another project's session: its conversation holds the secret, and it deletes a file holding it (which the
    snapshot taken before the change keeps)."""
    other = tmp_path / "other"
    other.mkdir()
    (other / "deploy-notes.txt").write_text(SECRET + "\n")
    with MockChatServer() as server:
        server.add(Reply(tool_calls=[ToolCall("shell", {"command": "rm deploy-notes.txt"})]), Reply(text="done"))
        run_session(other, server, f"the deploy password is {SECRET}; delete deploy-notes.txt", db=db,
                    overrides=("sandbox=off", "mode=auto", "approve_all=true", *overrides))
    assert not (other / "deploy-notes.txt").exists()


def _attacks(dirs: dict[str, Path]) -> list[str]:
    data = dirs["data"]
    return [f"cat {dirs['config']}/config.toml",
            f"grep -a -o -h {SECRET} {data}/sessions.db {data}/sessions.db-wal",
            f"for d in {data}/snapshots/*; do git --git-dir=\"$d\" cat-file --batch-all-objects --batch; done "
            f"| grep -a -o {SECRET}",
            f"grep -r -a -o -h {SECRET} {dirs['cache']}"]


@pytest.mark.parametrize("kind", [*KINDS, "off"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_auger_own_files_are_not_readable(tmp_path, project, server, user_home, monkeypatch, kind, layout):
    dirs = _layout(layout, user_home, monkeypatch)
    db = dirs["data"] / "sessions.db"
    _other_project_session(tmp_path, db)
    dirs["config"].mkdir(parents=True, exist_ok=True)
    (dirs["config"] / "config.toml").write_text(f'[mcp_servers.tracker]\nurl = "https://x"\nbearer_token = "{SECRET}"\n')
    dirs["cache"].mkdir(parents=True, exist_ok=True)
    (dirs["cache"] / "titles.json").write_text(f'{{"title": "{SECRET}"}}\n')
    # redaction off: the sandbox alone is on trial here (redaction would also hide the token's value)
    outs = shell(project, server, kind, *_attacks(dirs), db=db, tables={"secrets": {"redact": False}})
    leaked = [out for out in outs if SECRET in out]
    if kind == "off":  # control: every payload finds the secret when nothing hides it
        assert len(leaked) == len(outs), outs
    else:
        assert not leaked, leaked


@pytest.mark.parametrize("kind", [*KINDS, "off"])
def test_a_session_database_elsewhere_is_not_readable(tmp_path, project, server, user_home, kind):
    db = user_home / "dbs" / "auger.db"
    db.parent.mkdir()
    _other_project_session(tmp_path, db, f"db_path={db}")
    outs = shell(project, server, kind, f"cat {db} {db}-wal {db}-shm 2>/dev/null | grep -a -o {SECRET}",
                 db=db, overrides=(f"db_path={db}",))
    assert (SECRET in outs[0]) == (kind == "off"), outs[0]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_what_commands_need_stays_reachable(project, server, user_home, monkeypatch, kind, layout):
    """The user's skills (their scripts are meant to run) and the scratch dir."""
    dirs = _layout(layout, user_home, monkeypatch)
    skill = dirs["config"] / "skills" / "release"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: release\ndescription: cut a release\n---\nrun notes.sh\n")
    (skill / "notes.sh").write_text("echo release-notes-ok\n")
    outs = shell(project, server, kind, f"sh {skill}/notes.sh",
                 "echo scratch > $TMPDIR/rc21-scratch && cat $TMPDIR/rc21-scratch",
                 f"ls {dirs['data']} 2>&1; cat {dirs['config']}/config.toml 2>&1 | head -1")
    assert "release-notes-ok" in outs[0], outs[0]
    assert outs[1].startswith("Exit code: 0") and "scratch" in outs[1], outs[1]
    assert "sessions.db" not in outs[2], outs[2]


@pytest.mark.parametrize("kind", KINDS)
def test_a_session_in_a_worktree_under_the_data_dir_works(server, user_home, kind):
    """The session's tree lies inside the hidden data dir: it stays writable, and git there reads the
    commits it borrows from the project's repository and from auger's snapshot store."""
    project = user_home / "main"
    project.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    (project / "a.txt").write_text("one\n")
    subprocess.run(["git", "add", "a.txt"], cwd=project, check=True)
    subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "-m", "one"], cwd=project,
                   check=True)
    (project / "a.txt").write_text("two\n")  # uncommitted: the worktree starts from a snapshot
    worktree = create_worktree(project, base="snapshot", name="rc21")
    assert home_dirs()["data"] in worktree.path.parents
    outs = shell(worktree.path, server, kind, "git log --oneline | wc -l && git status --short && cat a.txt",
                 "echo three > a.txt && cat a.txt")
    assert outs[0].startswith("Exit code: 0") and "two" in outs[0] and "M a.txt" in outs[0], outs[0]
    assert outs[1].startswith("Exit code: 0") and (worktree.path / "a.txt").read_text() == "three\n", outs[1]
