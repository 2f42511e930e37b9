"""`code_nav` through real language servers (pyright, typescript-language-server: tests/support/lsp_servers.py):
every reference of a function used across five files of a Python and of a TypeScript project — and not
the method of the same name elsewhere —, its definition, its type, a file's outline, a workspace search;
a rename preview that apply_patch applies cleanly; tree-sitter's answer by name when no server runs; and
the tool is allowed in plan mode."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from auger.protocol import events as ev
from tests.support.harness import drive, open_session
from tests.support.lsp_servers import lsp_table, servers_path
from tests.support.mock_openai import Reply, ToolCall

WAIT = "diagnostics_wait=180"  # code_nav waits at least 10 s, or this (a first analysis on a busy machine)
USERS = ("alpha", "beta", "gamma", "delta", "epsilon")
NONE = lsp_table(basedpyright={"disabled": True}, pyright={"disabled": True}, ruff={"disabled": True},
                 typescript={"disabled": True})


@pytest.fixture
def servers(monkeypatch) -> str:
    path = servers_path()
    monkeypatch.setenv("PATH", path)
    return path


@pytest.fixture
def py_project(project: Path) -> Path:
    (project / "geometry.py").write_text("def area(width: int, height: int) -> int:\n"
                                         '    """The size of a rectangle."""\n'
                                         "    return width * height\n")
    for n, name in enumerate(USERS):
        (project / f"{name}.py").write_text(f"from geometry import area\n\n\ndef {name}() -> int:\n"
                                            f"    return area({n}, 2) + area(1, {n})\n")
    (project / "rooms.py").write_text("class Room:\n    def area(self) -> int:\n        return 4\n\n\n"
                                      "print(Room().area())\n")  # the same name, another thing
    return project


@pytest.fixture
def ts_project(project: Path) -> Path:
    (project / "tsconfig.json").write_text('{"compilerOptions": {"strict": true, "target": "es2020"}}\n')
    (project / "geometry.ts").write_text("export function area(width: number, height: number): number {\n"
                                         "  return width * height;\n}\n")
    for n, name in enumerate(USERS):
        (project / f"{name}.ts").write_text(f'import {{ area }} from "./geometry";\n\n'
                                            f"export function {name}(): number {{\n"
                                            f"  return area({n}, 2) + area(1, {n});\n}}\n")
    (project / "rooms.ts").write_text("class Room {\n  area(): number { return 4; }\n}\n"
                                      "console.log(new Room().area());\n")
    return project


def calls(project: Path, server, *replies, overrides: tuple[str, ...] = (), tables: dict | None = None,
          ) -> list[ev.ToolCallEnded]:
    server.add(*replies, Reply(text="done"))

    async def main() -> list[ev.Event]:
        session, store = await open_session(project, server, project.parent / "s.db", "mode=auto",
                                            "approve_all=true", WAIT, *overrides, tables=tables)
        try:
            return (await asyncio.wait_for(drive(session, "go"), 600)).events
        finally:
            await store.aclose()

    return [e for e in asyncio.run(main()) if isinstance(e, ev.ToolCallEnded)]


def nav(**args) -> Reply:
    return Reply(tool_calls=[ToolCall("code_nav", args)])


def places(output: str) -> set[tuple[str, int]]:
    return {(m.group(1), int(m.group(2))) for m in re.finditer(r"^([\w./-]+):(\d+):", output, re.M)}


EXPECTED_PY = {("geometry.py", 1), *((f"{name}.py", line) for name in USERS for line in (1, 5))}
EXPECTED_TS = {("geometry.ts", 1), *((f"{name}.ts", line) for name in USERS for line in (1, 4))}


def test_every_reference_of_a_python_function_across_five_files(py_project, server, servers):
    by_position, by_name = calls(py_project, server, nav(op="references", path="geometry.py", line=1, column=5),
                                 nav(op="references", symbol="area", path="alpha.py", line=5))
    for call in (by_position, by_name):
        assert call.ok and places(call.output) == EXPECTED_PY, call.output
        assert "rooms.py" not in call.output  # a server knows which `area` it is
        assert "pyright" in call.output.splitlines()[0].lower()


def test_every_reference_of_a_typescript_function_across_five_files(ts_project, server, servers):
    (call,) = calls(ts_project, server, nav(op="references", symbol="area", path="geometry.ts"))
    assert call.ok and places(call.output) == EXPECTED_TS, call.output
    assert "rooms.ts" not in call.output and "(typescript)" in call.output.splitlines()[0]


def test_definition_hover_symbols_and_a_workspace_search(py_project, server, servers):
    definition, hover, symbols, search = calls(
        py_project, server, nav(op="definition", path="gamma.py", line=5, symbol="area"),
        nav(op="hover", path="gamma.py", line=5, symbol="area"),
        nav(op="symbols", path="rooms.py"),
        nav(op="workspace_symbols", symbol="gamma", path="gamma.py"))
    assert definition.output.startswith("geometry.py:1: def area(width: int, height: int) -> int:"), definition.output
    assert "def area(" in hover.output and "height: int" in hover.output and "The size of a rectangle" in hover.output
    assert "1 class Room" in symbols.output and "  2 method area" in symbols.output, symbols.output
    assert "gamma.py:4 function gamma" in search.output, search.output


def test_a_rename_preview_applies_cleanly_with_apply_patch(py_project, server, servers):
    """The preview changes nothing; sent back through apply_patch (as the shell's heredoc, which any model
    may use), it renames the function and all its uses, and only those."""
    before = {p.name: p.read_text() for p in py_project.glob("*.py")}

    def apply_preview(body: dict) -> Reply:
        preview = body["messages"][-1]["content"]
        patch = preview[preview.index("*** Begin Patch"):preview.index("*** End Patch") + len("*** End Patch")]
        return Reply(tool_calls=[ToolCall("shell", {"command": f"apply_patch <<'EOF'\n{patch}\nEOF"})])

    preview, applied = calls(py_project, server, nav(op="rename", path="geometry.py", line=1, symbol="area",
                                                     new_name="surface"), apply_preview)
    assert preview.ok and "Nothing was changed" in preview.output and "in 6 files" in preview.output, preview.output
    assert applied.ok, applied.output
    after = {p.name: p.read_text() for p in py_project.glob("*.py")}
    assert after["rooms.py"] == before["rooms.py"]
    for name, text in before.items():
        if name != "rooms.py":
            assert after[name] == re.sub(r"\barea\b", "surface", text), name


def test_a_typescript_rename_preview_applies_cleanly_too(ts_project, server, servers):
    before = {p.name: p.read_text() for p in ts_project.glob("*.ts")}

    def apply_preview(body: dict) -> Reply:
        preview = body["messages"][-1]["content"]
        patch = preview[preview.index("*** Begin Patch"):preview.index("*** End Patch") + len("*** End Patch")]
        return Reply(tool_calls=[ToolCall("shell", {"command": f"apply_patch <<'EOF'\n{patch}\nEOF"})])

    preview, applied = calls(ts_project, server, nav(op="rename", path="geometry.ts", line=1, symbol="area",
                                                     new_name="surface"), apply_preview)
    assert preview.ok and "in 6 files" in preview.output, preview.output
    assert applied.ok, applied.output
    after = {p.name: p.read_text() for p in ts_project.glob("*.ts")}
    assert after["rooms.ts"] == before["rooms.ts"]
    for name, text in before.items():
        if name != "rooms.ts":
            assert after[name] == re.sub(r"\barea\b", "surface", text), name


def test_without_a_server_tree_sitter_answers_by_name_and_says_so(py_project, server):
    (call,) = calls(py_project, server, nav(op="references", symbol="area", path="geometry.py"), tables=NONE)
    assert call.ok and "matched by name with tree-sitter" in call.output
    assert places(call.output) >= EXPECTED_PY  # every use, and the method of the same name too (by name)
    assert ("rooms.py", 2) in places(call.output)


def test_code_nav_and_repo_map_are_allowed_in_plan_mode(py_project, server):
    navigated, mapped = calls(py_project, server, nav(op="symbols", path="geometry.py"),
                              Reply(tool_calls=[ToolCall("repo_map", {"budget": 200})]),
                              overrides=("mode=plan",), tables=NONE)
    assert navigated.ok and navigated.denied is None and "1 function area" in navigated.output
    assert mapped.ok and mapped.denied is None and "geometry.py:" in mapped.output
