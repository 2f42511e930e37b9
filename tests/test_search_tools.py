"""Tests for the search tools (list_dir, glob, grep) and the walker under them, on real trees.

The project root is `tmp_path/proj`; `tmp_path/outside` and the sibling `proj-evil` exist
so that every escape route can be tried. Every grep test runs against both backends
(ripgrep and the pure-Python fallback), and dedicated tests check that the two give
byte-identical output, and that the walker and glob matcher agree with `rg` itself.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from auger.tools.base import READ_ONLY, SessionToolState, ToolContext, ToolError, ToolResult, ToolSpec
from auger.tools.search import GLOB, GREP, LIST_DIR, TOOLS
from auger.tools.walk import GlobError, PathFilter, glob_matcher, walk

BACKENDS = ["ripgrep", "python"]
RG_FLAGS = ["--no-config", "--hidden", "--no-require-git", "--no-ignore-global", "--glob", "!.git"]


def require_rg() -> str:
    """ripgrep tests must fail, not skip, when rg is missing: it is the production backend."""
    rg = shutil.which("rg")
    assert rg, "ripgrep (`rg`) is not installed; install it with `apt-get install -y ripgrep`"
    return rg


def write(root: Path, files: dict[str, str | bytes]) -> None:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")


LONG_LINE = "x" * 600 + " needle tail"

PROJECT_FILES: dict[str, str | bytes] = {
    ".gitignore": "node_modules/\nbuild/\n*.log\n!keep.log\n/top_only.txt\nx/**\n!x/keep.txt\n",
    ".git/info/exclude": "secret.txt\n",
    ".git/config": "needle in git config\n",
    ".git/HEAD": "ref: refs/heads/main\n",
    ".envrc": "TOKEN=needle\n",
    ".hidden/notes.txt": "a hidden needle\n",
    "README.md": "# Project\nThe needle is here.\n",
    "top_only.txt": "needle top\n",  # ignored: anchored root rule
    "secret.txt": "needle secret\n",  # ignored: .git/info/exclude
    "debug.log": "needle debug\n",  # ignored: *.log
    "keep.log": "needle kept\n",  # re-included: !keep.log
    "node_modules/pkg/index.js": "needle\n",  # ignored directory
    "build/out.txt": "needle\n",  # ignored directory
    "x/keep.txt": "needle x keep\n",  # x/** ignores the contents, !x/keep.txt brings one back
    "x/drop.txt": "needle x drop\n",
    "src/app.py": "import os\n\ndef main():\n    return 'needle'\n",
    "src/Needle.py": "NEEDLE = 1\n",
    "src/x.tmp": "needle tmp\n",  # kept: *.tmp is only ignored under src/lib
    "src/sub/top_only.txt": "needle sub\n",  # kept: /top_only.txt only means the root's
    "src/sub/app.log": "needle\n",  # ignored by the root's *.log
    "src/lib/.gitignore": "generated/\n*.tmp\n",
    "src/lib/util.py": "def util():\n    pass  # needle\n",
    "src/lib/cache.tmp": "needle\n",
    "src/lib/generated/gen.py": "needle\n",
    "tests/test_app.py": "from src.app import main\n\ndef test_main():\n    assert main() == 'needle'\n",
    "docs/guide.md": "Guide\nno match here\n",
    "data/blob.bin": b"\x00\x01\x02needle\x00",
    "data/latin1.txt": b"caf\xe9 needle\n",
    "data/crlf.txt": b"first\r\nneedle crlf\r\n",
    "data/long.txt": LONG_LINE + "\n",
    "data/bom.txt": "\ufeffneedle bom\n".encode("utf-8"),
}

VISIBLE_FILES = sorted([
    ".envrc", ".gitignore", ".hidden/notes.txt", "README.md", "data/blob.bin", "data/bom.txt",
    "data/crlf.txt", "data/latin1.txt", "data/long.txt", "docs/guide.md", "keep.log",
    "src/Needle.py", "src/app.py", "src/lib/.gitignore", "src/lib/util.py",
    "src/sub/top_only.txt", "src/x.tmp", "tests/test_app.py", "x/keep.txt",
])

NEEDLE_LINES = [
    ".envrc:1:TOKEN=needle",
    ".hidden/notes.txt:1:a hidden needle",
    "README.md:2:The needle is here.",
    "data/bom.txt:1:needle bom",
    "data/crlf.txt:2:needle crlf",
    "data/latin1.txt:1:caf\ufffd needle",
    "data/long.txt:1:" + "x" * 500 + "…",
    "keep.log:1:needle kept",
    "src/app.py:4:    return 'needle'",
    "src/lib/util.py:2:    pass  # needle",
    "src/sub/top_only.txt:1:needle sub",
    "src/x.tmp:1:needle tmp",
    "tests/test_app.py:4:    assert main() == 'needle'",
    "x/keep.txt:1:needle x keep",
]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    proj = tmp_path / "proj"
    write(proj, PROJECT_FILES)
    write(tmp_path, {"outside/secret.txt": "needle outside\n", "proj-evil/x.txt": "needle evil\n"})
    os.symlink("../outside", proj / "link_out")  # a directory outside the root
    os.symlink("../outside/secret.txt", proj / "link_file")  # a file outside the root
    os.symlink("lib", proj / "src" / "link_in")  # a directory inside: still not followed
    return proj.resolve()


def make_ctx(root: Path) -> ToolContext:
    return ToolContext(root=root, state=SessionToolState(scratch_dir=root.parent / "scratch"),
                       call_id="c1", archive=None)  # type: ignore[arg-type]


def run(spec: ToolSpec, raw: Any, root: Path) -> ToolResult:
    """Validate like the engine does, then run the handler."""
    return asyncio.run(spec.handler(spec.validate(raw), make_ctx(root)))


def fails(spec: ToolSpec, raw: Any, root: Path) -> str:
    with pytest.raises(ToolError) as info:
        run(spec, raw, root)
    return str(info.value)


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Selects the grep backend for one test (the variable is read at call time)."""
    if request.param == "ripgrep":
        require_rg()
    monkeypatch.setenv("AUGER_GREP_BACKEND", request.param)
    return request.param


