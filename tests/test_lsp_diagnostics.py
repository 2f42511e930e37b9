"""After an edit the model reads the errors that edit introduced, from real language servers (basedpyright or
pyright and `ruff server` for Python, typescript-language-server for TypeScript: tests/support/lsp_servers.py), in the
tool's result and typed on its `tool_call_ended`; pre-existing errors are not repeated, a fix says so, a
dead or slow server costs at most the bounded wait and one notice, and a session that never edits starts
no server.

The machine the suite runs on may be slow to start a server (pyright's first analysis, tsserver's first
program), so the tests of what a server finds wait long (`diagnostics_wait`); the tests of the bounded
wait use small servers of their own (tests/support/fake_lsp.py) that are dead or slow on purpose.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from auger.protocol import events as ev
from auger.protocol.vocab import Severity
from tests.support.harness import Follow, drive, open_session
from tests.support.lsp_servers import fake_server, lsp_table, servers_path
from tests.support.mock_openai import Reply, ToolCall

WAIT = "diagnostics_wait=180"  # real servers on a busy machine: their first analysis may take a while
AUTO = ("mode=auto", "approve_all=true", "diagnostics=true")

SHAPES = "def area(w: int, h: int) -> int:\n    return w * h\n\n\nold_mistake = not_defined_anywhere\n"
REPORT = "from shapes import area\n\nprint(area(2, 3))\nprint(undefined_before)\n"


@pytest.fixture
def servers(monkeypatch) -> str:
    path = servers_path()
    monkeypatch.setenv("PATH", path)
    return path


@pytest.fixture
def python_project(project: Path) -> Path:
    (project / "shapes.py").write_text(SHAPES)
    (project / "report.py").write_text(REPORT)
    return project


def run(project: Path, server, *overrides: str, tables: dict | None = None, prompts: tuple[str, ...] = ("go",),
        steps=None) -> list[ev.Event]:
    """One session on the mock model: the prompts (each a turn), then `steps(session, follow)` if given."""

    async def main() -> list[ev.Event]:
        session, store = await open_session(project, server, project.parent / "sessions.db", *AUTO, *overrides,
                                            tables=tables)
        try:
            if steps is None:
                return (await asyncio.wait_for(drive(session, *prompts), 600)).events
            follow = Follow(session)
            await asyncio.wait_for(steps(session, follow), 600)
            from auger.protocol.ops import Shutdown

            session.submit(Shutdown())
            await session.wait_closed()
            return follow.events
        finally:
            await store.aclose()

    return asyncio.run(main())


def ended(events: list[ev.Event]) -> list[ev.ToolCallEnded]:
    return [e for e in events if isinstance(e, ev.ToolCallEnded)]


def edit(path: str, old: str, new: str) -> Reply:
    return Reply(tool_calls=[ToolCall("edit_file", {"path": path, "old_string": old, "new_string": new})])


def test_an_undefined_name_is_told_once_and_typed(python_project, server, servers):
    """Two servers (pyright, ruff) report the one undefined name: it is told once, with file:line:column;
    the errors the files had before — one of them moved down by the edit — are not told."""
    server.add(edit("shapes.py", "    return w * h\n", "    # the area\n    return w * h * scale\n"),
               Reply(text="done"))
    call = ended(run(python_project, server, WAIT))[0]
    assert [(d.path, d.line, d.severity) for d in call.diagnostics] == [("shapes.py", 3, Severity.ERROR)]
    assert "scale" in call.diagnostics[0].message and call.diagnostics[0].column == 20
    assert "Diagnostics: this change introduced 1 error:\nshapes.py:3:20: error:" in call.output
    assert "undefined_before" not in call.output and "not_defined_anywhere" not in call.output


def test_a_type_error_in_a_caller_in_another_file_is_told(python_project, server, servers):
    server.add(edit("shapes.py", "h: int)", "h: int, depth: int)"), Reply(text="done"))
    call = ended(run(python_project, server, WAIT))[0]
    assert [(d.path, d.line) for d in call.diagnostics] == [("report.py", 3)]
    assert "depth" in call.diagnostics[0].message and call.diagnostics[0].source.lower() in ("pyright", "basedpyright")
    assert "report.py:3:7: error:" in call.output


def test_a_syntax_error_is_told_once_not_as_a_cascade(python_project, server, servers):
    broken = "def area(w: int, h: int -> int:\n    return w * h\n"
    server.add(Reply(tool_calls=[ToolCall("write_file", {"path": "shapes.py", "content": broken})]), Reply(text="done"))
    call = ended(run(python_project, server, WAIT))[0]
    assert len(call.diagnostics) == 1, call.output
    syntax = call.diagnostics[0]
    assert (syntax.path, syntax.line, syntax.severity) == ("shapes.py", 1, Severity.ERROR)
    assert syntax.code in ("syntax", "invalid-syntax")


def test_a_fix_says_so_and_a_harmless_edit_adds_nothing(python_project, server, servers):
    server.add(edit("report.py", "print(undefined_before)\n", "print('fixed')\n"),
               edit("report.py", "print('fixed')\n", "print('still fine')\n"),
               Reply(text="done"))
    fixed, harmless = ended(run(python_project, server, WAIT))
    assert fixed.diagnostics == [] and "Diagnostics: this change fixed 1 error: report.py:4" in fixed.output
    assert "undefined_before" in fixed.output and "it introduced none" in fixed.output
    assert harmless.diagnostics == [] and "Diagnostics" not in harmless.output


def test_a_shell_command_that_breaks_a_file_is_told(python_project, server, servers):
    """What a command changed comes from the turn's snapshots, with the file's text before it."""
    server.add(Reply(tool_calls=[ToolCall("shell", {"command": "sed -i 's/w \\* h/w * h * ratio/' shapes.py"})]),
               Reply(text="done"))
    call = ended(run(python_project, server, WAIT))[0]
    assert [(d.path, d.line) for d in call.diagnostics] == [("shapes.py", 2)], call.output
    assert "ratio" in call.diagnostics[0].message


def test_typescript_a_broken_caller_in_another_file(project, server, servers):
    (project / "tsconfig.json").write_text('{"compilerOptions": {"strict": true, "target": "es2020"}}\n')
    (project / "shapes.ts").write_text("export function area(w: number, h: number): number {\n  return w * h;\n}\n")
    (project / "report.ts").write_text('import { area } from "./shapes";\nconsole.log(area(2, 3));\n'
                                       'const before: number = "a pre-existing error";\n')
    server.add(edit("shapes.ts", "h: number)", "h: number, d: number)"),
               edit("shapes.ts", "return w * h;", "return (w * h;"), Reply(text="done"))
    call, syntax = ended(run(project, server, WAIT))
    assert [(d.path, d.line, d.source) for d in call.diagnostics] == [("report.ts", 2, "typescript")], call.output
    assert "Expected 3 arguments, but got 2" in call.diagnostics[0].message
    assert "pre-existing" not in call.output
    assert [(d.path, d.line, d.code) for d in syntax.diagnostics] == [("shapes.ts", 2, "syntax")], syntax.output


def test_diagnostics_off_starts_no_server(python_project, server, servers):
    server.add(edit("shapes.py", "w * h", "w * h * scale"), Reply(text="done"))

    async def steps(session, follow):
        from auger.protocol.ops import UserTurn

        session.submit(UserTurn("go"))
        await follow.until(ev.TurnEnded)
        assert session.code_intel._servers is None  # nothing of the servers was even made

    events = run(python_project, server, "diagnostics=false", steps=steps)
    assert ended(events)[0].diagnostics == [] and "Diagnostics" not in ended(events)[0].output


def test_a_session_that_only_reads_starts_no_server(python_project, server, servers):
    server.add(Reply(tool_calls=[ToolCall("read_file", {"path": "shapes.py"}),
                                 ToolCall("grep", {"pattern": "area"})]), Reply(text="done"))

    async def steps(session, follow):
        from auger.protocol.ops import UserTurn

        session.submit(UserTurn("look"))
        await follow.until(ev.TurnEnded)
        assert session.code_intel._servers is None and session.code_intel._diagnostics is None

    run(python_project, server, steps=steps)


# --- servers that are dead or slow ----------------------------------------------------------------------------


def only(**servers: dict) -> dict:
    """Tables with these servers and none of the defaults (so only the fakes answer for Python)."""
    return lsp_table(basedpyright={"disabled": True}, pyright={"disabled": True}, ruff={"disabled": True},
                     **servers)


def test_a_dead_server_is_one_notice_and_costs_nothing(python_project, server):
    server.add(edit("shapes.py", "w * h", "w * h  # BROKEN"), edit("shapes.py", "# BROKEN", "# BROKEN!"),
               Reply(text="done"))
    first, second = ended(run(python_project, server, "diagnostics_wait=30", tables=only(dead=fake_server("dead"))))
    assert "Diagnostics: dead did not start" in first.output or "exited with status 3" in first.output, first.output
    assert "this server always fails" in first.output
    assert "Diagnostics" not in second.output  # told once
    assert first.duration_ms < 10_000 and second.duration_ms < 5_000


@pytest.mark.parametrize("behaviour", ["slow", "mute"])
def test_a_slow_server_costs_at_most_the_bounded_wait_and_a_notice(python_project, server, behaviour):
    """`slow` never answers for diagnostics, `mute` never answers `initialize`: the first edit waits the
    bounded time and says so; the next does not wait for a server still busy with the first."""
    server.add(edit("shapes.py", "w * h", "w * h  # BROKEN"), edit("shapes.py", "# BROKEN", "# BROKEN!"),
               Reply(text="done"))
    started = time.monotonic()
    first, second = ended(run(python_project, server, "diagnostics_wait=1",
                              tables=only(stuck=fake_server(behaviour))))
    assert 900 <= first.duration_ms < 3_000, first.duration_ms
    assert "Diagnostics: stuck did not finish within 1 s" in first.output
    assert second.duration_ms < 1_000 and "stuck is still busy with an earlier change" in second.output
    assert time.monotonic() - started < 60  # the session's end does not wait for it either


def test_what_a_check_finds_after_its_result_went_back_comes_with_a_later_one(python_project, server):
    server.add(edit("shapes.py", "w * h", "w * h  # BROKEN"),
               Reply(tool_calls=[ToolCall("shell", {"command": "sleep 6"})]),
               Reply(text="done"))
    first, later = ended(run(python_project, server, "diagnostics_wait=0.5", tables=only(late=fake_server("late"))))
    assert "late did not finish within 0.5 s" in first.output and first.diagnostics == []
    assert [(d.path, d.line, d.message) for d in later.diagnostics] == [("shapes.py", 2, "this line is BROKEN")]
    assert "Diagnostics of an earlier change (shapes.py), found since: 1 error still there:" in later.output


def test_an_unknown_or_bad_lsp_table_is_told_and_left_out(python_project, server):
    tables = only(good=fake_server("pull"), bad={"command": "not a list", "languages": ["python"]},
                  odd={"command": ["x"], "languages": ["ocaml"]})
    server.add(edit("shapes.py", "w * h", "w * h  # BROKEN"), Reply(text="done"))
    call = ended(run(python_project, server, "diagnostics_wait=30", tables=tables))[0]
    assert "[lsp.bad]: `command` must be a non-empty list of strings (ignored)" in call.output
    assert "[lsp.odd]: language(s) ocaml need `extensions`" in call.output
    assert [d.message for d in call.diagnostics] == ["this line is BROKEN"]


def test_a_project_config_cannot_name_a_language_server(tmp_path):
    from auger.config import load_config

    project = tmp_path / "p"
    (project / ".auger").mkdir(parents=True)
    (project / ".auger" / "config.toml").write_text('[lsp.evil]\ncommand = ["sh", "-c", "touch /tmp/x"]\n'
                                                    'languages = ["python"]\n')
    config = load_config([], env={}, config_file=tmp_path / "none.toml", project_dir=project)
    assert "lsp" not in config.tables
    assert any("[lsp] ignored: a project may not choose commands auger starts" in w for w in config.warnings)


# --- the servers' lives ---------------------------------------------------------------------------------------


def test_a_server_that_died_is_started_again_and_ends_with_the_session(python_project, server):
    """Killed between two edits, the server is started again for the second, with a notice; the session's
    end leaves none running."""
    import signal

    from tests.support.agents import pids_of

    marker = f"marker-{python_project.name}-{time.monotonic_ns()}"
    server.add(edit("shapes.py", "w * h", "w * h  # BROKEN"), Reply(text="one"),
               edit("report.py", "print(area(2, 3))", "print(area(2, 3))  # BROKEN"), Reply(text="two"))

    async def steps(session, follow):
        from auger.protocol.ops import UserTurn

        session.submit(UserTurn("first"))
        await follow.until(ev.TurnEnded)
        (pid,) = pids_of(marker)
        os.kill(pid, signal.SIGKILL)
        session.submit(UserTurn("second"))
        await follow.until(ev.TurnEnded)
        assert session.code_intel.servers.starts == 2

    events = run(python_project, server, "diagnostics_wait=30", tables=only(fake=fake_server("pull", marker)),
                 steps=steps)
    first, second = ended(events)
    assert [d.path for d in first.diagnostics] == ["shapes.py"]
    assert [d.path for d in second.diagnostics] == ["report.py"]
    assert "fake stopped" in second.output and "starting it again" in second.output
    assert pids_of(marker) == []


def test_an_idle_server_stops_and_the_next_edit_starts_it(python_project, server):
    from tests.support.agents import pids_of

    marker = f"marker-{python_project.name}-{time.monotonic_ns()}"
    server.add(edit("shapes.py", "w * h", "w * h  # BROKEN"), Reply(text="one"),
               edit("report.py", "print(area(2, 3))", "print(area(2, 3))  # BROKEN"), Reply(text="two"))

    async def steps(session, follow):
        from auger.protocol.ops import UserTurn

        session.submit(UserTurn("first"))
        await follow.until(ev.TurnEnded)
        assert len(pids_of(marker)) == 1
        deadline = time.monotonic() + 20
        while pids_of(marker) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert pids_of(marker) == []  # stopped once idle
        session.submit(UserTurn("second"))
        await follow.until(ev.TurnEnded)
        assert session.code_intel.servers.starts == 2

    events = run(python_project, server, "diagnostics_wait=30", "lsp_idle_timeout=1",
                 tables=only(fake=fake_server("pull", marker)), steps=steps)
    assert [d.path for d in ended(events)[1].diagnostics] == ["report.py"]
    assert "Diagnostics: fake" not in ended(events)[1].output  # an idle stop is no failure


def test_a_sub_agent_in_the_sessions_tree_shares_its_servers(python_project, server):
    from tests.support.agents import Routes, run_parent, spawn

    marker = f"marker-{python_project.name}-{time.monotonic_ns()}"
    Routes({
        "go": [edit("shapes.py", "w * h", "w * h  # BROKEN"), Reply(tool_calls=[spawn("fix the report")]),
               Reply(text="done")],
        "fix the report": [edit("report.py", "print(area(2, 3))", "print(area(2, 3))  # BROKEN"),
                           Reply(text="edited")],
    }).install(server)
    seen = run_parent(python_project, server, "go", overrides=(*AUTO, "diagnostics_wait=30"),
                      tables=only(fake=fake_server("pull", marker)))
    by_child = {e.event.call_id: (e.parent_call_id, e.event) for e in seen if isinstance(e.event, ev.ToolCallEnded)
                and e.event.name == "edit_file"}
    paths = sorted((parent is not None, [d.path for d in event.diagnostics]) for parent, event in by_child.values())
    assert paths == [(False, ["shapes.py"]), (True, ["report.py"])]
    assert sum(1 for e in seen if isinstance(e.event, ev.ToolCallEnded) and "did not start" in e.event.output) == 0


# --- every kind of change, the caps, a missing server -------------------------------------------------------


def test_a_patch_and_a_program_are_checked_like_any_edit(python_project, server):
    """apply_patch (offered to an OpenAI model) names its files; run_code's program writes one itself (found by
    the turn's snapshots)."""
    patch = ("*** Begin Patch\n*** Update File: shapes.py\n@@\n-    return w * h\n+    return w * h  # BROKEN\n"
             "*** Add File: extra.py\n+y = 2  # BROKEN\n*** End Patch\n")
    program = "import pathlib\npathlib.Path('report.py').write_text('print(1)  # BROKEN\\n')\nprint('wrote')\n"
    server.add(Reply(tool_calls=[ToolCall("apply_patch", {"patch": patch})]),
               Reply(tool_calls=[ToolCall("run_code", {"code": program})]), Reply(text="done"))
    patched, programmed = ended(run(python_project, server, "diagnostics_wait=30", "code_mode=true", "model=gpt-5",
                                    tables=only(fake=fake_server("pull"))))
    assert [(d.path, d.line) for d in patched.diagnostics] == [("extra.py", 1), ("shapes.py", 2)], patched.output
    assert [(d.path, d.line) for d in programmed.diagnostics] == [("report.py", 1)], programmed.output


