"""apply_patch against the behaviour of Codex's own apply_patch, which models are trained on.

Each case is a tree before, a patch, and the whole tree after (bytes, every file), applied for real
beneath a temporary root. The cases follow the scenarios and unit tests of Codex's apply-patch
(adding, deleting, moving, overwriting; padded markers; pure additions; end-of-file hunks; CRLF,
mixed and old-Mac line breaks, scenarios 023 and 024 among them; a UTF-8 byte order mark; hunks out
of file order; stacked `@@` headers). Where auger decides
otherwise on purpose the case says so: a patch is all or nothing across its files, and absolute
paths are refused.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from auger.changes.apply_patch import PatchError, apply_patch
from auger.policy.fs import RootHandle


@dataclass(frozen=True)
class Case:
    name: str
    before: dict[str, bytes]
    patch: str
    after: dict[str, bytes] | None = None  # None: unchanged (the patch must fail)
    error: str = ""  # a part of the error message, for a patch that must fail
    why: str = field(default="", compare=False)


def envelope(*body: str) -> str:
    return "\n".join(["*** Begin Patch", *body, "*** End Patch"]) + "\n"


CASES = [
    Case("add_file", {}, envelope("*** Add File: bar.md", "+This is a new file"),
         {"bar.md": b"This is a new file\n"}),
    Case("multiple_operations", {"delete.txt": b"obsolete\n", "modify.txt": b"line1\nline2\n"},
         envelope("*** Add File: nested/new.txt", "+created", "*** Delete File: delete.txt",
                  "*** Update File: modify.txt", "@@", "-line2", "+changed"),
         {"nested/new.txt": b"created\n", "modify.txt": b"line1\nchanged\n"}),
    Case("multiple_chunks", {"multi.txt": b"line1\nline2\nline3\nline4\n"},
         envelope("*** Update File: multi.txt", "@@", "-line2", "+changed2", "@@", "-line4", "+changed4"),
         {"multi.txt": b"line1\nchanged2\nline3\nchanged4\n"}),
    Case("move_to_new_directory", {"old/name.txt": b"old content\n", "old/other.txt": b"stays\n"},
         envelope("*** Update File: old/name.txt", "*** Move to: renamed/dir/name.txt", "@@", "-old content",
                  "+new content"),
         {"old/other.txt": b"stays\n", "renamed/dir/name.txt": b"new content\n"}),
    Case("rejects_empty_patch", {"foo.txt": b"stays\n"}, "*** Begin Patch\n*** End Patch\n",
         error="changes no files"),
    Case("rejects_missing_context", {"modify.txt": b"line1\nline2\n"},
         envelope("*** Update File: modify.txt", "@@", "-missing", "+changed"), error="could not be found"),
    Case("rejects_missing_file_delete", {"foo.txt": b"stays\n"}, envelope("*** Delete File: missing.txt"),
         error="cannot delete missing.txt"),
    Case("rejects_empty_update_hunk", {"foo.txt": b"stays\n"}, envelope("*** Update File: foo.txt"),
         error="has no hunks"),
    Case("requires_existing_file_for_update", {"foo.txt": b"stays\n"},
         envelope("*** Update File: missing.txt", "@@", "-old", "+new"), error="cannot update missing.txt"),
    Case("move_overwrites_existing_destination",
         {"old/name.txt": b"from\n", "old/other.txt": b"stays\n", "renamed/dir/name.txt": b"existing\n"},
         envelope("*** Update File: old/name.txt", "*** Move to: renamed/dir/name.txt", "@@", "-from", "+new"),
         {"old/other.txt": b"stays\n", "renamed/dir/name.txt": b"new\n"}),
    Case("add_overwrites_existing_file", {"duplicate.txt": b"old content\n"},
         envelope("*** Add File: duplicate.txt", "+new content"), {"duplicate.txt": b"new content\n"}),
    Case("delete_directory_fails", {"dir/foo.txt": b"stays\n"}, envelope("*** Delete File: dir"),
         error="not a regular file"),
    Case("rejects_invalid_hunk_header", {"foo.txt": b"stays\n"}, envelope("*** Frobnicate File: foo"),
         error="is not a file header"),
    Case("update_file_appends_trailing_newline", {"no_newline.txt": b"no newline at end"},
         envelope("*** Update File: no_newline.txt", "@@", "-no newline at end", "+first line", "+second line"),
         {"no_newline.txt": b"first line\nsecond line\n"}),
    Case("failure_after_partial_success_changes_nothing", {},
         envelope("*** Add File: created.txt", "+hello", "*** Update File: missing.txt", "@@", "-old", "+new"),
         error="cannot update missing.txt",
         why="auger applies a patch all or nothing; Codex keeps created.txt"),
    Case("pure_addition_update_chunk", {"input.txt": b"line1\nline2\n"},
         envelope("*** Update File: input.txt", "@@", "+added line 1", "+added line 2"),
         {"input.txt": b"line1\nline2\nadded line 1\nadded line 2\n"}),
    Case("whitespace_padded_hunk_header", {"foo.txt": b"old\n"},
         envelope("  *** Update File: foo.txt", "@@", "-old", "+new"), {"foo.txt": b"new\n"}),
    Case("whitespace_padded_patch_markers", {"file.txt": b"one\n"},
         " *** Begin Patch\n*** Update File: file.txt\n@@\n-one\n+two\n*** End Patch \n", {"file.txt": b"two\n"}),
    Case("whitespace_padded_patch_marker_lines", {"file.txt": b"one\n"},
         "*** Begin Patch \n*** Update File: file.txt\n@@\n-one\n+two\n *** End Patch\n", {"file.txt": b"two\n"}),
    Case("unicode_simple", {"foo.txt": "line1\nnaïve café\nline3\n".encode()},
         "*** Begin Patch\n*** Update File: foo.txt\n@@\n line1\n-naïve café\n+naïve café ✅\n*** End Patch \n",
         {"foo.txt": "line1\nnaïve café ✅\nline3\n".encode()}),
    Case("delete_file_success", {"keep.txt": b"keep\n", "obsolete.txt": b"old\n"},
         envelope("*** Delete File: obsolete.txt"), {"keep.txt": b"keep\n"}),
    Case("update_file_deletion_only", {"lines.txt": b"line1\nline2\nline3\n"},
         envelope("*** Update File: lines.txt", "@@", " line1", "-line2", " line3"), {"lines.txt": b"line1\nline3\n"}),
    Case("update_file_end_of_file_marker", {"tail.txt": b"first\nsecond\n"},
         envelope("*** Update File: tail.txt", "@@", " first", "-second", "+second updated", "*** End of File"),
         {"tail.txt": b"first\nsecond updated\n"}),
    # line breaks
    Case("keeps_crlf_of_the_file", {"crlf.txt": b"one\r\ntwo\r\nthree\r\n"},
         envelope("*** Update File: crlf.txt", "@@", "-one", "+uno", "@@", " two", "+", "+between", " three"),
         {"crlf.txt": b"uno\r\ntwo\r\n\r\nbetween\r\nthree\r\n"}),
    Case("keeps_change_order_with_repeated_lines", {"repeated.txt": b"a\nb\n"},
         envelope("*** Update File: repeated.txt", "@@", "-a", "-b", "+b", "+b", "+a"), {"repeated.txt": b"b\nb\na\n"}),
    Case("keeps_a_repeated_context_lines_own_ending", {"repeated_context.txt": b"same\r\nsame\n"},
         envelope("*** Update File: repeated_context.txt", "@@", "-same", " same"),
         {"repeated_context.txt": b"same\n"}),
    Case("keeps_untouched_mixed_line_endings", {"mixed.txt": b"one\r\ntwo\nthree\r\nfour\n"},
         envelope("*** Update File: mixed.txt", "@@", " one", " two", "-three", "+THREE", " four"),
         {"mixed.txt": b"one\r\ntwo\nTHREE\r\nfour\n"}),
    Case("uses_crlf_for_a_new_final_line_break", {"no_trailing_newline.txt": b"one\r\ntwo"},
         envelope("*** Update File: no_trailing_newline.txt", "@@", "-one", "+ONE"),
         {"no_trailing_newline.txt": b"ONE\r\ntwo\r\n"}),
    Case("a_carriage_return_before_crlf_ends_a_line", {"cr.txt": b"foo\r\r\nbar\r\n"},
         envelope("*** Update File: cr.txt", "@@", "+BAZ", "*** End of File"), {"cr.txt": b"foo\r\r\nbar\r\nBAZ\r"},
         why="lines end at CR, CRLF or LF: 'foo' ends at the lone CR, the file's first break, which an "
             "added line takes"),
    # scenarios 023 and 024 of the reference
    Case("preserves_crlf_line_endings", {"lines.txt": b"one\r\ntwo\r\nthree\r\n"},
         envelope("*** Update File: lines.txt", "@@", "-one", "+ONE", " two", "+between", " three"),
         {"lines.txt": b"ONE\r\ntwo\r\nbetween\r\nthree\r\n"}),
    Case("preserves_mixed_line_endings", {"lines.txt": b"one\r\ntwo\rthree\nfour\r\n"},
         envelope("*** Update File: lines.txt", "@@", " one", " two", "-three", "+THREE", " four"),
         {"lines.txt": b"one\r\ntwo\rTHREE\r\nfour\r\n"}),
    Case("a_lone_carriage_return_ends_a_line_in_a_file_of_lf_lines", {"lf_cr.txt": b"a\nb\rc\nd\n"},
         envelope("*** Update File: lf_cr.txt", "@@", " b", "-c", "+C", " d"), {"lf_cr.txt": b"a\nb\rC\nd\n"}),
    Case("every_kind_of_break_kept_around_an_insertion", {"all.txt": b"x\ry\r\nz\n"},
         envelope("*** Update File: all.txt", "@@", " x", "+new", " y", " z"), {"all.txt": b"x\rnew\ry\r\nz\n"}),
    Case("unterminated_last_line_after_a_lone_carriage_return", {"tail.txt": b"one\rtwo"},
         envelope("*** Update File: tail.txt", "@@", " one", "-two", "+TWO"), {"tail.txt": b"one\rTWO\r"}),
    Case("preserves_utf8_bom_and_crlf", {"bom.txt": "\ufefffoo\r\n\u4e2d\u6587\r\n".encode()},
         envelope("*** Update File: bom.txt", "@@", "-foo", "+bar", " \u4e2d\u6587"),
         {"bom.txt": "\ufeffbar\r\n\u4e2d\u6587\r\n".encode()}),
    Case("lone_carriage_returns_end_lines_in_a_file_that_uses_them", {"mac.txt": b"one\rtwo\rthree\r"},
         envelope("*** Update File: mac.txt", "@@", " one", "-two", "+TWO", "+2b", " three"),
         {"mac.txt": b"one\rTWO\r2b\rthree\r"}),
    # the unit tests of the reference implementation
    Case("update_modifies_content", {"update.txt": b"foo\nbar\n"},
         envelope("*** Update File: update.txt", "@@", " foo", "-bar", "+baz"), {"update.txt": b"foo\nbaz\n"}),
    Case("update_can_move_file", {"src.txt": b"line\n"},
         envelope("*** Update File: src.txt", "*** Move to: dst.txt", "@@", "-line", "+line2"),
         {"dst.txt": b"line2\n"}),
    Case("multiple_update_chunks_apply_to_one_file", {"multi.txt": b"foo\nbar\nbaz\nqux\n"},
         envelope("*** Update File: multi.txt", "@@", " foo", "-bar", "+BAR", "@@", " baz", "-qux", "+QUX"),
         {"multi.txt": b"foo\nBAR\nbaz\nQUX\n"}),
    Case("interleaved_changes", {"interleaved.txt": b"a\nb\nc\nd\ne\nf\n"},
         envelope("*** Update File: interleaved.txt", "@@", " a", "-b", "+B", "@@", " c", " d", "-e", "+E",
                  "@@", " f", "+g", "*** End of File"),
         {"interleaved.txt": b"a\nB\nc\nd\nE\nf\ng\n"}),
    Case("pure_addition_chunk_followed_by_removal", {"panic.txt": b"line1\nline2\nline3\n"},
         envelope("*** Update File: panic.txt", "@@", "+after-context", "+second-line",
                  "@@", " line1", "-line2", "-line3", "+line2-replacement"),
         {"panic.txt": b"line1\nline2-replacement\nafter-context\nsecond-line\n"}),
    Case("update_line_with_unicode_dash",
         {"unicode.py": "import asyncio  # local import \u2013 avoids top\u2011level dep\n".encode()},
         envelope("*** Update File: unicode.py", "@@", "-import asyncio  # local import - avoids top-level dep",
                  "+import asyncio  # HELLO"),
         {"unicode.py": b"import asyncio  # HELLO\n"}),
    Case("first_line_replacement", {"first.txt": b"foo\nbar\nbaz\n"},
         envelope("*** Update File: first.txt", "@@", "-foo", "+FOO", " bar", ""), {"first.txt": b"FOO\nbar\nbaz\n"}),
    Case("last_line_replacement", {"last.txt": b"foo\nbar\nbaz\n"},
         envelope("*** Update File: last.txt", "@@", " foo", " bar", "-baz", "+BAZ", ""),
         {"last.txt": b"foo\nbar\nBAZ\n"}),
    Case("insert_at_eof_with_blank_lines_before_end_patch", {"insert.txt": b"foo\nbar\nbaz\n"},
         envelope("*** Update File: insert.txt", "@@", "+quux", "*** End of File", "", ""),
         {"insert.txt": b"foo\nbar\nbaz\nquux\n"}),
    Case("blank_lines_after_end_of_file_before_the_next_file", {"a.txt": b"a\n", "b.txt": b"b\n"},
         envelope("*** Update File: a.txt", "@@", "-a", "+A", "*** End of File", "", "*** Update File: b.txt",
                  "@@", "-b", "+B"),
         {"a.txt": b"A\n", "b.txt": b"B\n"}),
    Case("first_hunk_without_a_header", {"file2.py": b"import foo\n"},
         envelope("*** Update File: file2.py", " import foo", "+bar"), {"file2.py": b"import foo\nbar\n"}),
    Case("update_followed_by_add", {"file.py": b"x\n"},
         envelope("*** Update File: file.py", "@@", "+line", "*** Add File: other.py", "+content"),
         {"file.py": b"x\nline\n", "other.py": b"content\n"}),
    Case("heredoc_markers_around_the_patch", {"file2.py": b"import foo\n"},
         "<<'EOF'\n" + envelope("*** Update File: file2.py", " import foo", "+bar") + "EOF\n",
         {"file2.py": b"import foo\nbar\n"}),
    Case("heredoc_markers_must_match", {"file2.py": b"import foo\n"},
         "<<\"EOF'\n" + envelope("*** Update File: file2.py", " import foo", "+bar") + "EOF\n",
         error="must start with"),
    Case("end_of_file_marker_without_lines", {"foo.txt": b"stays\n"},
         envelope("*** Update File: foo.txt", "@@", "*** End of File"), error="the hunk has no lines"),
    Case("stacked_headers_narrow_the_search",
         {"m.py": b"class A:\n    def m(self):\n        return 1\nclass B:\n    def m(self):\n        return 1\n"},
         envelope("*** Update File: m.py", "@@ class B:", "@@     def m(self):", "-        return 1",
                  "+        return 2"),
         {"m.py": b"class A:\n    def m(self):\n        return 1\nclass B:\n    def m(self):\n        return 2\n"}),
    # hunks out of the file's order fail, saying so, as the reference does
    Case("hunk_whose_lines_occur_only_earlier", {"o.txt": b"a\nb\nc\nd\n"},
         envelope("*** Update File: o.txt", "@@", "-d", "+D", "@@", "-b", "+B"),
         error="they match only earlier, at line 2"),
    Case("header_that_occurs_only_earlier", {"o.py": b"def f():\n    x = 1\ndef g():\n    y = 2\n"},
         envelope("*** Update File: o.py", "@@ def g():", "-    y = 2", "+    y = 3", "@@ def f():", "-    x = 1",
                  "+    x = 0"),
         error="'@@ def f():' could not be found after line 4"),
    Case("absolute_paths_are_refused", {}, envelope("*** Add File: /tmp/add.txt", "+ab"), error="is absolute",
         why="auger takes paths relative to the project root only; Codex writes absolute paths"),
]


def tree(root: Path) -> dict[str, bytes]:
    """Every file beneath `root`, by relative path."""
    out = {}
    for dirpath, _, names in os.walk(root):
        for name in names:
            path = Path(dirpath, name)
            out[path.relative_to(root).as_posix()] = path.read_bytes()
    return out


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_the_reference_behaviour(case: Case, tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    for rel, data in case.before.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    handle = RootHandle(root)
    try:
        if case.after is None:
            with pytest.raises(PatchError) as info:
                apply_patch(handle, case.patch)
            assert case.error in str(info.value), str(info.value)
        else:
            apply_patch(handle, case.patch)
    finally:
        handle.close()
    assert tree(root) == (case.before if case.after is None else case.after)