def grep(root: Path, backend: str, **args: Any) -> str:
    result = run(GREP, args, root)
    assert result.metadata["backend"] == backend
    return result.output


def lines(output: str) -> list[str]:
    return output.split("\n")


# ------------------------------------------------------------------- specs


def test_specs_are_read_only_parallel_safe_tools() -> None:
    assert [t.name for t in TOOLS] == ["list_dir", "glob", "grep"]
    assert TOOLS == [LIST_DIR, GLOB, GREP]
    for spec in TOOLS:
        assert spec.effect == READ_ONLY and spec.parallel_safe
        assert spec.description and len(spec.description) < 600
    assert "minimum" in LIST_DIR.parameters["properties"]["depth"]
    with pytest.raises(ToolError, match="depth"):
        LIST_DIR.validate({"depth": 0})
    with pytest.raises(ToolError, match="max_results"):
        GREP.validate({"pattern": "x", "max_results": 0})
    with pytest.raises(ToolError, match="pattern"):
        GLOB.validate({})


# ------------------------------------------------------------------ walker


def test_walker_yields_only_non_ignored_files(root: Path) -> None:
    assert sorted(e.rel for e in walk(root)) == VISIBLE_FILES


def test_walker_agrees_with_ripgrep_file_list(root: Path) -> None:
    rg = require_rg()
    for start in (root, root / "src", root / "src" / "lib", root / "x"):
        out = subprocess.run([rg, "--files", *RG_FLAGS, str(start)], capture_output=True, check=True)
        theirs = sorted(os.path.relpath(p, start) for p in out.stdout.decode().splitlines())
        assert sorted(e.rel for e in walk(start)) == theirs, start


def test_walk_from_subdirectory_uses_rules_of_root_and_between(root: Path) -> None:
    # The root's *.log reaches src/sub; its anchored /top_only.txt does not; the nested
    # src/lib/.gitignore applies when the walk starts below src/lib's parent.
    assert sorted(e.rel for e in walk(root / "src")) == [
        "Needle.py", "app.py", "lib/.gitignore", "lib/util.py", "sub/top_only.txt", "x.tmp"
    ]
    assert sorted(e.rel for e in walk(root / "src" / "lib")) == [".gitignore", "util.py"]


def test_walk_started_inside_an_ignored_directory_lists_it(root: Path) -> None:
    # Like `rg pattern node_modules`: asking for an ignored directory by name shows it,
    # while the rules still apply to what is inside it.
    write(root, {"node_modules/pkg/trace.log": "x\n"})
    assert [e.rel for e in walk(root / "node_modules")] == ["pkg/index.js"]


