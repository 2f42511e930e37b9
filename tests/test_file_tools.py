"""Tests for the file tools (read_file, write_file, edit_file) on real files.

The project root is `tmp_path/proj`, so that a sibling `proj-evil` and files outside
the root can be created to check that every escape route is refused.
"""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from auger.tools import files
from auger.tools.base import (
    LOCAL_MUTATION,
    READ_ONLY,
    FileStamp,
    SessionToolState,
    ToolContext,
    ToolError,
    ToolResult,
    ToolSpec,
)
from auger.tools.files import EDIT_FILE, READ_FILE, TOOLS, WRITE_FILE


@pytest.fixture
def root(tmp_path: Path) -> Path:
    proj = tmp_path / "proj"
    proj.mkdir()
    return proj.resolve()


@pytest.fixture
def ctx(root: Path, tmp_path: Path) -> ToolContext:
    return ToolContext(root=root, state=SessionToolState(scratch_dir=tmp_path / "scratch"),
                       call_id="c1", archive=None)  # type: ignore[arg-type]


def run(spec: ToolSpec, raw: Any, ctx: ToolContext) -> ToolResult:
    """Validate like the engine does, then run the handler."""
    return asyncio.run(spec.handler(spec.validate(raw), ctx))


def fails(spec: ToolSpec, raw: Any, ctx: ToolContext) -> str:
    """Run a call that must fail with a ToolError; return its message."""
    with pytest.raises(ToolError) as info:
        run(spec, raw, ctx)
    return str(info.value)


def touch_changed(path: Path, data: bytes) -> None:
    """Change a file on disk behind the session's back, with a clearly different mtime."""
    path.write_bytes(data)
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))


# --------------------------------------------------------------------------- specs


def test_specs_contract() -> None:
    assert TOOLS == [READ_FILE, WRITE_FILE, EDIT_FILE]
    assert [t.name for t in TOOLS] == ["read_file", "write_file", "edit_file"]
    assert READ_FILE.effect == READ_ONLY and READ_FILE.parallel_safe
    for spec in (WRITE_FILE, EDIT_FILE):
        assert spec.effect == LOCAL_MUTATION and not spec.parallel_safe
    assert "exact" in EDIT_FILE.description and "unique" in EDIT_FILE.description
    assert READ_FILE.parameters["properties"]["offset"]["minimum"] == 1
    assert EDIT_FILE.parameters["required"] == ["path", "old_string", "new_string"]


@pytest.mark.parametrize(
    ("spec", "raw", "expected"),
    [
        (READ_FILE, {}, "missing required argument(s): path"),
        (READ_FILE, {"path": 3}, "'path' must be a string"),
        (READ_FILE, {"path": "a", "offset": 0}, "'offset' must be >= 1"),
        (READ_FILE, {"path": "a", "limit": "many"}, "'limit' must be an integer"),
        (READ_FILE, {"path": "a", "lines": 5}, "unknown argument(s): lines"),
        (READ_FILE, ["a"], "arguments must be a JSON object"),
        (WRITE_FILE, {"path": "a"}, "missing required argument(s): content"),
        (WRITE_FILE, {"path": "a", "content": ["x"]}, "'content' must be a string"),
        (EDIT_FILE, {"path": "a", "old_string": "x"}, "missing required argument(s): new_string"),
        (EDIT_FILE, {"path": "a", "old_string": "x", "new_string": "y", "replace_all": "yes"},
         "'replace_all' must be true or false"),
        (EDIT_FILE, {"path": "a", "old": "x", "old_string": "x", "new_string": "y"},
         "unknown argument(s): old"),
    ],
)
def test_malformed_arguments_are_refused_readably(ctx: ToolContext, spec: ToolSpec, raw: Any,
                                                  expected: str) -> None:
    msg = fails(spec, raw, ctx)
    assert expected in msg and spec.name in msg


def test_lenient_argument_coercion(ctx: ToolContext, root: Path) -> None:
    (root / "a.txt").write_text("1\n2\n3\n")
    out = run(READ_FILE, {"path": "a.txt", "offset": "2", "limit": 1.0}, ctx).output
    assert out.splitlines()[0] == "     2\t2"


# --------------------------------------------------------------------------- read_file


