"""Per-turn snapshots, diffs and undo through the real session: tools and shell commands change a real
git repository, `undo` puts back the exact tree (bytes and modes) without touching the user's git
state, a later external edit makes it refuse, redo re-applies, and the model is told."""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path

from auger.protocol import events as ev
from auger.protocol.ops import Redo, Shutdown, Undo
from tests.support.trees import git, tree_state
from tests.support.harness import auger_cli, follow_session, open_session, run_session
from tests.support.mock_openai import Reply, ToolCall




def git_state(root: Path) -> dict[str, str]:
    return {"index": (root / ".git/index").read_bytes().hex(), "refs": git(root, "show-ref"),
            "stash": git(root, "stash", "list"), "reflog": git(root, "reflog", "--all"),
            "branches": git(root, "branch", "-a")}


def make_repo(root: Path) -> None:
    (root / "src").mkdir()
    (root / "src/app.py").write_text("def main():\n    return 'old'\n")
    (root / "README.md").write_text("hello\n")
    (root / "doomed.txt").write_text("to be removed\n")
    (root / "moved.txt").write_text("to be moved\n")
    (root / "gitmoved.txt").write_text("git mv me\n")
    (root / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (root / "run.sh").chmod(0o755)
    (root / "private.txt").write_text("secret\n")
    (root / "private.txt").chmod(0o600)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "initial")
    (root / "README.md").write_text("hello\nstaged\n")
    git(root, "add", "README.md")
    (root / "stashed.txt").write_text("x\n")
    git(root, "add", "stashed.txt")
    git(root, "stash", "-q")
    git(root, "branch", "feature")


SHELL_STEPS = [
    "sed -i 's/hello/HELLO/' README.md",
    "rm doomed.txt",
    "mv moved.txt sub_moved.txt",
    "git mv gitmoved.txt renamed_by_git.txt",
    "chmod 644 run.sh && chmod 644 private.txt",
    "mkdir -p gen/a gen/b && for i in 1 2 3; do echo $i > gen/a/f$i.txt; echo $i > gen/b/g$i.txt; done",
]


def editing_turn(server) -> None:
    calls = [ToolCall("write_file", {"path": "src/new.py", "content": "print('new')\n"}),
             ToolCall("read_file", {"path": "src/app.py"})]
    server.add(Reply(tool_calls=calls),
               Reply(tool_calls=[ToolCall("edit_file", {"path": "src/app.py", "old_string": "'old'",
                                                         "new_string": "'new'"})]),
               *[Reply(tool_calls=[ToolCall("shell", {"command": c})]) for c in SHELL_STEPS],
               Reply(text="all done"))


def op(project: Path, server, session_id: str, operation) -> list[ev.Event]:
    """Resume the session, submit one op, read its events until it is answered, shut down."""

    async def steps(session, follow) -> None:
        session.submit(operation)
        await follow.until((ev.TurnUndone, ev.WarningEvent))

    return follow_session(project, server, steps, resume=session_id)


def test_undo_restores_the_exact_tree_and_leaves_git_alone_then_redo_reapplies(project, server):
    make_repo(project)
    before, git_before = tree_state(project), git_state(project)
    editing_turn(server)
    run = run_session(project, server, "change things")
    assert run.ended.reason == "complete"
    outputs = [m["content"] for m in server.chat_requests[-1].messages if m["role"] == "tool"]
    shell_outputs = [o for o in outputs if o.startswith("Exit code")]
    assert len(shell_outputs) == len(SHELL_STEPS) and all(o.startswith("Exit code: 0 ") for o in shell_outputs), \
        shell_outputs
    after = tree_state(project)
    assert after != before and "renamed_by_git.txt" in after and "gen/b/g3.txt" in after
    diff = run.of(ev.TurnDiff)
    assert len(diff) == 1 and run.events.index(diff[0]) < run.events.index(run.ended)
    kinds = {f.path: f.kind for f in diff[0].files}
    assert kinds["src/new.py"] == "added" and kinds["doomed.txt"] == "deleted"
    assert kinds["src/app.py"] == "modified" and "+    return 'new'" in diff[0].diff

    git_after_turn = git_state(project)  # `git mv` changed the index; nothing else of git's changed
    assert {k: v for k, v in git_after_turn.items() if k != "index"} == \
        {k: v for k, v in git_before.items() if k != "index"}
    undone = op(project, server, run.session_id, Undo())
    assert isinstance(undone[-1], ev.TurnUndone), undone[-1]
    assert tree_state(project) == before
    assert git_state(project) == git_after_turn  # undo restores files, never the user's index or refs

    redone = op(project, server, run.session_id, Redo())
    assert isinstance(redone[-1], ev.TurnUndone) and redone[-1].redo
    assert tree_state(project) == after


