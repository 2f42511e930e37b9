"""Safe mode lets a session delete a file it created itself without asking, and still asks for any
other file: pre-existing ones, links, files changed since, or commands that do more than `rm`."""

from __future__ import annotations

from auger.protocol import events as ev
from auger.protocol.ops import ApprovalDecision
from tests.support.harness import run_session
from tests.support.mock_openai import Reply, ToolCall


def approve_all(asked: list):
    def on_event(session, event):
        if isinstance(event, ev.ApprovalRequest):
            asked.append(event.details.subject if event.details else event.message)
            session.submit(ApprovalDecision(event.request_id, "approve"))
    return on_event


def test_safe_mode_deletes_the_sessions_own_new_file_without_asking(project, server):
    (project / "old.txt").write_text("the user's\n")
    server.add(Reply(tool_calls=[ToolCall("write_file", {"path": "scratch.txt", "content": "tmp\n"})]),
               Reply(tool_calls=[ToolCall("shell", {"command": "rm scratch.txt"})]),
               Reply(tool_calls=[ToolCall("shell", {"command": "rm old.txt"})]),
               Reply(text="done"))
    asked: list = []
    run_session(project, server, "go", overrides=("mode=safe",), interactive=True, on_event=approve_all(asked))
    assert asked == ["scratch.txt", "rm old.txt"]  # the write and the pre-existing file: asked; own rm: not
    assert not (project / "scratch.txt").exists() and not (project / "old.txt").exists()


def test_a_changed_own_file_or_a_compound_command_still_asks(project, server):
    server.add(Reply(tool_calls=[ToolCall("write_file", {"path": "a.txt", "content": "1\n"}),
                                 ToolCall("write_file", {"path": "b.txt", "content": "1\n"})]),
               Reply(tool_calls=[ToolCall("shell", {"command": "echo changed >> a.txt"})]),
               Reply(tool_calls=[ToolCall("shell", {"command": "rm a.txt"})]),
               Reply(tool_calls=[ToolCall("shell", {"command": "rm b.txt; touch c.txt"})]),
               Reply(text="done"))
    asked: list = []
    run_session(project, server, "go", overrides=("mode=safe",), interactive=True, on_event=approve_all(asked))
    assert asked == ["a.txt", "b.txt", "echo changed >> a.txt", "rm a.txt", "rm b.txt; touch c.txt"]


def test_apply_patch_delete_of_an_own_file_is_not_asked(project, server):
    add = "*** Begin Patch\n*** Add File: n.txt\n+x\n*** End Patch\n"
    delete = "*** Begin Patch\n*** Delete File: n.txt\n*** End Patch\n"
    server.add(Reply(tool_calls=[ToolCall("apply_patch", {"patch": add})]),
               Reply(tool_calls=[ToolCall("apply_patch", {"patch": delete})]),
               Reply(text="done"))
    asked: list = []
    run_session(project, server, "go", overrides=("mode=safe", "model=gpt-5"), interactive=True,
                on_event=approve_all(asked))
    assert asked == ["n.txt"]
    assert not (project / "n.txt").exists()


def test_a_resumed_session_still_knows_the_files_it_created(project, server):
    db = project.parent / "sessions.db"
    server.add(Reply(tool_calls=[ToolCall("write_file", {"path": "mine.txt", "content": "m\n"})]), Reply(text="ok"))
    asked: list = []
    first = run_session(project, server, "make", db=db, overrides=("mode=safe",), interactive=True,
                        on_event=approve_all(asked))
    server.add(Reply(tool_calls=[ToolCall("shell", {"command": "rm mine.txt"})]), Reply(text="ok"))
    run_session(project, server, "remove", db=db, resume=first.session_id, overrides=("mode=safe",),
                interactive=True, on_event=approve_all(asked))
    assert asked == ["mine.txt"] and not (project / "mine.txt").exists()