def test_walker_never_follows_symlinks_and_reports_them_when_asked(root: Path) -> None:
    everything = list(walk(root, include_dirs=True, include_symlinks=True))
    rels = {e.rel: e.kind for e in everything}
    assert rels["link_out"] == rels["link_file"] == rels["src/link_in"] == "symlink"
    assert not any(r.startswith(("link_out/", "src/link_in/")) for r in rels)
    assert all(e.kind == "file" for e in walk(root))


def test_walker_skips_dot_git_and_special_files(root: Path) -> None:
    os.mkfifo(root / "pipe")  # reading a FIFO would block the search forever
    (root / "sub").mkdir()
    (root / "sub" / ".git").write_text("gitdir: ../.git\n")  # a worktree-style .git file
    rels = [e.rel for e in walk(root, include_dirs=True, include_symlinks=True)]
    assert "pipe" not in rels and not any(".git/" in r or r.endswith(".git") for r in rels)


def test_walker_order_is_dirs_first_then_by_name(root: Path) -> None:
    top = [e.rel for e in walk(root, max_depth=1, include_dirs=True, include_symlinks=True)]
    assert top == [".hidden", "data", "docs", "src", "tests", "x",
                   ".envrc", ".gitignore", "README.md", "keep.log", "link_file", "link_out"]


def test_ignore_rules_work_without_a_repository(tmp_path: Path) -> None:
    proj = tmp_path / "plain"
    write(proj, {".gitignore": "*.o\nout/\n", "a.c": "", "a.o": "", "out/x": "", "lib/b.o": "",
                 "lib/.gitignore": "!keep.o\n", "lib/keep.o": ""})
    assert sorted(e.rel for e in walk(proj)) == [".gitignore", "a.c", "lib/.gitignore", "lib/keep.o"]


def test_nested_repository_is_not_governed_by_outer_gitignore(root: Path) -> None:
    # As in git and rg: a directory holding its own .git starts fresh (plus its own exclude).
    write(root, {"vendor/dep/.git/info/exclude": "local.txt\n", "vendor/dep/trace.log": "x\n",
                 "vendor/dep/local.txt": "x\n"})
    assert [e.rel for e in walk(root / "vendor")] == ["dep/trace.log"]


def test_path_filter_answers_like_the_walker(root: Path) -> None:
    pf = PathFilter(root)
    for rel in VISIBLE_FILES:
        assert pf.includes(rel), rel
    for rel in ["debug.log", "node_modules/pkg/index.js", "src/lib/generated/gen.py",
                "x/drop.txt", "secret.txt", ".git/config", "src/sub/app.log"]:
        assert not pf.includes(rel), rel


# -------------------------------------------------------------------- glob

GLOB_TREE = ["a.py", "test_top.py", "b.txt", "c.md", "src/b.py", "src/x/c.py", "src/x/y/d.py",
             "src/x/test_e.py", "src/x/e.ts", "tests/test_f.py", "docs/a.md", "docs/b.txt",
             "lib/ab.py", "lib/ac.py", "lib/ad.py", "lib/abc.py"]

GLOB_TABLE = [
    # pattern, path, expected (paths relative to the root, sorted)
    ("*.py", ".", ["a.py", "lib/ab.py", "lib/abc.py", "lib/ac.py", "lib/ad.py", "src/b.py",
                   "src/x/c.py", "src/x/test_e.py", "src/x/y/d.py", "test_top.py", "tests/test_f.py"]),
    ("src/**/*.py", ".", ["src/b.py", "src/x/c.py", "src/x/test_e.py", "src/x/y/d.py"]),
    ("**/test_*.py", ".", ["src/x/test_e.py", "test_top.py", "tests/test_f.py"]),
    ("src/*.py", ".", ["src/b.py"]),  # * does not cross /
    ("src/*", ".", ["src/b.py"]),
    ("lib/a?.py", ".", ["lib/ab.py", "lib/ac.py", "lib/ad.py"]),
    ("lib/a[bc].py", ".", ["lib/ab.py", "lib/ac.py"]),
    ("lib/a[!b].py", ".", ["lib/ac.py", "lib/ad.py"]),
    ("*.{md,txt}", ".", ["b.txt", "c.md", "docs/a.md", "docs/b.txt"]),
    ("{src,tests}/**/test_*.py", ".", ["src/x/test_e.py", "tests/test_f.py"]),
    ("x/*.ts", "src", ["src/x/e.ts"]),  # relative to `path`
    ("*.ts", "src/x", ["src/x/e.ts"]),
    ("./src/*.py", ".", ["src/b.py"]),  # a leading ./ is tolerated
    ("y/**", "src/x", ["src/x/y/d.py"]),
]