def test_undo_refuses_after_an_external_edit_and_changes_nothing(project, server):
    (project / "a.txt").write_text("one\n")
    server.add(Reply(tool_calls=[ToolCall("write_file", {"path": "a.txt", "content": "two\n"})]),
               Reply(text="done"))
    run = run_session(project, server, "edit")
    (project / "a.txt").write_text("three, by the user\n")
    events = op(project, server, run.session_id, Undo())
    assert isinstance(events[-1], ev.WarningEvent) and "a.txt" in events[-1].message
    assert "not undone" in events[-1].message
    assert (project / "a.txt").read_text() == "three, by the user\n"
    forced = op(project, server, run.session_id, Undo(force=True))
    assert isinstance(forced[-1], ev.TurnUndone)
    assert (project / "a.txt").read_text() == "one\n"


def test_the_model_is_told_of_an_undo_in_the_next_request(project, server):
    db = project.parent / "sessions.db"
    server.add(Reply(tool_calls=[ToolCall("write_file", {"path": "made.txt", "content": "x\n"})]),
               Reply(text="done"))
    run = run_session(project, server, "make a file", db=db)
    op(project, server, run.session_id, Undo())
    assert not (project / "made.txt").exists()
    server.add(Reply(text="ok"))
    run_session(project, server, "what now?", db=db, resume=run.session_id)
    texts = [m.get("content") for m in server.chat_requests[-1].messages if m["role"] == "user"]
    assert any(isinstance(t, str) and "undid turn 1" in t and "made.txt" in t for t in texts), texts


def test_read_only_turns_take_no_snapshot(project, server):
    (project / "a.txt").write_text("one\n")
    server.add(Reply(tool_calls=[ToolCall("read_file", {"path": "a.txt"})]), Reply(text="done"))
    run = run_session(project, server, "look")
    assert not run.of(ev.TurnDiff)
    events = op(project, server, run.session_id, Undo())
    assert isinstance(events[-1], ev.WarningEvent) and "no turn" in events[-1].message


def test_a_turn_takes_two_snapshots_and_no_more_git_than_they_need(project, server, monkeypatch):
    """A turn whose first change comes before the session's warm-up snapshot began: one snapshot before it,
    one at its end (each: three listings, the index updated, a tree; the commit and its ref are written without
    git), the diff between."""
    import auger.changes.snapshots as snapshots

    started: list[str] = []
    spawn = asyncio.create_subprocess_exec

    async def counted(*argv, **kwargs):
        started.append(next(a for a in argv[1:] if not a.startswith("-") and "=" not in a))
        return await spawn(*argv, **kwargs)

    monkeypatch.setattr(snapshots.asyncio, "create_subprocess_exec", counted)
    (project / "README.md").write_text("hello\n")
    server.add(Reply(tool_calls=[ToolCall("write_file", {"path": "hello.py", "content": "print('hello')\n"})]),
               Reply(tool_calls=[ToolCall("read_file", {"path": "hello.py"})]),
               Reply(tool_calls=[ToolCall("shell", {"command": "echo ok"})]), Reply(text="done"))
    run = run_session(project, server, "go", overrides=("mode=auto", "approve_all=true"))
    assert [c.path for c in run.of(ev.TurnDiff)[0].files] == ["hello.py"]
    by_git = ["diff-files", "ls-files", "ls-files", "update-index", "write-tree", "ls-tree"]  # (the tree described)
    assert sorted(started) == sorted(["init", *by_git * 2, "diff-tree", "diff-tree"])


def test_cli_exec_json_shows_turn_diff_then_diff_undo_and_redo(project, server, auger_home):
    from tests.support.harness import FAST, auger_cli, json_events

    fast = [arg for item in FAST for arg in ("-c", item)]
    (project / "a.txt").write_text("one\n")
    server.add(Reply(tool_calls=[ToolCall("write_file", {"path": "a.txt", "content": "two\n"})]),
               Reply(tool_calls=[ToolCall("shell", {"command": "echo made > b.txt"})]),
               Reply(text="done"))
    result = auger_cli("exec", "--json", "--base-url", server.base_url, "-m", "m", *fast, "edit",
                       home=auger_home, cwd=project)
    assert result.returncode == 0, result.stderr
    lines = json_events(result.stdout)
    types = [line["type"] for line in lines]
    assert types.index("turn_diff") == types.index("turn_ended") - 1
    session_id = lines[0]["session_id"]

    shown = auger_cli("diff", session_id[:8], home=auger_home, cwd=project)
    assert shown.returncode == 0, shown.stderr
    assert "turn 1" in shown.stdout and "-one\n+two" in shown.stdout and "+made" in shown.stdout
    assert "\x1b[" not in shown.stdout  # not a terminal: plain text
    as_json = json_events(auger_cli("diff", session_id, "1", "--json", home=auger_home, cwd=project).stdout)
    assert [f["path"] for f in as_json[0]["files"]] == ["a.txt", "b.txt"]

    undone = auger_cli("undo", session_id[:8], home=auger_home, cwd=project)
    assert undone.returncode == 0, undone.stderr
    assert "undid turn 1" in undone.stdout
    assert (project / "a.txt").read_text() == "one\n" and not (project / "b.txt").exists()
    again = auger_cli("undo", session_id[:8], home=auger_home, cwd=project)
    assert again.returncode != 0 and "already undone" in again.stderr
    redone = auger_cli("undo", "--redo", session_id[:8], home=auger_home, cwd=project)
    assert redone.returncode == 0, redone.stderr
    assert (project / "a.txt").read_text() == "two\n" and (project / "b.txt").read_text() == "made\n"