def test_read_numbers_lines_and_records_stamp(ctx: ToolContext, root: Path) -> None:
    f = root / "src" / "m.py"
    f.parent.mkdir()
    f.write_text("import os\n\nprint(os)\n")
    res = run(READ_FILE, {"path": "src/m.py"}, ctx)
    assert res.ok
    assert res.output == "     1\timport os\n     2\t\n     3\tprint(os)"
    assert res.metadata["path"] == "src/m.py" and res.metadata["total_lines"] == 3
    assert ctx.state.read_stamps[f] == FileStamp.of(f)


def test_read_last_line_without_newline_and_crlf(ctx: ToolContext, root: Path) -> None:
    (root / "w.txt").write_bytes(b"one\r\ntwo\r\nthree")
    assert run(READ_FILE, {"path": "w.txt"}, ctx).output == "     1\tone\n     2\ttwo\n     3\tthree"


def test_read_paging(ctx: ToolContext, root: Path) -> None:
    (root / "big.txt").write_text("".join(f"line {i}\n" for i in range(1, 26)))
    out = run(READ_FILE, {"path": "big.txt", "offset": 5, "limit": 10}, ctx).output.splitlines()
    assert out[0] == "     5\tline 5" and out[9] == "    14\tline 14"
    assert "lines 5-14 of 25" in out[-1] and "offset=15" in out[-1]
    assert len(out) == 11
    # the last page has no "read more" footer
    tail = run(READ_FILE, {"path": "big.txt", "offset": 15, "limit": 100}, ctx).output
    assert tail.splitlines()[-1] == "    25\tline 25"
    assert "offset=" not in tail


def test_read_default_limit_is_2000(ctx: ToolContext, root: Path) -> None:
    (root / "long.txt").write_text("x\n" * 2500)
    out = run(READ_FILE, {"path": "long.txt"}, ctx).output.splitlines()
    assert out[1999] == "  2000\tx"
    assert "offset=2001" in out[-1] and "of 2500" in out[-1]


def test_read_offset_past_end(ctx: ToolContext, root: Path) -> None:
    (root / "s.txt").write_text("a\nb\nc\n")
    msg = fails(READ_FILE, {"path": "s.txt", "offset": 10}, ctx)
    assert "past the end" in msg and "has 3 lines" in msg
    (root / "one.txt").write_text("a")
    assert "has 1 line" in fails(READ_FILE, {"path": "one.txt", "offset": 2}, ctx)


def test_read_empty_file(ctx: ToolContext, root: Path) -> None:
    (root / "e.txt").write_bytes(b"")
    assert "empty" in run(READ_FILE, {"path": "e.txt"}, ctx).output
    assert (root / "e.txt").resolve() in ctx.state.read_stamps


def test_read_cuts_long_lines(ctx: ToolContext, root: Path) -> None:
    (root / "min.js").write_text("a" * 2500 + "\nshort\n")
    out = run(READ_FILE, {"path": "min.js"}, ctx).output.splitlines()
    assert out[0] == "     1\t" + "a" * 2000 + " [... 500 more chars cut]"
    assert out[1] == "     2\tshort"


def test_read_refuses_binary(ctx: ToolContext, root: Path) -> None:
    (root / "img.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00" + bytes(range(256)) * 10)
    msg = fails(READ_FILE, {"path": "img.png"}, ctx)
    assert "binary" in msg and "2,571 bytes" in msg
    assert not ctx.state.read_stamps


def test_read_non_utf8_shows_replacement_and_note(ctx: ToolContext, root: Path) -> None:
    (root / "latin.txt").write_bytes("café\nna\xefve\n".encode("latin-1"))
    res = run(READ_FILE, {"path": "latin.txt"}, ctx)
    lines = res.output.splitlines()
    assert "not valid UTF-8" in lines[0]
    assert lines[1:] == ["     1\tcaf\ufffd", "     2\tna\ufffdve"]
    assert res.metadata["valid_utf8"] is False
    res.output.encode("utf-8")  # no lone surrogates leak to the model


def test_read_valid_utf8_has_no_note(ctx: ToolContext, root: Path) -> None:
    (root / "u.txt").write_text("héllo ✓\n", encoding="utf-8")
    assert run(READ_FILE, {"path": "u.txt"}, ctx).output == "     1\théllo ✓"


