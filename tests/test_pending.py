"""Pending-changes mode through the real session: the model's file tools and shell commands work on a
copy of the project with its queued changes made, the real tree stays byte-for-byte unchanged until
an apply, and apply / discard / rewind act on the queue in the store (a conflict refuses only its file)."""

from __future__ import annotations

import asyncio
import hashlib
import os
from pathlib import Path

import pytest

from auger.protocol import events as ev
from auger.protocol.ops import PendingApply, PendingDiscard, PendingRewind, Shutdown, Undo, UserTurn
from auger.store.sqlite import SqliteStore
from tests.support.trees import tree_state
from tests.support.harness import follow_session, run_session
from tests.support.mock_openai import Reply, ToolCall



def make_project(root: Path) -> None:
    (root / "src").mkdir()
    (root / "src/app.py").write_text("def answer():\n    return 41\n")
    (root / "tests").mkdir()
    (root / "tests/test_app.py").write_text(
        "import sys\nsys.path.insert(0, 'src')\nfrom app import answer\n\n\ndef test_answer():\n"
        "    assert answer() == 42\n")
    (root / "README.md").write_text("hello\n")
    (root / "old.txt").write_text("to be removed\n")
    (root / ".gitignore").write_text("build/\n")


def pending_outputs(server) -> list[str]:
    return [m["content"] for m in server.chat_requests[-1].messages if m["role"] == "tool"]


def load_pending(db: Path, session_id: str):
    async def main():
        store = SqliteStore(db)
        try:
            return await store.load_pending(session_id)
        finally:
            await store.aclose()

    return asyncio.run(main())


def editing_turn(server, project: Path) -> None:
    server.add(
        Reply(tool_calls=[ToolCall("edit_file", {"path": "src/app.py", "old_string": "41", "new_string": "42"}),
                          ToolCall("read_file", {"path": str(project / "README.md")}),
                          ToolCall("write_file", {"path": "src/new.py", "content": "NEW = 1\n"})]),
        Reply(tool_calls=[ToolCall("shell", {"command": "rm old.txt && echo made > by_shell.txt && "
                                             "mkdir -p build && echo artefact > build/out.txt"})]),
        Reply(tool_calls=[ToolCall("shell", {"command": "cat src/app.py; grep -c NEW src/new.py; ls"}),
                          ToolCall("read_file", {"path": str(project / "src/app.py")}),
                          ToolCall("grep", {"pattern": "NEW"}),
                          ToolCall("list_dir", {"path": "."}),
                          ToolCall("glob", {"pattern": "**/*.txt"})]),
        Reply(tool_calls=[ToolCall("shell", {"command": "python -m pytest -q -p no:cacheprovider tests"})]),
        Reply(text="done"))


def test_tools_and_commands_see_the_pending_view_while_the_real_tree_is_untouched(project, server):
    make_project(project)
    before = tree_state(project)
    editing_turn(server, project)
    run = run_session(project, server, "fix it", overrides=("pending=true",))
    assert run.ended.reason == "complete"
    assert tree_state(project) == before  # every file's bytes and mode, as before the session
    outputs = pending_outputs(server)
    assert "hello" in outputs[1]  # the project's absolute path names the copy's file
    cat = next(o for o in outputs if "return 42" in o and o.startswith("Exit code: 0"))
    assert "by_shell.txt" in cat and "old.txt" not in cat  # the copy holds the shell's changes too
    assert any("return 42" in o and "Exit code" not in o for o in outputs)  # read_file, by the project's path
    assert any("src/new.py" in o and "Exit code" not in o for o in outputs)  # grep
    listing = next(o for o in outputs if "new.py" in o and "app.py" in o and "Exit code" not in o)  # list_dir
    assert "by_shell.txt" in listing and "old.txt" not in listing, listing
    assert "by_shell.txt" in outputs  # glob: the queued new file, not the removed old.txt, not the ignored build/
    pytest_out = outputs[-1]
    assert pytest_out.startswith("Exit code: 0") and "1 passed" in pytest_out, pytest_out

    queued = {e.path: e for e in load_pending(project.parent / "sessions.db", run.session_id)}
    # build/ is ignored by the project, __pycache__ is a cache: both stay in the copy
    assert set(queued) == {"src/app.py", "src/new.py", "old.txt", "by_shell.txt"}
    assert queued["old.txt"].content is None
    assert queued["src/app.py"].content == b"def answer():\n    return 42\n"
    assert queued["src/app.py"].before_hash == hashlib.sha256(b"def answer():\n    return 41\n").hexdigest()
    assert queued["src/new.py"].before_hash == "absent" and queued["src/new.py"].tool == "write_file"
    assert queued["by_shell.txt"].tool == "shell" and queued["by_shell.txt"].agent == "main"
    changed = run.of(ev.PendingChanged)
    assert changed and changed[-1].count == 4