def test_undo_while_a_turn_runs_is_refused(project, server):
    server.add(Reply(tool_calls=[ToolCall("shell", {"command": "echo x > a.txt; sleep 1"})]), Reply(text="done"))

    def on_event(session, event):
        if isinstance(event, ev.ToolCallStarted):
            session.submit(Undo())

    run = run_session(project, server, "work", on_event=on_event)
    refusals = [e.message for e in run.of(ev.WarningEvent)]
    assert any(m.startswith("undo refused: a turn is running") for m in refusals), refusals
    assert (project / "a.txt").read_text() == "x\n"


def test_undo_works_after_compaction_and_resume(project, server):
    from auger.protocol.ops import Compact

    def compact_after_first_turn(session, event):
        if isinstance(event, ev.TurnEnded) and not getattr(session, "_asked_compact", False):
            session._asked_compact = True
            session.submit(Compact())

    (project / "a.txt").write_text("one\n")
    server.add(Reply(tool_calls=[ToolCall("write_file", {"path": "a.txt", "content": "two\n"})]),
               Reply(text="did it"), Reply(text="SUMMARY: a.txt now says two."))
    run = run_session(project, server, "edit", on_event=compact_after_first_turn, turns=2)
    assert run.of(ev.ContextCompacted) and run.of(ev.TurnDiff)
    undone = op(project, server, run.session_id, Undo())
    assert isinstance(undone[-1], ev.TurnUndone) and undone[-1].files == ["a.txt"]
    assert (project / "a.txt").read_text() == "one\n"


