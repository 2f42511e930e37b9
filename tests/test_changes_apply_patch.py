"""apply_patch on real files in temporary directories: grammar, tolerant matching, atomicity, hostile paths."""

from __future__ import annotations

import difflib
import hashlib
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from auger.changes.apply_patch import PatchError, apply_patch, extract_from_shell, parse_patch
from auger.policy.fs import RootHandle


def tree_state(root: Path) -> dict[str, tuple[str, int]]:
    """Every path beneath root (but .git) with a hash of its bytes and its mode."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in filenames + dirnames:
            p = Path(dirpath, name)
            st = p.lstat()
            digest = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() and not p.is_symlink() else "dir"
            out[str(p.relative_to(root))] = (digest, st.st_mode)
    return out


def patch(*body: str) -> str:
    return "\n".join(["*** Begin Patch", *body, "*** End Patch"]) + "\n"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path


def run(root: Path, text: str):
    handle = RootHandle(root)
    try:
        return apply_patch(handle, text)
    finally:
        handle.close()


def test_add_update_delete_move(root: Path) -> None:
    (root / "a.py").write_text("one\ntwo\nthree\n")
    (root / "gone.txt").write_text("bye\n")
    (root / "old.py").write_text("x = 1\ny = 2\n")
    result = run(root, patch(
        "*** Add File: pkg/new.py", "+print('hi')", "+",
        "*** Update File: a.py", "@@", " one", "-two", "+TWO", " three",
        "*** Delete File: gone.txt",
        "*** Update File: old.py", "*** Move to: moved/new.py", "@@", " x = 1", "-y = 2", "+y = 3",
    ))
    assert (root / "pkg/new.py").read_text() == "print('hi')\n\n"
    assert (root / "a.py").read_text() == "one\nTWO\nthree\n"
    assert not (root / "gone.txt").exists() and not (root / "old.py").exists()
    assert (root / "moved/new.py").read_text() == "x = 1\ny = 3\n"
    assert result.summary().splitlines() == ["A pkg/new.py", "M a.py", "R old.py -> moved/new.py", "D gone.txt"]


def test_context_header_and_end_of_file(root: Path) -> None:
    (root / "f.py").write_text("def a():\n    return 1\n\ndef b():\n    return 1\n")
    run(root, patch("*** Update File: f.py", "@@ def b():", "-    return 1", "+    return 2"))
    assert (root / "f.py").read_text() == "def a():\n    return 1\n\ndef b():\n    return 2\n"
    (root / "g.txt").write_text("x\ny\nx\n")
    run(root, patch("*** Update File: g.txt", "@@", "-x", "+z", "*** End of File"))
    assert (root / "g.txt").read_text() == "x\ny\nz\n"


def test_tolerant_matching_in_steps(root: Path) -> None:
    (root / "t.py").write_text("a = 1   \n    b = 'x \u2014 y'\nc = 3\n")
    run(root, patch("*** Update File: t.py", "@@", " a = 1", "-b = 'x - y'", "+b = 2", " c = 3"))
    assert (root / "t.py").read_text() == "a = 1   \nb = 2\nc = 3\n"


def test_crlf_and_mode_are_kept(root: Path) -> None:
    f = root / "run.sh"
    f.write_bytes(b"#!/bin/sh\r\necho a\r\necho b\r\n")
    f.chmod(0o751)
    run(root, patch("*** Update File: run.sh", "@@", " #!/bin/sh", "-echo a", "+echo A", " echo b"))
    assert f.read_bytes() == b"#!/bin/sh\r\necho A\r\necho b\r\n"
    assert f.stat().st_mode & 0o7777 == 0o751


def test_failed_hunk_changes_nothing_and_shows_nearest_match(root: Path) -> None:
    (root / "a.txt").write_text("keep\n")
    (root / "b.txt").write_text("alpha\nbeta\ngamma\ndelta\n")
    before = tree_state(root)
    with pytest.raises(PatchError) as info:
        run(root, patch("*** Update File: a.txt", "@@", "-keep", "+changed",
                        "*** Add File: c.txt", "+new",
                        "*** Update File: b.txt", "@@", " beta", "-gamma", "+G", " epsilon"))
    message = str(info.value)
    assert "b.txt: hunk 1" in message
    assert "best partial match at line 2 (2 of 3 lines match)" in message
    assert "'epsilon'" in message and "'delta'" in message
    assert tree_state(root) == before


@pytest.mark.parametrize("path, why", [
    ("../outside.txt", "outside the project root"),
    ("/etc/passwd", "absolute"),
    (".git/config", "git directory"),
    ("sub/../../x", "outside the project root"),
    ("link/evil.txt", "outside the project root"),
])
def test_hostile_paths_are_refused(root: Path, path: str, why: str) -> None:
    (root / ".git").mkdir()
    (root / ".git/config").write_text("[core]\n")
    (root / "link").symlink_to(root.parent)
    before = tree_state(root)
    with pytest.raises(PatchError, match=why):
        run(root, patch("*** Add File: ok.txt", "+fine", f"*** Add File: {path}", "+bad"))
    assert tree_state(root) == before
    assert not (root.parent / "outside.txt").exists() and not (root.parent / "evil.txt").exists()


@pytest.mark.parametrize("text, message", [
    ("*** Update File: a\n@@\n-x\n", "must start with"),
    ("*** Begin Patch\n*** Update File: a\n@@\n-x\n", "must end with"),
    (patch("*** Frobnicate: a"), "is not a file header"),
    (patch("*** Update File: a", "@@", "junk"), "is not a hunk line"),
    (patch("*** Update File: a"), "has no hunks"),
    (patch(), "changes no files"),
])
def test_malformed_patches(text: str, message: str) -> None:
    with pytest.raises(PatchError, match=message):
        parse_patch(text)


def test_missing_files(root: Path) -> None:
    with pytest.raises(PatchError, match="cannot update nope.txt: it does not exist"):
        run(root, patch("*** Update File: nope.txt", "@@", "-a", "+b"))
    with pytest.raises(PatchError, match="cannot delete nope.txt"):
        run(root, patch("*** Delete File: nope.txt"))


def test_extract_from_shell() -> None:
    body = patch("*** Add File: x", "+y")
    assert extract_from_shell(f"apply_patch <<'EOF'\n{body}EOF\n").patch == body
    assert extract_from_shell(f'apply_patch <<"PATCH"\n{body}PATCH').patch == body
    got = extract_from_shell(f"cd 'sub dir' && apply_patch <<EOF\n{body}EOF")
    assert got.patch == body and got.workdir == "sub dir"
    assert extract_from_shell(f"apply_patch '{body}'").patch == body
    assert extract_from_shell(["apply_patch", body]).patch == body
    assert extract_from_shell(["bash", "-lc", f"apply_patch <<'EOF'\n{body}EOF"]).patch == body
    assert extract_from_shell("apply_patch <<'EOF'\nx\nEOF && rm -rf /") is None
    assert extract_from_shell("ls -la") is None
    assert extract_from_shell("echo 'unbalanced") is None


# --------------------------------------------------------------------------- properties

_line = st.text(st.characters(codec="utf-8", exclude_characters="\n\r", exclude_categories=("Cs",)), max_size=12)
_unique_lines = st.lists(_line, min_size=1, max_size=30, unique=True).map(lambda xs: [f"{i}:{x}" for i, x in enumerate(xs)])


@st.composite
def edited_files(draw):
    """(files before, files after): files with distinct lines, and random edits of each."""
    count = draw(st.integers(1, 3))
    before, after = {}, {}
    for n in range(count):
        lines = draw(_unique_lines)
        new = list(lines)
        for _ in range(draw(st.integers(1, 4))):
            a = draw(st.integers(0, len(new)))
            b = draw(st.integers(a, min(len(new), a + 3)))
            new[a:b] = draw(st.lists(_line, max_size=3))
        before[f"d{n}/f{n}.txt"], after[f"d{n}/f{n}.txt"] = lines, new
    return before, after


def render(before: dict[str, list[str]], after: dict[str, list[str]]) -> str:
    """The patch that turns each file of `before` into `after` (hunks with 3 lines of context)."""
    body = []
    for path, old in before.items():
        new = after[path]
        groups = list(difflib.SequenceMatcher(None, old, new, autojunk=False).get_grouped_opcodes(3))
        if not groups:
            continue
        body.append(f"*** Update File: {path}")
        for group in groups:
            body.append("@@")
            for tag, i1, i2, j1, j2 in group:
                if tag == "equal":
                    body += [f" {x}" for x in old[i1:i2]]
                else:
                    body += [f"-{x}" for x in old[i1:i2]] + [f"+{x}" for x in new[j1:j2]]
    body.append("*** Add File: added/new.txt")
    body += ["+fresh", "+lines"]
    return patch(*body)


def write_tree(root: Path, files: dict[str, list[str]]) -> None:
    for path, lines in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes("".join(f"{x}\n" for x in lines).encode())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(edited_files())
def test_rendered_edit_scripts_apply_exactly(case) -> None:
    before, after = case
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_tree(root, before)
        run(root, render(before, after))
        for path, lines in after.items():
            assert (root / path).read_bytes() == "".join(f"{x}\n" for x in lines).encode()
        assert (root / "added/new.txt").read_text() == "fresh\nlines\n"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(edited_files(), st.sampled_from(["context", "truncate", "path"]), st.randoms(use_true_random=False))
def test_corrupted_patches_change_nothing(case, how, rnd) -> None:
    before, after = case
    text = render(before, after)
    lines = text.split("\n")
    if how == "context":
        old_lines = [i for i, x in enumerate(lines) if x[:1] in (" ", "-") and not x.startswith("***")]
        if not old_lines:
            return
        lines[rnd.choice(old_lines)] = " \x01not in any file\x01"
    elif how == "truncate":
        lines = lines[:rnd.randrange(1, len(lines) - 2)]
    else:
        headers = [i for i, x in enumerate(lines) if x.startswith("*** Update File: ")]
        if not headers:
            return
        lines[rnd.choice(headers)] = "*** Update File: no/such/file.txt"
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_tree(root, before)
        state = tree_state(root)
        with pytest.raises(PatchError):
            run(root, "\n".join(lines))
        assert tree_state(root) == state


def test_deleting_a_symlink_removes_the_link_not_its_target(root: Path) -> None:
    (root / "important.py").write_text("keep me\n")
    (root / "alias.py").symlink_to("important.py")
    run(root, patch("*** Delete File: alias.py"))
    assert not (root / "alias.py").is_symlink() and (root / "important.py").read_text() == "keep me\n"


def test_empty_line_before_the_next_file_header_is_not_context(root: Path) -> None:
    (root / "a.txt").write_text("one\n\ntwo\n")
    (root / "b.txt").write_text("x\n")
    run(root, patch("*** Update File: a.txt", "@@", "+three", "", "*** Update File: b.txt", "@@", "-x", "+y", ""))
    assert (root / "a.txt").read_text() == "one\n\ntwo\nthree\n"
    assert (root / "b.txt").read_text() == "y\n"


def test_a_write_that_fails_leaves_no_file_and_puts_back_earlier_ones(root: Path, monkeypatch) -> None:
    import errno

    import auger.changes.files as files

    (root / "a.txt").write_text("old\n")
    (root / "b.txt").write_text("keep\n")
    before = tree_state(root)
    real = files.replace_file

    def disk_full_for_fresh(parent_fd, name, data, mode):  # a full disk, at the second file
        if name == "fresh.txt":
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(parent_fd, name, data, mode)

    monkeypatch.setattr(files, "replace_file", disk_full_for_fresh)
    with pytest.raises(PatchError, match="No space left on device.*no file was changed"):
        run(root, patch("*** Update File: a.txt", "@@", "-old", "+new", "*** Add File: fresh.txt", "+fresh",
                        "*** Delete File: b.txt"))
    assert tree_state(root) == before