@pytest.mark.parametrize("sandbox", ["bwrap", "landlock"])
def test_the_sandbox_confines_commands_to_the_copy(project, server, sandbox):
    from auger.policy.sandbox import detect

    found, why = detect(sandbox)
    assert found is not None, f"this test needs {sandbox}: {why}"
    make_project(project)
    before = tree_state(project)
    server.add(Reply(tool_calls=[ToolCall("shell", {"command": f"echo pwned > {project}/README.md; "
                                                               f"echo pwned > {project}/escaped.txt; "
                                                               "echo copy > README.md; pwd"})]),
               Reply(text="done"))
    run = run_session(project, server, "try", overrides=("pending=true", f"sandbox={sandbox}"))
    assert run.of(ev.SessionConfigured)[0].sandbox == sandbox
    out = pending_outputs(server)[0]
    # bwrap hides the host's /tmp (where the test project lives) behind a fresh one; Landlock refuses
    blocked = ("Read-only file system", "Permission denied", "No such file or directory")
    assert sum(out.count(b) for b in blocked) == 2, out
    assert str(project) not in out.splitlines()[-1]  # the command ran in the copy
    assert tree_state(project) == before
    queued = load_pending(project.parent / "sessions.db", run.session_id)
    assert [(e.path, e.content) for e in queued] == [("README.md", b"copy\n")]


def ops(project: Path, server, session_id: str, *operations) -> list[ev.Event]:
    """Resume the session, submit each op, read its events until it is answered (pending_changed,
    turn_undone, or a refusal), shut down."""

    async def steps(session, follow) -> None:
        for operation in operations:
            session.submit(operation)
            await follow.until((ev.PendingChanged, ev.TurnUndone, ev.WarningEvent),
                               where=lambda e: not isinstance(e, ev.WarningEvent) or "refused:" in e.message)

    return follow_session(project, server, steps, resume=session_id)


def queue_three(project: Path, server) -> str:
    """A pending session that changed a.txt, b.txt (a second time: two entries) and created c/new.txt."""
    for name in ("a.txt", "b.txt"):
        (project / name).write_text(f"{name} old\n")
    server.add(Reply(tool_calls=[ToolCall("write_file", {"path": "a.txt", "content": "a new\n"}),
                                 ToolCall("write_file", {"path": "b.txt", "content": "b new\n"})]),
               Reply(tool_calls=[ToolCall("shell", {"command": "echo more >> b.txt && mkdir c && echo hi > c/new.txt"
                                                               " && chmod +x c/new.txt"})]),
               Reply(text="done"))
    run = run_session(project, server, "change", overrides=("pending=true",))
    assert run.ended.reason == "complete"
    return run.session_id


def test_apply_refuses_a_file_edited_on_disk_and_applies_the_others(project, server):
    session_id = queue_three(project, server)
    assert (project / "a.txt").read_text() == "a.txt old\n" and not (project / "c").exists()
    (project / "a.txt").write_text("edited by the user\n")  # after the proposal
    events = ops(project, server, session_id, PendingApply(["a.txt", "b.txt", "c", "nothing.txt"]))
    refused = [e.message for e in events if isinstance(e, ev.WarningEvent)]
    assert any("a.txt: changed on disk since the change was proposed" in m for m in refused), refused
    assert any("nothing.txt: nothing is pending" in m for m in refused), refused
    assert (project / "a.txt").read_text() == "edited by the user\n"  # nothing of it written
    assert (project / "b.txt").read_text() == "b new\nmore\n"
    assert (project / "c/new.txt").read_text() == "hi\n" and os.stat(project / "c/new.txt").st_mode & 0o100
    applied = [e for e in events if isinstance(e, ev.PendingChanged)][-1]
    assert applied.action == "applied" and sorted(applied.paths) == ["b.txt", "c/new.txt"] and applied.count == 1
    assert [e.path for e in load_pending(project.parent / "sessions.db", session_id)] == ["a.txt"]
    diff = [e for e in events if isinstance(e, ev.TurnDiff)]  # an apply is a change like a turn's: undoable
    assert diff and {f.path for f in diff[0].files} == {"b.txt", "c/new.txt"}

    undone = ops(project, server, session_id, Undo())
    assert any(isinstance(e, ev.TurnUndone) for e in undone), undone
    assert (project / "b.txt").read_text() == "b.txt old\n" and not (project / "c/new.txt").exists()
    assert (project / "a.txt").read_text() == "edited by the user\n"