def test_a_turn_cut_short_by_a_killed_process_can_be_undone_by_force(project, server, auger_home):
    import signal
    import sys
    import time

    from tests.support.harness import FAST

    fast = [arg for item in FAST for arg in ("-c", item)]
    (project / "a.txt").write_text("one\n")
    server.add(Reply(tool_calls=[ToolCall("write_file", {"path": "a.txt", "content": "two\n"})]),
               Reply(tool_calls=[ToolCall("shell", {"command": "touch started && sleep 30"})]),
               Reply(text="never"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AUGER_", "OPENAI_"))}
    env.update({"AUGER_HOME": str(auger_home), "OPENAI_API_KEY": "sk-test"})
    proc = subprocess.Popen([sys.executable, "-m", "auger", "exec", "--json", "--base-url", server.base_url,
                             "-m", "m", *fast, "edit"], cwd=project, env=env, stdout=subprocess.PIPE, text=True)
    first = proc.stdout.readline()
    deadline = time.monotonic() + 30
    while not (project / "started").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    proc.stdout.close()
    session_id = __import__("json").loads(first)["session_id"]
    assert (project / "a.txt").read_text() == "two\n"

    refused = auger_cli("undo", session_id[:8], home=auger_home, cwd=project)
    assert refused.returncode != 0 and "cut short" in refused.stderr
    assert (project / "a.txt").read_text() == "two\n"
    forced = auger_cli("undo", "--force", session_id[:8], home=auger_home, cwd=project)
    assert forced.returncode == 0, forced.stderr
    assert (project / "a.txt").read_text() == "one\n" and not (project / "started").exists()


def test_with_snapshots_off_there_is_no_diff_and_undo_says_why(project, server, isolated_home):
    server.add(Reply(tool_calls=[ToolCall("write_file", {"path": "a.txt", "content": "x\n"})]), Reply(text="ok"))
    run = run_session(project, server, "write", overrides=("snapshots=false",))
    assert (project / "a.txt").exists() and not run.of(ev.TurnDiff)
    assert not (isolated_home / "data" / "snapshots").exists() and not list(isolated_home.rglob("snapshots"))

    async def main():
        session, store = await open_session(project, server, project.parent / "sessions.db", "snapshots=false",
                                            resume=run.session_id)
        try:
            session.submit(Undo())
            async for event in session.events():
                if isinstance(event, ev.WarningEvent):
                    session.submit(Shutdown())
                    await session.wait_closed()
                    return event.message
        finally:
            await store.aclose()

    assert "snapshots are off" in asyncio.run(main())
    assert (project / "a.txt").exists()


def _exec(project: Path, server, auger_home: Path, *args: str) -> list[dict]:
    from tests.support.harness import FAST, json_events

    fast = [arg for item in FAST for arg in ("-c", item)]
    result = auger_cli("exec", "--json", "--base-url", server.base_url, "-m", "m", *fast, *args,
                       home=auger_home, cwd=project)
    assert result.returncode == 0, result.stderr
    return json_events(result.stdout)


def test_an_ignored_file_removed_in_auto_mode_comes_back_and_undo_names_what_it_cannot(project, server,
                                                                                     auger_home):
    (project / ".gitignore").write_text("local.cfg\nnode_modules/\n*.bin\n")
    (project / "local.cfg").write_text("TOKEN=secret\n")
    (project / "big.bin").write_bytes(b"x" * (2 << 20))  # over the limit for an ignored file
    (project / "node_modules/a").mkdir(parents=True)
    (project / "node_modules/a/index.js").write_text("module.exports = 1\n")
    git(project, "init", "-q", "-b", "main")
    git(project, "add", "-A")
    git(project, "commit", "-qm", "initial")
    removal = "rm -f local.cfg big.bin node_modules/a/index.js && rmdir node_modules/a node_modules"  # not asked in auto
    server.add(Reply(tool_calls=[ToolCall("shell", {"command": removal})]),
               Reply(text="cleaned"))
    lines = _exec(project, server, auger_home, "-c", "mode=auto", "clean up")
    assert not (project / "local.cfg").exists()
    diff = next(line for line in lines if line["type"] == "turn_diff")
    assert [(f["kind"], f["path"]) for f in diff["files"]] == [("deleted", "local.cfg")]
    told = [line["message"] for line in lines if line["type"] == "warning"]
    assert len(told) == 1 and "undo cannot restore" in told[0], told
    assert "big.bin: removed; an ignored file over the 1 MB limit" in told[0] and "node_modules/: removed" in told[0]

    shown = auger_cli("diff", lines[0]["session_id"][:8], home=auger_home, cwd=project).stdout
    assert "diff --git a/local.cfg b/local.cfg\ndeleted file mode" in shown
    assert "not in the snapshots, so undo cannot restore it: node_modules/: removed" in shown

    undone = auger_cli("undo", lines[0]["session_id"][:8], home=auger_home, cwd=project)
    assert (project / "local.cfg").read_text() == "TOKEN=secret\n"
    assert undone.returncode == 1 and "undid turn 1" in undone.stdout
    assert "not restored: big.bin: removed" in undone.stderr and "not restored: node_modules/: removed" in undone.stderr
    assert "Not restored: big.bin" in undone.stdout  # what the model is told


def test_the_session_database_and_data_dir_inside_the_project_are_never_a_turns_change(project, server,
                                                                                     monkeypatch):
    home = project / ".auger-home"  # auger's data and config inside the project too
    monkeypatch.setenv("AUGER_HOME", str(home))
    (project / "a.txt").write_text("one\n")
    server.add(Reply(tool_calls=[ToolCall("write_file", {"path": "a.txt", "content": "two\n"})]),
               Reply(text="done"), Reply(text="again"))
    db = project / "sessions.db"  # as a library user's SqliteStore("sessions.db") run in the project
    run = run_session(project, server, "edit", "say it again", db=db)
    diffs = run.of(ev.TurnDiff)
    assert [[f.path for f in d.files] for d in diffs] == [["a.txt"]], [d.files for d in diffs]
    assert (project / "sessions.db-wal").exists() or db.stat().st_size > 0

    async def undo_and_go_on(session, follow) -> None:
        session.submit(Undo())
        undone = await follow.until(ev.TurnUndone)
        assert undone.files == ["a.txt"] and not undone.failed

    async def main() -> None:
        session, store = await open_session(project, server, db, resume=run.session_id)
        try:
            from tests.support.harness import Follow

            await undo_and_go_on(session, Follow(session))
            session.submit(Shutdown())
            await session.wait_closed()
        finally:
            await store.aclose()

    asyncio.run(main())
    assert (project / "a.txt").read_text() == "one\n"
    from auger.store.sqlite import SqliteStore

    async def count() -> int:
        store = SqliteStore(db)
        try:
            return len(await store.load_items(run.session_id))
        finally:
            await store.aclose()

    assert asyncio.run(count()) > 0  # the database was not put back as an old snapshot had it