def test_read_directory_and_missing(ctx: ToolContext, root: Path) -> None:
    (root / "pkg").mkdir()
    assert "is a directory" in fails(READ_FILE, {"path": "pkg"}, ctx)
    assert "is a directory" in fails(READ_FILE, {"path": "."}, ctx)
    (root / "pkg" / "config.yaml").write_text("a: 1\n")
    (root / "pkg" / "README.md").write_text("hi\n")
    msg = fails(READ_FILE, {"path": "pkg/config.yml"}, ctx)
    assert "pkg/config.yml does not exist" in msg and "pkg/config.yaml" in msg
    assert "pkg/README.md" in fails(READ_FILE, {"path": "pkg/readme.md"}, ctx)
    msg = fails(READ_FILE, {"path": "nope/x.txt"}, ctx)
    assert "does not exist" in msg and "nope" in msg
    assert "does not exist" in fails(READ_FILE, {"path": "pkg/config.yaml/x"}, ctx)


def test_read_refuses_fifo(ctx: ToolContext, root: Path) -> None:
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs here")
    os.mkfifo(root / "pipe")
    assert "not a regular file" in fails(READ_FILE, {"path": "pipe"}, ctx)


# --------------------------------------------------------------------------- write_file


def test_write_creates_parents_and_records_created(ctx: ToolContext, root: Path) -> None:
    res = run(WRITE_FILE, {"path": "a/b/c.py", "content": "x = 1\ny = 2\n"}, ctx)
    f = root / "a" / "b" / "c.py"
    assert f.read_text() == "x = 1\ny = 2\n"
    assert res.output.startswith("Created a/b/c.py (2 lines")
    assert res.metadata["path"] == "a/b/c.py" and res.metadata["created"] is True
    assert "+++ b/a/b/c.py" in res.metadata["diff"] and "+y = 2" in res.metadata["diff"]
    assert ctx.state.created_files == {f}
    assert ctx.state.read_stamps[f] == FileStamp.of(f)
    # a new file gets the mode open() would give it, not mkstemp's 0600
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(f.stat().st_mode) == 0o666 & ~umask


def test_write_overwrites_with_diff_and_no_temp_left(ctx: ToolContext, root: Path) -> None:
    f = root / "f.txt"
    f.write_text("old\nsame\n")
    res = run(WRITE_FILE, {"path": "f.txt", "content": "new\nsame\nlast"}, ctx)
    assert f.read_text() == "new\nsame\nlast"
    assert res.output.startswith("Overwrote f.txt (3 lines")
    assert res.metadata["created"] is False
    diff = res.metadata["diff"]
    assert "--- a/f.txt" in diff and "-old\n" in diff and "+new\n" in diff
    assert "+last\n\\ No newline at end of file\n" in diff
    assert not ctx.state.created_files
    assert sorted(p.name for p in root.iterdir()) == ["f.txt"]


def test_write_keeps_permission_bits(ctx: ToolContext, root: Path) -> None:
    f = root / "run.sh"
    f.write_text("#!/bin/sh\n")
    f.chmod(0o751)
    run(WRITE_FILE, {"path": "run.sh", "content": "#!/bin/sh\necho hi\n"}, ctx)
    assert stat.S_IMODE(f.stat().st_mode) == 0o751


def test_write_refuses_directory_and_file_parent(ctx: ToolContext, root: Path) -> None:
    (root / "d").mkdir()
    assert "is a directory" in fails(WRITE_FILE, {"path": "d", "content": "x"}, ctx)
    (root / "plain").write_text("x")
    msg = fails(WRITE_FILE, {"path": "plain/child.txt", "content": "x"}, ctx)
    assert "not a directory" in msg
    assert (root / "plain").read_text() == "x"


def test_write_refuses_when_changed_since_read(ctx: ToolContext, root: Path) -> None:
    f = root / "f.txt"
    f.write_text("v1\n")
    run(READ_FILE, {"path": "f.txt"}, ctx)
    touch_changed(f, b"v2 from the user\n")
    msg = fails(WRITE_FILE, {"path": "f.txt", "content": "mine\n"}, ctx)
    assert "changed on disk" in msg and "read it again" in msg
    assert f.read_bytes() == b"v2 from the user\n"
    run(READ_FILE, {"path": "f.txt"}, ctx)
    run(WRITE_FILE, {"path": "f.txt", "content": "mine\n"}, ctx)
    assert f.read_text() == "mine\n"