def test_partial_apply_then_discard_leaves_the_tree_as_it_was(project, server):
    session_id = queue_three(project, server)
    before = tree_state(project)
    events = ops(project, server, session_id, PendingApply(["b.txt"]), PendingDiscard(["a.txt"]))
    assert (project / "b.txt").read_text() == "b new\nmore\n"
    assert tree_state(project) == {**before, "b.txt": tree_state(project)["b.txt"]}
    changed = [e for e in events if isinstance(e, ev.PendingChanged)]
    assert [(e.action, e.paths, e.count) for e in changed] == [("applied", ["b.txt"], 2), ("discarded", ["a.txt"], 1)]
    assert [e.path for e in load_pending(project.parent / "sessions.db", session_id)] == ["c/new.txt"]


def test_rewind_drops_later_entries_and_the_view_follows(project, server):
    session_id = queue_three(project, server)
    db = project.parent / "sessions.db"
    entries = load_pending(db, session_id)
    first_b = next(e.seq for e in entries if e.path == "b.txt")
    ops(project, server, session_id, PendingRewind(first_b))
    left = load_pending(db, session_id)
    assert [(e.path, e.content) for e in left] == [("a.txt", b"a new\n"), ("b.txt", b"b new\n")]
    # the model's view follows the queue: a command in the next turn sees b.txt without "more", no c/
    server.add(Reply(tool_calls=[ToolCall("shell", {"command": "cat b.txt; ls"})]), Reply(text="ok"))
    run_session(project, server, "look", resume=session_id)
    out = pending_outputs(server)[-1]
    assert "b new" in out and "more" not in out and "c\n" not in out.split("--- stdout ---")[-1], out
    ops(project, server, session_id, PendingApply())
    assert (project / "a.txt").read_text() == "a new\n" and (project / "b.txt").read_text() == "b new\n"
    assert not (project / "c").exists() and load_pending(db, session_id) == []


def test_hostile_paths_are_refused_at_queue_time(project, server, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "victim.txt").write_text("safe\n")
    (project / "out").symlink_to(outside)  # a link in the project leading out of it
    (project / "keep.txt").write_text("keep\n")
    before, outside_before = tree_state(project), tree_state(outside)
    server.add(Reply(tool_calls=[ToolCall("write_file", {"path": "../escape.txt", "content": "x"}),
                                 ToolCall("write_file", {"path": "out/victim.txt", "content": "x"}),
                                 ToolCall("write_file", {"path": f"{outside}/victim.txt", "content": "x"})]),
               Reply(tool_calls=[ToolCall("shell", {"command": "ln -s /etc/passwd link; rm out && mkdir out && "
                                                               "echo x > out/victim.txt; echo y > keep.txt"})]),
               Reply(text="done"))
    run = run_session(project, server, "escape", overrides=("pending=true", "approve_all=true"))
    outputs = pending_outputs(server)
    assert all(o.startswith("Error:") for o in outputs[:3]), outputs[:3]
    notes = [e.message for e in run.of(ev.WarningEvent)]
    assert any("link is a symlink" in n for n in notes), notes
    assert any("out/victim.txt: a symlink on its path" in n for n in notes), notes
    queued = load_pending(project.parent / "sessions.db", run.session_id)
    assert [(e.path, e.content) for e in queued] == [("keep.txt", b"y\n")]
    assert tree_state(project) == before and tree_state(outside) == outside_before
    assert not (tmp_path / "escape.txt").exists()