@pytest.fixture
def glob_root(tmp_path: Path) -> Path:
    proj = tmp_path / "globs"
    write(proj, {rel: "needle\n" for rel in GLOB_TREE})
    return proj.resolve()


@pytest.mark.parametrize(("pattern", "path", "expected"), GLOB_TABLE)
def test_glob_semantics(glob_root: Path, pattern: str, path: str, expected: list[str]) -> None:
    assert run(GLOB, {"pattern": pattern, "path": path}, glob_root).output == "\n".join(expected)


def test_glob_matcher_agrees_with_ripgrep_glob(glob_root: Path) -> None:
    rg = require_rg()
    extra = ["**", "*", "a*b", "s**/*.py", "[!a]*", "**/x/**", "!*.py", "!src", "src/", "/a.py",
             "{a,b}.*", "*/*.md", "src/x", "\\*.py", "lib/a[b-c]*"]
    for pattern in [p for p, path, _ in GLOB_TABLE if path == "." and not p.startswith("./")] + extra:
        out = subprocess.run([rg, "--files", *RG_FLAGS[:-2], "--glob", pattern, "--glob", "!.git",
                              str(glob_root)], capture_output=True, cwd=glob_root)
        theirs = sorted(os.path.relpath(p, glob_root) for p in out.stdout.decode().splitlines())
        matches = glob_matcher(pattern)
        assert sorted(r for r in GLOB_TREE if matches(r)) == theirs, pattern


def test_glob_respects_ignore_rules(root: Path) -> None:
    assert run(GLOB, {"pattern": "*.log"}, root).output == "keep.log"
    assert run(GLOB, {"pattern": "*.py"}, root).output == "\n".join(
        ["src/Needle.py", "src/app.py", "src/lib/util.py", "tests/test_app.py"])
    assert run(GLOB, {"pattern": "**/*.txt", "path": "src"}, root).output == "src/sub/top_only.txt"


def test_glob_no_match_and_invalid_pattern(glob_root: Path) -> None:
    assert run(GLOB, {"pattern": "*.rs"}, glob_root).output == "No files match *.rs"
    assert run(GLOB, {"pattern": "docs"}, glob_root).output.startswith("No files match docs")
    assert run(GLOB, {"pattern": "*.rs", "path": "src"}, glob_root).output.startswith(
        "No files match *.rs")
    assert "unclosed" in fails(GLOB, {"pattern": "src/[ab"}, glob_root)
    assert "unclosed" in fails(GLOB, {"pattern": "*.{py,ts"}, glob_root)
    assert "not a directory" in fails(GLOB, {"pattern": "*", "path": "a.py"}, glob_root)


def test_glob_caps_results(tmp_path: Path) -> None:
    proj = tmp_path / "many"
    write(proj, {f"f{i:03d}.txt": "" for i in range(205)})
    out = lines(run(GLOB, {"pattern": "*.txt"}, proj.resolve()).output)
    assert len(out) == 201 and out[0] == "f000.txt" and out[199] == "f199.txt"
    assert out[-1].startswith("… 5 more")


def test_glob_matcher_errors_are_glob_errors() -> None:
    for bad in ["[", "a{b", "{a,{b}}", "x\\"]:
        with pytest.raises(GlobError):
            glob_matcher(bad)


# ---------------------------------------------------------------- list_dir


def test_list_dir_tree(root: Path) -> None:
    assert run(LIST_DIR, {"depth": 1}, root).output == "\n".join([
        "./", "  .hidden/", "  data/", "  docs/", "  src/", "  tests/", "  x/", "  .envrc",
        "  .gitignore", "  README.md", "  keep.log", "  link_file -> ../outside/secret.txt",
        "  link_out -> ../outside",
    ])
    assert run(LIST_DIR, {"path": "src"}, root).output == "\n".join([
        "src/", "  lib/", "    .gitignore", "    util.py", "  sub/", "    top_only.txt",
        "  Needle.py", "  app.py", "  link_in -> lib", "  x.tmp",
    ])