def test_write_twice_without_reading_between(ctx: ToolContext, root: Path) -> None:
    """The session's own write refreshes the stamp, so it does not trip the stale check."""
    run(WRITE_FILE, {"path": "n.txt", "content": "1\n"}, ctx)
    run(READ_FILE, {"path": "n.txt"}, ctx)
    run(WRITE_FILE, {"path": "n.txt", "content": "22\n"}, ctx)
    run(WRITE_FILE, {"path": "n.txt", "content": "333\n"}, ctx)
    assert (root / "n.txt").read_text() == "333\n"
    assert ctx.state.created_files == {root / "n.txt"}


def test_write_and_edit_refuse_read_only_file(ctx: ToolContext, root: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """os.replace would bypass a read-only bit, so the tools check it themselves.

    os.access is faked because these tests may run as root, who may write anything.
    """
    f = root / "ro.txt"
    f.write_text("keep\n")
    f.chmod(0o444)
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: (
        False if Path(p) == f and mode & os.W_OK else real_access(p, mode, **kw)))
    assert "read-only" in fails(WRITE_FILE, {"path": "ro.txt", "content": "x"}, ctx)
    msg = fails(EDIT_FILE, {"path": "ro.txt", "old_string": "keep", "new_string": "x"}, ctx)
    assert "read-only" in msg
    assert f.read_text() == "keep\n"


def test_write_refuses_unencodable_content(ctx: ToolContext, root: Path) -> None:
    msg = fails(WRITE_FILE, {"path": "s.txt", "content": "a\ud800b"}, ctx)
    assert "cannot be written as UTF-8" in msg
    assert not (root / "s.txt").exists()


def test_write_over_binary_file_has_short_diff(ctx: ToolContext, root: Path) -> None:
    (root / "b.dat").write_bytes(b"\x00\x01\x02")
    res = run(WRITE_FILE, {"path": "b.dat", "content": "text\n"}, ctx)
    assert res.metadata["diff"].startswith("Binary file a/b.dat")
    assert (root / "b.dat").read_text() == "text\n"


# --------------------------------------------------------------------------- edit_file


def test_edit_replaces_and_reports(ctx: ToolContext, root: Path) -> None:
    f = root / "m.py"
    f.write_text("def f():\n    return 1\n\n\ndef g():\n    return 2\n")
    res = run(EDIT_FILE, {"path": "m.py", "old_string": "    return 2",
                          "new_string": "    x = 2\n    return x"}, ctx)
    assert f.read_text() == "def f():\n    return 1\n\n\ndef g():\n    x = 2\n    return x\n"
    lines = res.output.splitlines()
    assert lines[0] == "Edited m.py: 1 replacement."
    assert "     6\t    x = 2" in lines and "     7\t    return x" in lines
    assert "     4\t" in lines and "     1\tdef f():" not in lines  # only nearby context
    assert "-    return 2\n" in res.metadata["diff"]
    assert "+    return x\n" in res.metadata["diff"]
    assert ctx.state.read_stamps[f] == FileStamp.of(f)


def test_edit_deletion_and_replace_all(ctx: ToolContext, root: Path) -> None:
    f = root / "t.txt"
    f.write_text("a x\nb x\nc x\n")
    res = run(EDIT_FILE, {"path": "t.txt", "old_string": " x", "new_string": " y",
                          "replace_all": True}, ctx)
    assert f.read_text() == "a y\nb y\nc y\n"
    assert res.output.startswith("Edited t.txt: 3 replacements.")
    run(EDIT_FILE, {"path": "t.txt", "old_string": "b y\n", "new_string": ""}, ctx)
    assert f.read_text() == "a y\nc y\n"