def test_many_problems_are_capped_and_the_rest_counted(python_project, server):
    content = "".join(f"x{n} = {n}  # BROKEN\n" for n in range(30))
    server.add(Reply(tool_calls=[ToolCall("write_file", {"path": "many.py", "content": content})]), Reply(text="done"))
    call = ended(run(python_project, server, "diagnostics_wait=30", tables=only(fake=fake_server("pull"))))[0]
    told = call.output[call.output.index("Diagnostics"):].splitlines()
    assert told[0] == "Diagnostics: this change introduced 30 errors:"
    assert len(told) == 22 and told[-1] == "… and 10 more (10 in many.py)", told
    assert len(call.diagnostics) == 30  # the event carries them all


def test_a_language_without_a_server_here_is_one_notice(project, server):
    (project / "main.go").write_text("package main\n")
    server.add(Reply(tool_calls=[ToolCall("write_file", {"path": "main.go", "content": "package main\n\n"})]),
               Reply(tool_calls=[ToolCall("write_file", {"path": "main.go", "content": "package main\n"})]),
               Reply(text="done"))
    first, second = ended(run(project, server, tables=lsp_table(gopls={"command": ["gopls-not-installed-here"]})))
    assert first.output.endswith("Diagnostics: no Go language server found: install one of gopls-not-installed-here, "
                                 "or name one in [lsp.NAME] command = [...]")
    assert "Diagnostics" not in second.output