def test_list_dir_default_depth_is_two(root: Path) -> None:
    out = run(LIST_DIR, {}, root).output
    tree = lines(out)
    assert "    lib/" in tree and "    keep.txt" in tree  # depth 2: src/lib/, x/keep.txt
    assert "      util.py" not in tree  # depth 3: src/lib/util.py
    assert "node_modules" not in out and ".git/" not in out
    assert "generated" not in out and "drop.txt" not in out


def test_list_dir_caps_entries_and_reports_the_rest(tmp_path: Path) -> None:
    proj = tmp_path / "big"
    write(proj, {f"d/f{i:03d}": "" for i in range(510)})
    out = lines(run(LIST_DIR, {"depth": 3}, proj.resolve()).output)
    assert out[:3] == ["./", "  d/", "    f000"]
    assert len(out) == 1 + 500 + 1 and out[-1].startswith("… 11 more entries")


def test_list_dir_errors_and_empty(root: Path) -> None:
    assert "not a directory" in fails(LIST_DIR, {"path": "README.md"}, root)
    assert "no such file" in fails(LIST_DIR, {"path": "nope"}, root)
    (root / "empty").mkdir()
    assert run(LIST_DIR, {"path": "empty"}, root).output.startswith("empty/\n  (empty")


# -------------------------------------------------------------------- grep


def test_grep_finds_lines_sorted_and_respects_ignores(root: Path, backend: str) -> None:
    assert lines(grep(root, backend, pattern="needle")) == NEEDLE_LINES


def test_grep_case_insensitive(root: Path, backend: str) -> None:
    out = lines(grep(root, backend, pattern="NEEDLE =", case_insensitive=True))
    assert out == ["src/Needle.py:1:NEEDLE = 1"]
    assert lines(grep(root, backend, pattern="needle", case_insensitive=True)) == sorted(
        NEEDLE_LINES + ["src/Needle.py:1:NEEDLE = 1"], key=lambda l: l.split(":")[0].split("/"))


def test_grep_in_subdirectory_and_single_file(root: Path, backend: str) -> None:
    assert lines(grep(root, backend, pattern="needle", path="src")) == [
        l for l in NEEDLE_LINES if l.startswith("src/")]
    assert grep(root, backend, pattern="def", path="src/lib/util.py") == "src/lib/util.py:1:def util():"
    # A file named explicitly is searched even when ignored, like rg does.
    assert grep(root, backend, pattern="needle", path="debug.log") == "debug.log:1:needle debug"


def test_grep_glob_filters_like_the_glob_tool(root: Path, backend: str) -> None:
    assert lines(grep(root, backend, pattern="needle", glob="*.py")) == [
        "src/app.py:4:    return 'needle'", "src/lib/util.py:2:    pass  # needle",
        "tests/test_app.py:4:    assert main() == 'needle'"]
    # rg on its own would let --glob '*.log' resurrect ignored logs; ours must not.
    assert grep(root, backend, pattern="needle", glob="*.log") == "keep.log:1:needle kept"
    assert grep(root, backend, pattern="needle", glob="lib/*", path="src") == (
        "src/lib/util.py:2:    pass  # needle")
    assert lines(grep(root, backend, pattern="needle", glob="!src")) == [
        l for l in NEEDLE_LINES if not l.startswith("src/")]


def test_grep_truncates_long_lines_and_strips_cr(root: Path, backend: str) -> None:
    assert grep(root, backend, pattern="tail") == "data/long.txt:1:" + "x" * 500 + "…"
    assert grep(root, backend, pattern="crlf$") == "No matches"  # the \r is part of the line
    assert grep(root, backend, pattern="crlf\\s$") == "data/crlf.txt:2:needle crlf"


def test_grep_skips_binary_files(root: Path, backend: str) -> None:
    assert "blob.bin" not in grep(root, backend, pattern="needle")
    assert grep(root, backend, pattern="needle", path="data/blob.bin") == (
        "data/blob.bin is a binary file; not searched")


def test_grep_max_results_and_no_matches(root: Path, backend: str) -> None:
    out = lines(grep(root, backend, pattern="needle", max_results=3))
    assert out[:3] == NEEDLE_LINES[:3]
    assert len(out) == 4 and out[3].startswith(f"… {len(NEEDLE_LINES) - 3} more matches")
    assert grep(root, backend, pattern="zebra") == "No matches"