def test_edit_error_cases(ctx: ToolContext, root: Path) -> None:
    f = root / "t.py"
    original = "x = 1\nif x:\n\tprint(x)\nx = 1\n"
    f.write_text(original)
    call = {"path": "t.py"}

    msg = fails(EDIT_FILE, {**call, "old_string": "", "new_string": "y"}, ctx)
    assert "old_string is empty" in msg and "write_file" in msg
    assert "identical" in fails(EDIT_FILE, {**call, "old_string": "x", "new_string": "x"}, ctx)

    msg = fails(EDIT_FILE, {**call, "old_string": "y = 2", "new_string": "y = 3"}, ctx)
    assert "not found" in msg and "whitespace" not in msg

    msg = fails(EDIT_FILE, {**call, "old_string": "if x:\n    print(x)", "new_string": "z"}, ctx)
    assert "not found" in msg and "whitespace" in msg and "line 2" in msg

    msg = fails(EDIT_FILE, {**call, "old_string": "     2\tif x:", "new_string": "if y:"}, ctx)
    assert "line-number prefixes" in msg

    msg = fails(EDIT_FILE, {**call, "old_string": "x = 1\n", "new_string": "x = 2\n"}, ctx)
    assert "2 times" in msg and "lines 1, 4" in msg and "replace_all" in msg

    msg = fails(EDIT_FILE, {"path": "t.pyy", "old_string": "a", "new_string": "b"}, ctx)
    assert "t.pyy does not exist" in msg and "t.py" in msg and "write_file" in msg

    (root / "d").mkdir()
    assert "is a directory" in fails(EDIT_FILE, {"path": "d", "old_string": "a",
                                                 "new_string": "b"}, ctx)
    assert f.read_text() == original


def test_edit_refuses_binary(ctx: ToolContext, root: Path) -> None:
    f = root / "blob.bin"
    data = b"abc\x00def" * 3
    f.write_bytes(data)
    msg = fails(EDIT_FILE, {"path": "blob.bin", "old_string": "abc", "new_string": "x"}, ctx)
    assert "binary" in msg and "21 bytes" in msg
    assert f.read_bytes() == data


def test_edit_keeps_other_non_utf8_bytes(ctx: ToolContext, root: Path) -> None:
    f = root / "latin.txt"
    raw = "# café\nname = 'old'\n# naïve \xff\n".encode("latin-1")
    f.write_bytes(raw)
    run(EDIT_FILE, {"path": "latin.txt", "old_string": "'old'", "new_string": "'new'"}, ctx)
    assert f.read_bytes() == raw.replace(b"'old'", b"'new'")
    res = run(READ_FILE, {"path": "latin.txt"}, ctx)
    assert "not valid UTF-8" in res.output


def test_edit_crlf_file_stays_crlf(ctx: ToolContext, root: Path) -> None:
    f = root / "win.txt"
    f.write_bytes(b"first\r\nsecond\r\nthird\r\n")
    res = run(EDIT_FILE, {"path": "win.txt", "old_string": "first\nsecond",
                          "new_string": "first\ninserted\nsecond"}, ctx)
    assert f.read_bytes() == b"first\r\ninserted\r\nsecond\r\nthird\r\n"
    assert "     2\tinserted" in res.output.splitlines()
    # a single-line edit needs no conversion and leaves the endings alone
    run(EDIT_FILE, {"path": "win.txt", "old_string": "third", "new_string": "3rd"}, ctx)
    assert f.read_bytes() == b"first\r\ninserted\r\nsecond\r\n3rd\r\n"


def test_edit_stale_read_is_refused_until_read_again(ctx: ToolContext, root: Path) -> None:
    f = root / "s.py"
    f.write_text("a = 1\nb = 2\n")
    run(READ_FILE, {"path": "s.py"}, ctx)
    touch_changed(f, b"a = 1\nb = 2\nc = 3\n")
    msg = fails(EDIT_FILE, {"path": "s.py", "old_string": "b = 2", "new_string": "b = 20"}, ctx)
    assert "changed on disk" in msg and "read it again" in msg
    assert f.read_text() == "a = 1\nb = 2\nc = 3\n"
    run(READ_FILE, {"path": "s.py"}, ctx)
    run(EDIT_FILE, {"path": "s.py", "old_string": "b = 2", "new_string": "b = 20"}, ctx)
    # consecutive edits: the tool's own write refreshes the stamp
    run(EDIT_FILE, {"path": "s.py", "old_string": "c = 3", "new_string": "c = 30"}, ctx)
    assert f.read_text() == "a = 1\nb = 20\nc = 30\n"


def test_edit_never_read_file_is_allowed(ctx: ToolContext, root: Path) -> None:
    f = root / "fresh.txt"
    f.write_text("hello world\n")
    run(EDIT_FILE, {"path": "fresh.txt", "old_string": "world", "new_string": "there"}, ctx)
    assert f.read_text() == "hello there\n"