def test_hostile_paths_are_refused_at_apply_time(project, server, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (project / "sub").mkdir()
    (project / "sub/f.txt").write_text("old\n")
    server.add(Reply(tool_calls=[ToolCall("write_file", {"path": "sub/f.txt", "content": "new\n"}),
                                 ToolCall("write_file", {"path": "top.txt", "content": "top\n"})]),
               Reply(text="done"))
    run = run_session(project, server, "edit", overrides=("pending=true",))
    db = project.parent / "sessions.db"

    async def tamper():  # a row naming a path outside the project (a corrupted or hostile store)
        store = SqliteStore(db)
        try:
            await store.add_pending(run.session_id, "../escape.txt", "absent", b"x", 0o644, "main", "c", "write_file")
            await store.add_pending(run.session_id, ".git/hooks/pre-commit", "absent", b"x", 0o755, "main", "c", "t")
        finally:
            await store.aclose()

    asyncio.run(tamper())
    (project / "sub/f.txt").unlink()
    (project / "sub").rmdir()
    (project / "sub").symlink_to(outside)  # the directory became a link out of the project since
    events = ops(project, server, run.session_id, PendingApply())
    refused = " | ".join(e.message for e in events if isinstance(e, ev.WarningEvent))
    assert "sub/f.txt: " in refused and "../escape.txt: " in refused and ".git/hooks/pre-commit: " in refused
    assert os.listdir(outside) == [] and not (tmp_path / "escape.txt").exists()
    assert not (project / ".git").exists()
    assert (project / "top.txt").read_text() == "top\n"  # the harmless change still applies


def test_a_live_session_sees_its_view_follow_apply_undo_and_discard(project, server):
    """In one running session: apply then undo, and discard; the next command sees the files as they are."""
    (project / "a.txt").write_text("a old\n")
    (project / "b.txt").write_text("b old\n")
    server.add(Reply(tool_calls=[ToolCall("write_file", {"path": "a.txt", "content": "a new\n"}),
                                 ToolCall("write_file", {"path": "b.txt", "content": "b new\n"})]),
               Reply(text="queued"),
               Reply(tool_calls=[ToolCall("shell", {"command": "cat a.txt b.txt"})]),
               Reply(text="seen"))

    async def steps(session, follow) -> None:
        until = follow.until
        session.submit(UserTurn("change"))
        await until(ev.TurnEnded)
        session.submit(PendingApply(["a.txt"]))
        await until(ev.PendingChanged)
        assert (project / "a.txt").read_text() == "a new\n"
        session.submit(Undo())
        await until(ev.TurnUndone)
        session.submit(PendingDiscard(["b.txt"]))
        await until(ev.PendingChanged)
        session.submit(UserTurn("look"))
        await until(ev.TurnEnded)

    follow_session(project, server, steps, "pending=true")
    out = pending_outputs(server)[-1]
    assert "a old\nb old" in out, out
    assert (project / "a.txt").read_text() == "a old\n" and (project / "b.txt").read_text() == "b old\n"


def test_approval_previews_and_patches_work_on_the_pending_content(project, server):
    """A second edit of a file with a queued change: its approval diff starts from the queued content, and
    a patch sent through the shell applies to it too; a mode-only change is queued as well."""
    from auger.protocol.ops import ApprovalDecision

    (project / "a.txt").write_text("one\n")
    (project / "run.sh").write_text("echo hi\n")
    patch = "*** Begin Patch\n*** Update File: a.txt\n@@\n-two\n+three\n*** End Patch\n"
    server.add(Reply(tool_calls=[ToolCall("write_file", {"path": "a.txt", "content": "two\n"})]),
               Reply(tool_calls=[ToolCall("shell", {"command": f"apply_patch <<'EOF'\n{patch}EOF"})]),
               Reply(tool_calls=[ToolCall("shell", {"command": "chmod +x run.sh"})]),
               Reply(text="done"))
    asked: list[ev.ApprovalRequest] = []

    def approve(session, event) -> None:
        if isinstance(event, ev.ApprovalRequest):
            asked.append(event)
            session.submit(ApprovalDecision(event.request_id, "approve"))

    run = run_session(project, server, "edit", overrides=("pending=true", "mode=safe"), interactive=True,
                      on_event=approve)
    assert run.ended.reason == "complete"
    assert asked[0].details.diff and "-one\n+two" in asked[0].details.diff
    assert asked[1].details.diff and "-two\n+three" in asked[1].details.diff, asked[1].details
    assert (project / "a.txt").read_text() == "one\n" and not os.access(project / "run.sh", os.X_OK)
    queued = latest_by_path(load_pending(project.parent / "sessions.db", run.session_id))
    assert queued["a.txt"].content == b"three\n"
    assert queued["run.sh"].content == b"echo hi\n" and queued["run.sh"].mode & 0o111


def latest_by_path(entries) -> dict:
    return {e.path: e for e in entries}


def test_file_tools_changes_are_queued_by_any_spelling_and_even_when_ignored(project, server):
    (project / ".gitignore").write_text("build/\n")
    (project / "real").mkdir()
    (project / "alias").symlink_to("real")  # a link inside the project: the change lands at its target
    server.add(Reply(tool_calls=[ToolCall("write_file", {"path": str(project / "abs.txt"), "content": "abs\n"}),
                                 ToolCall("write_file", {"path": "build/gen.txt", "content": "gen\n"}),
                                 ToolCall("write_file", {"path": "./alias/../alias/x.txt", "content": "x\n"})]),
               Reply(text="done"))
    run = run_session(project, server, "write", overrides=("pending=true",))
    queued = latest_by_path(load_pending(project.parent / "sessions.db", run.session_id))
    assert set(queued) == {"abs.txt", "build/gen.txt", "real/x.txt"}, queued
    assert not (project / "abs.txt").exists() and not (project / "build").exists()


def test_what_a_background_command_writes_later_is_queued_before_an_apply(project, server):
    server.add(Reply(tool_calls=[ToolCall("shell", {"command": "sleep 0.3; echo late > late.txt",
                                                    "background": True})]),
               Reply(text="started"))

    after_apply: list[ev.Event] = []

    async def steps(session, follow) -> None:
        session.submit(UserTurn("go"))
        await follow.until(ev.TurnEnded)
        for _ in range(100):  # the copy gets the file; the project does not
            if (session.pending.tree / "late.txt").exists():
                break
            await asyncio.sleep(0.05)
        assert not (project / "late.txt").exists()
        mark = len(follow.events)
        session.submit(PendingApply())
        while (await follow.until(ev.PendingChanged)).action != "applied":
            pass
        after_apply.extend(follow.events[mark:])

    follow_session(project, server, steps, "pending=true")
    events = after_apply
    assert [(e.action, e.paths) for e in events if isinstance(e, ev.PendingChanged)] == \
        [("queued", ["late.txt"]), ("applied", ["late.txt"])]
    assert (project / "late.txt").read_text() == "late\n"


def test_pending_mode_without_a_sandbox_says_what_it_cannot_stop(project, server):
    server.add(Reply(text="hi"))
    run = run_session(project, server, "hi", overrides=("pending=true", "sandbox=off"))
    assert any("pending mode without a sandbox" in e.message for e in run.of(ev.WarningEvent))


def test_a_change_made_to_an_outdated_copy_is_refused_at_apply(project, server):
    """The user edits a file mid-turn, after the copy was brought up to date; the model then edits its older
    copy: applying that would silently undo the user's edit, so it is refused. A file applied earlier in
    the session is current again, so a later change to it applies."""
    (project / "a.txt").write_text("a v1\n")
    (project / "b.txt").write_text("b v1\n")
    server.add(Reply(tool_calls=[ToolCall("write_file", {"path": "b.txt", "content": "b v2\n"})]), Reply(text="1"),
               Reply(tool_calls=[ToolCall("shell", {"command": "sleep 0.5"})]),
               Reply(tool_calls=[ToolCall("edit_file", {"path": "a.txt", "old_string": "v1", "new_string": "v3"}),
                                 ToolCall("edit_file", {"path": "b.txt", "old_string": "v2", "new_string": "v3"})]),
               Reply(text="2"))

    async def steps(session, follow) -> None:
        until = follow.until
        session.submit(UserTurn("one"))
        await until(ev.TurnEnded)
        session.submit(PendingApply())
        await until(ev.PendingChanged)
        session.submit(UserTurn("two"))
        await until(ev.ToolCallStarted)
        (project / "a.txt").write_text("a edited by the user\n")  # while the turn runs
        await until(ev.TurnEnded)
        session.submit(PendingApply())
        await until(ev.PendingChanged)

    events = follow_session(project, server, steps, "pending=true")
    refused = [e.message for e in events if isinstance(e, ev.WarningEvent)]
    assert any("a.txt: changed on disk after the session copied it" in m for m in refused), refused
    assert (project / "a.txt").read_text() == "a edited by the user\n"
    assert (project / "b.txt").read_text() == "b v3\n"


def test_the_copy_follows_the_users_edits_between_turns(project, server):
    """Files the user edits, creates or removes in the project between turns (with nothing queued for
    them) are seen by the next turn's tools, and a change made on top of an edit applies cleanly."""
    (project / "a.txt").write_text("a v1\n")
    (project / "gone.txt").write_text("x\n")
    server.add(Reply(text="1"),
               Reply(tool_calls=[ToolCall("shell", {"command": "cat a.txt new.txt; ls"})]),
               Reply(tool_calls=[ToolCall("edit_file", {"path": "a.txt", "old_string": "v2", "new_string": "v3"})]),
               Reply(text="2"))

    async def steps(session, follow) -> None:
        session.submit(UserTurn("one"))
        await follow.until(ev.TurnEnded)
        (project / "a.txt").write_text("a v2 by the user\n")
        (project / "new.txt").write_text("new by the user\n")
        (project / "gone.txt").unlink()
        session.submit(UserTurn("two"))
        await follow.until(ev.TurnEnded)
        session.submit(PendingApply())
        await follow.until(ev.PendingChanged)

    follow_session(project, server, steps, "pending=true")
    out = [m["content"] for m in server.chat_requests[2].messages if m["role"] == "tool"][-1]
    assert "a v2 by the user\nnew by the user" in out and "gone.txt" not in out, out
    assert (project / "a.txt").read_text() == "a v3 by the user\n"


def test_pending_is_a_session_option_and_a_session_with_a_queue_resumes_in_it(project, server):
    from auger.engine.session.sessions import SessionManager
    from auger.engine.workspace import Workspace
    from auger.models.registry import client_for
    from tests.support.harness import make_config

    (project / "a.txt").write_text("a\n")
    server.add(Reply(tool_calls=[ToolCall("write_file", {"path": "a.txt", "content": "b\n"})]), Reply(text="done"))

    async def main() -> tuple[bool, bool, bool]:
        config = make_config("provider=openai-compatible", f"base_url={server.base_url}", "model=mock-model")
        assert not config.pending
        def client():
            return client_for(config, env={"OPENAI_API_KEY": "sk-test"})

        store = SqliteStore(project.parent / "sessions.db")
        sessions = SessionManager(Workspace.open(project, config), store)
        try:
            session = await sessions.create(client(), pending=True)
            created = session.pending is not None
            await run_prompt_to_end(session, "edit")
            resumed = await sessions.resume(session.id, client=client())  # something is queued: pending mode again
            with_queue = resumed.pending is not None
            resumed.submit(PendingDiscard())
            async for event in resumed.events():
                if isinstance(event, ev.PendingChanged):
                    break
            resumed.submit(Shutdown())
            await resumed.wait_closed()
            again = await sessions.resume(session.id, client=client())  # nothing queued or asked: a normal session
            without = again.pending is None
            again.submit(Shutdown())
            await again.wait_closed()
            return created, with_queue, without
        finally:
            await store.aclose()

    assert asyncio.run(asyncio.wait_for(main(), 60)) == (True, True, True)
    assert (project / "a.txt").read_text() == "a\n"


async def run_prompt_to_end(session, prompt: str) -> None:
    from auger.engine.session.sessions import run_prompt

    await run_prompt(session, prompt)


NOTES_SERVER = '''
from mcp.server.mcpserver import MCPServer

server = MCPServer("notes")


@server.tool()
def note(name: str, text: str) -> str:
    with open(name, "w") as f:
        f.write(text)
    return "noted"


server.run()
'''


@pytest.mark.parametrize("sandbox", ["off", "auto"])
def test_an_mcp_servers_writes_land_in_the_copy_and_are_queued(project, server, sandbox):
    import sys

    from auger.engine.session.sessions import SessionManager
    from auger.engine.workspace import Workspace
    from auger.models.registry import client_for
    from tests.support.harness import drive, make_config

    make_project(project)
    (project / "notes_server.py").write_text(NOTES_SERVER)
    before = tree_state(project)
    server.add(Reply(tool_calls=[ToolCall("mcp__notes__note", {"name": "from-mcp.txt", "text": "via mcp\n"})]),
               Reply(text="noted it"))

    async def main():
        config = make_config("provider=openai-compatible", f"base_url={server.base_url}", "model=mock-model",
                             "pending=true", f"sandbox={sandbox}", "approve_all=true")
        # no cwd: the server runs in the session's tree, which in pending mode is the copy
        config.tables["mcp_servers"] = {"notes": {"command": sys.executable, "args": ["notes_server.py"]}}
        store = SqliteStore(project.parent / "sessions.db")
        try:
            session = await SessionManager(Workspace.open(project, config), store).create(
                client_for(config, env={"OPENAI_API_KEY": "sk-test"}))
            return await asyncio.wait_for(drive(session, "take a note"), 90)
        finally:
            await store.aclose()

    run = asyncio.run(main())
    if sandbox == "auto" and run.of(ev.SessionConfigured)[0].sandbox == "none":
        pytest.skip("no sandbox works on this machine: the confined variant cannot run")
    assert [e.output for e in run.of(ev.ToolCallEnded)] == ["noted"], [w.message for w in run.of(ev.WarningEvent)]
    assert tree_state(project) == before, "the MCP server wrote the real project"
    queued = load_pending(project.parent / "sessions.db", run.session_id)
    assert [(e.path, e.content) for e in queued] == [("from-mcp.txt", b"via mcp\n")]


def test_a_fork_takes_its_own_copy_of_the_queue(project, server):
    from auger.engine.session.sessions import SessionManager
    from auger.engine.workspace import Workspace
    from auger.models.registry import client_for
    from tests.support.harness import make_config

    session_id = queue_three(project, server)
    before = tree_state(project)

    async def main():
        config = make_config("provider=openai-compatible", f"base_url={server.base_url}", "model=mock-model")
        store = SqliteStore(project.parent / "sessions.db")
        try:
            manager = SessionManager(Workspace.open(project, config), store)
            found = []
            for cut in (None, 1):
                fork = await manager.fork(session_id, client=client_for(config, env={"OPENAI_API_KEY": "k"}),
                                          before_user_message=cut)
                queued = [(e.path, e.content) for e in await store.load_pending(fork.id)]
                found.append((fork.pending is not None, queued))
                fork.submit(Shutdown())
                await fork.wait_closed()
            return found, [(e.path, e.content) for e in await store.load_pending(session_id)]
        finally:
            await store.aclose()

    (whole, cut), source = asyncio.run(asyncio.wait_for(main(), 60))
    assert whole == (True, source) and len(source) == 4  # the same queue, in pending mode
    assert cut == (False, [])  # cut before the first message: none of its changes
    assert tree_state(project) == before


@pytest.mark.parametrize("sandbox", ["bwrap", "landlock", "off"])
def test_git_in_the_copy_reads_the_repository_and_cannot_write_it(project, server, sandbox):
    from auger.policy.sandbox import detect
    from tests.support.trees import git, sh

    if sandbox != "off":
        found, why = detect(sandbox)
        assert found is not None, f"this test needs {sandbox}: {why}"
    make_project(project)
    sh(project, "git init -q && git add -A && git commit -qm base")
    refs = (git(project, "rev-parse", "HEAD"), git(project, "stash", "list"), git(project, "ls-files", "-s"))
    before = tree_state(project)
    script = ("git status --short; git diff --stat | tail -1; git log --oneline | wc -l; "
              "git -c user.name=m -c user.email=m@x commit -qam sneaky 2>/dev/null || echo COMMIT-REFUSED; "
              "git add src/app.py 2>/dev/null || echo ADD-REFUSED; git stash -q 2>/dev/null || echo STASH-REFUSED")
    server.add(Reply(tool_calls=[ToolCall("edit_file", {"path": "src/app.py", "old_string": "41",
                                                        "new_string": "42"})]),
               Reply(tool_calls=[ToolCall("shell", {"command": script})]), Reply(text="looked"))
    run = run_session(project, server, "change and look", overrides=("pending=true", f"sandbox={sandbox}",
                                                                     "approve_all=true"))
    assert run.ended.reason == "complete", run.ended.message
    out = pending_outputs(server)[-1]
    if sandbox == "off":  # nothing would stop a commit there: the copy goes without the repository
        assert "not a git repository" in out, out
    else:
        assert " M src/app.py" in out and "1 file changed" in out, out
        assert "COMMIT-REFUSED" in out and "ADD-REFUSED" in out and "STASH-REFUSED" in out, out
        note = [m["content"] for m in server.chat_requests[0].messages if "Pending-changes mode" in str(m["content"])]
        assert note and "git sees the project's repository read-only" in note[0]
    assert (git(project, "rev-parse", "HEAD"), git(project, "stash", "list"), git(project, "ls-files", "-s")) == refs
    assert tree_state(project) == before
    queued = load_pending(project.parent / "sessions.db", run.session_id)
    assert [e.path for e in queued] == ["src/app.py"]  # the copy's `.git` pointer is never queued