def test_an_own_file_deleted_then_made_again_by_a_command_is_no_longer_own(project, server):
    server.add(Reply(tool_calls=[ToolCall("write_file", {"path": "scratch.txt", "content": "x\n"})]),
               Reply(tool_calls=[ToolCall("shell", {"command": "rm scratch.txt"})]),
               Reply(tool_calls=[ToolCall("shell", {"command": "printf 'x\\n' > scratch.txt"})]),
               Reply(tool_calls=[ToolCall("shell", {"command": "rm scratch.txt"})]),
               Reply(text="done"))
    asked: list = []
    run_session(project, server, "go", overrides=("mode=safe",), interactive=True, on_event=approve_all(asked))
    # the same bytes at the same path, but made by a command after the session's own file was gone
    assert asked == ["scratch.txt", "printf 'x\\n' > scratch.txt", "rm scratch.txt"]
    assert not (project / "scratch.txt").exists()


def test_a_deleted_own_file_is_forgotten_across_resume(project, server):
    db = project.parent / "sessions.db"
    server.add(Reply(tool_calls=[ToolCall("write_file", {"path": "mine.txt", "content": "m\n"})]),
               Reply(tool_calls=[ToolCall("shell", {"command": "rm mine.txt"})]), Reply(text="ok"))
    asked: list = []
    first = run_session(project, server, "make", db=db, overrides=("mode=safe",), interactive=True,
                        on_event=approve_all(asked))
    (project / "mine.txt").write_text("m\n")  # the user makes the same file again
    server.add(Reply(tool_calls=[ToolCall("shell", {"command": "rm mine.txt"})]), Reply(text="ok"))
    run_session(project, server, "remove", db=db, resume=first.session_id, overrides=("mode=safe",),
                interactive=True, on_event=approve_all(asked))
    assert asked == ["mine.txt", "rm mine.txt"]


def test_own_files_edited_by_the_sessions_file_tools_stay_own_unless_changed_before(project, server):
    server.add(Reply(tool_calls=[ToolCall("write_file", {"path": "a.txt", "content": "1\n"}),
                                 ToolCall("write_file", {"path": "b.txt", "content": "1\n"}),
                                 ToolCall("write_file", {"path": "c.txt", "content": "1\n"})]),
               Reply(tool_calls=[ToolCall("edit_file", {"path": "a.txt", "old_string": "1", "new_string": "2"}),
                                 ToolCall("write_file", {"path": "c.txt", "content": "1\n"})]),
               Reply(tool_calls=[ToolCall("shell", {"command": "echo user >> b.txt"})]),
               Reply(tool_calls=[ToolCall("edit_file", {"path": "b.txt", "old_string": "user", "new_string": "u"})]),
               Reply(tool_calls=[ToolCall("shell", {"command": "rm a.txt c.txt"})]),
               Reply(tool_calls=[ToolCall("shell", {"command": "rm b.txt"})]),
               Reply(text="done"))
    asked: list = []
    run_session(project, server, "go", overrides=("mode=safe",), interactive=True, on_event=approve_all(asked))
    assert asked == ["a.txt", "b.txt", "c.txt", "a.txt", "c.txt", "echo user >> b.txt", "b.txt", "rm b.txt"]
    assert not any((project / n).exists() for n in ("a.txt", "b.txt", "c.txt"))


def test_apply_patch_update_keeps_an_own_file_own(project, server):
    add = "*** Begin Patch\n*** Add File: n.txt\n+x\n*** End Patch\n"
    update = "*** Begin Patch\n*** Update File: n.txt\n@@\n-x\n+y\n*** End Patch\n"
    delete = "*** Begin Patch\n*** Delete File: n.txt\n*** End Patch\n"
    server.add(*[Reply(tool_calls=[ToolCall("apply_patch", {"patch": p})]) for p in (add, update, delete)],
               Reply(text="done"))
    asked: list = []
    run_session(project, server, "go", overrides=("mode=safe", "model=gpt-5"), interactive=True,
                on_event=approve_all(asked))
    assert asked == ["n.txt", "n.txt"]  # the add and the update; the delete of the session's own file is not
    assert not (project / "n.txt").exists()