def test_grep_invalid_regex_is_a_tool_error(root: Path, backend: str) -> None:
    assert "invalid regex" in (msg := fails(GREP, {"pattern": "foo("}, root))
    assert "missing )" in msg
    assert "lookahead/lookbehind" in fails(GREP, {"pattern": "(?<=a)b"}, root)
    assert "backreferences" in fails(GREP, {"pattern": "(a)\\1"}, root)
    assert "POSIX" in fails(GREP, {"pattern": "[[:alpha:]]"}, root)
    assert "newline" in fails(GREP, {"pattern": "a\\nb"}, root)
    assert "invalid glob" in fails(GREP, {"pattern": "x", "glob": "[ab"}, root)


def test_grep_backend_env_is_read_at_call_time(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    require_rg()
    for name in BACKENDS:
        monkeypatch.setenv("AUGER_GREP_BACKEND", name)
        assert run(GREP, {"pattern": "needle"}, root).metadata["backend"] == name
    monkeypatch.delenv("AUGER_GREP_BACKEND")
    assert run(GREP, {"pattern": "needle"}, root).metadata["backend"] == "ripgrep"
    monkeypatch.setenv("PATH", str(root / "no-bin-here"))
    assert run(GREP, {"pattern": "needle"}, root).metadata["backend"] == "python"
    monkeypatch.setenv("AUGER_GREP_BACKEND", "ripgrep")
    assert "no `rg`" in fails(GREP, {"pattern": "needle"}, root)


PARITY_QUERIES: list[dict[str, Any]] = [
    {"pattern": "needle"},
    {"pattern": "needle", "max_results": 5},
    {"pattern": "(?i)NEEDLE"},
    {"pattern": "^\\s+\\w+"},
    {"pattern": "^$"},
    {"pattern": "caf"},  # the non-UTF-8 line (see the module docstring of search.py)
    {"pattern": "\\bmain\\b", "path": "src"},
    {"pattern": "needle", "glob": "*.{py,md}"},
    {"pattern": "needle", "glob": "src/**"},
    {"pattern": "needle", "glob": "!*.txt"},
    {"pattern": "needle", "glob": "*.log"},
    {"pattern": "needle", "path": "x"},
    {"pattern": "needle", "path": "node_modules"},
    {"pattern": "needle", "path": "src/sub/app.log"},
    {"pattern": "x{3}", "path": "data"},
    {"pattern": "bom|first"},
    {"pattern": ".", "max_results": 1000},
]


def test_grep_backends_give_identical_output(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    require_rg()
    write(root, {"node_modules/pkg/a.log": "needle log\n", "src/lib/generated/more.txt": "x\n"})
    (root / "utf16.txt").write_bytes("needle utf16\nsecond\n".encode("utf-16"))
    for query in PARITY_QUERIES:
        outputs = {}
        for name in BACKENDS:
            monkeypatch.setenv("AUGER_GREP_BACKEND", name)
            outputs[name] = run(GREP, query, root).output
        assert outputs["ripgrep"] == outputs["python"], query
        assert outputs["python"] != "No matches" or query["pattern"] == "^$", query


# ------------------------------------------------------------ containment

ESCAPES = ["..", "../outside", "../outside/secret.txt", "/etc", "../proj-evil",
           "../proj-evil/x.txt", "link_out", "link_out/secret.txt", "link_file", "sub/../../outside"]


@pytest.mark.parametrize("path", ESCAPES)
@pytest.mark.parametrize("spec", TOOLS, ids=lambda s: s.name)
def test_paths_outside_the_root_are_refused(root: Path, tmp_path: Path, spec: ToolSpec, path: str) -> None:
    args: dict[str, Any] = {"path": path}
    if spec is GLOB:
        args["pattern"] = "*"
    if spec is GREP:
        args["pattern"] = "needle"
    msg = fails(spec, args, root)
    assert "outside the project root" in msg and msg.startswith(spec.name)


def test_absolute_paths_inside_the_root_are_fine(root: Path, tmp_path: Path) -> None:
    assert run(GLOB, {"pattern": "*.py", "path": str(root / "src" / "lib")}, root).output == (
        "src/lib/util.py")
    evil = str(tmp_path / "proj-evil")  # shares the root's name as a prefix
    assert "outside the project root" in fails(GLOB, {"pattern": "*", "path": evil}, root)