def test_a_server_that_only_publishes_is_waited_for_by_version(python_project, server):
    server.add(edit("shapes.py", "w * h", "w * h  # BROKEN"), edit("shapes.py", "  # BROKEN", ""),
               Reply(text="done"))
    broke, fixed = ended(run(python_project, server, "diagnostics_wait=30", tables=only(fake=fake_server("push"))))
    assert [(d.path, d.line) for d in broke.diagnostics] == [("shapes.py", 2)], broke.output
    assert "this change fixed 1 error" in fixed.output


def test_pending_mode_checks_the_copy_its_tools_change(python_project, server):
    """In pending mode the tools change a copy of the project; the servers read that copy, and the real
    file stays as it was."""
    server.add(edit("shapes.py", "w * h", "w * h  # BROKEN"), Reply(text="done"))
    call = ended(run(python_project, server, "pending=true", "diagnostics_wait=30",
                     tables=only(fake=fake_server("pull"))))[0]
    assert [(d.path, d.line) for d in call.diagnostics] == [("shapes.py", 2)], call.output
    assert "BROKEN" not in (python_project / "shapes.py").read_text()


def test_a_secret_a_server_quotes_is_redacted_in_the_event_as_in_the_output(python_project, server):
    """A server reads the project: what it says is text from outside, redacted like any output — the typed
    diagnostics on tool_call_ended included."""
    token = "ghp_R7x2Kq9LmN4pV8sT1wY6zB3cD5fG0hJ2kL4m"
    server.add(Reply(tool_calls=[ToolCall("write_file", {"path": "creds.py", "content": f'T = "{token}"  # BROKEN\n'})]),
               Reply(text="done"))
    events = run(python_project, server, "diagnostics_wait=30", tables=only(fake=fake_server("quote")))
    call = ended(events)[0]
    assert len(call.diagnostics) == 1 and "[secret:github-token" in call.diagnostics[0].message
    assert token not in call.diagnostics[0].message and token not in call.output


def test_a_protected_file_is_never_read_sent_to_a_server_or_mapped(python_project, server):
    """A `.py` file the project protects (.augerignore) changed by a command: no server is told of it, and
    neither repo_map nor code_nav's name matching shows what it holds."""
    (python_project / ".augerignore").write_text("vault.py\n")
    (python_project / "vault.py").write_text("def secret_helper_name():\n    return 1\n")
    server.add(Reply(tool_calls=[ToolCall("shell", {"command": "echo 'x = 1  # BROKEN' >> vault.py"})]),
               Reply(tool_calls=[ToolCall("repo_map", {"budget": 2000}),
                                 ToolCall("code_nav", {"op": "workspace_symbols", "symbol": "secret_helper"})]),
               Reply(text="done"))
    calls = ended(run(python_project, server, "diagnostics_wait=30", tables=only(fake=fake_server("pull"))))
    (changed,), (mapped,), (searched,) = ([c for c in calls if c.name == name]
                                          for name in ("shell", "repo_map", "code_nav"))
    assert changed.diagnostics == [] and "Diagnostics" not in changed.output
    assert "vault.py" not in mapped.output and "shapes.py" in mapped.output
    assert "secret_helper_name" not in searched.output