def test_edit_keeps_permission_bits(ctx: ToolContext, root: Path) -> None:
    f = root / "tool.sh"
    f.write_text("echo a\n")
    f.chmod(0o700)
    run(EDIT_FILE, {"path": "tool.sh", "old_string": "a", "new_string": "b"}, ctx)
    assert stat.S_IMODE(f.stat().st_mode) == 0o700
    assert sorted(p.name for p in root.iterdir()) == ["tool.sh"]


def test_edit_through_symlink_inside_root_edits_target(ctx: ToolContext, root: Path) -> None:
    (root / "real.txt").write_text("v1\n")
    (root / "link.txt").symlink_to("real.txt")
    res = run(EDIT_FILE, {"path": "link.txt", "old_string": "v1", "new_string": "v2"}, ctx)
    assert (root / "link.txt").is_symlink()
    assert (root / "real.txt").read_text() == "v2\n"
    assert res.metadata["path"] == "real.txt"


# --------------------------------------------------------------------------- containment


def _escape_paths(root: Path) -> dict[str, str]:
    """Every way out of the root, each pointing at an existing file with content "secret"."""
    outside = root.parent / "outside.txt"
    outside.write_text("secret\n")
    evil = root.parent / (root.name + "-evil")
    evil.mkdir(exist_ok=True)
    (evil / "x.txt").write_text("secret\n")
    (root / "out-link.txt").symlink_to(outside)
    (root / "out-dir").symlink_to(root.parent, target_is_directory=True)
    return {
        "dotdot": "../outside.txt",
        "nested-dotdot": "sub/../../outside.txt",
        "absolute": str(outside),
        "sibling-relative": f"../{evil.name}/x.txt",
        "sibling-absolute": str(evil / "x.txt"),
        "file-symlink": "out-link.txt",
        "dir-symlink": "out-dir/outside.txt",
    }


@pytest.mark.parametrize("spec", TOOLS, ids=lambda s: s.name)
def test_every_tool_refuses_every_escape(ctx: ToolContext, root: Path, spec: ToolSpec) -> None:
    for form, path in _escape_paths(root).items():
        raw: dict[str, Any] = {"path": path}
        if spec is WRITE_FILE:
            raw["content"] = "pwned\n"
        elif spec is EDIT_FILE:
            raw.update(old_string="secret", new_string="pwned")
        msg = fails(spec, raw, ctx)
        assert "outside the project root" in msg, form
    for target in (root.parent / "outside.txt", root.parent / f"{root.name}-evil" / "x.txt"):
        assert target.read_text() == "secret\n"
    assert not ctx.state.read_stamps and not ctx.state.created_files


def test_write_refuses_to_create_outside(ctx: ToolContext, root: Path) -> None:
    for path in ("../new.txt", f"../{root.name}-evil/new.txt", str(root.parent / "new.txt")):
        assert "outside the project root" in fails(WRITE_FILE, {"path": path, "content": "x"}, ctx)
    assert not (root.parent / "new.txt").exists()
    assert not (root.parent / f"{root.name}-evil").exists()


def test_nul_byte_in_path_is_refused(ctx: ToolContext) -> None:
    assert "NUL" in fails(READ_FILE, {"path": "a\x00b"}, ctx)


def test_module_helpers_are_consistent() -> None:
    """Line counting matches what read_file shows (a final unterminated line counts)."""
    assert files._count_lines("") == 0
    assert files._count_lines("a") == 1
    assert files._count_lines("a\n") == 1
    assert files._count_lines("a\nb") == 2


def test_read_file_answer_is_capped_in_size(tmp_path):
    from auger.tools.files import MAX_PAGE_CHARS

    root = tmp_path / "proj"
    root.mkdir()
    (root / "big.txt").write_text(("y" * 1500 + "\n") * 1000)
    ctx = ToolContext(root=root.resolve(), state=SessionToolState(scratch_dir=tmp_path / "scratch"),
                      call_id="c1", archive=None)
    result = asyncio.run(READ_FILE.handler(READ_FILE.validate({"path": "big.txt"}), ctx))
    assert len(result.output) <= MAX_PAGE_CHARS + 500
    footer = result.output.splitlines()[-1]
    assert footer.startswith("[showing lines 1-") and "of 1000" in footer and "offset=" in footer
    next_offset = int(footer.split("offset=")[1].split()[0])
    more = asyncio.run(READ_FILE.handler(READ_FILE.validate({"path": "big.txt", "offset": next_offset}), ctx))
    assert more.output.splitlines()[0].lstrip().startswith(str(next_offset))
