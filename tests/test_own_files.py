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
