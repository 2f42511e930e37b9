"""The apply_patch tool through a real session: offered to the OpenAI family only, applied through the
tool and through `shell` as a heredoc (never by bash), all or nothing with a readable failure."""

from __future__ import annotations

from tests.support.harness import run_session
from tests.support.mock_openai import Reply, ToolCall

PATCH = """*** Begin Patch
*** Update File: a.py
@@
 def f():
-    return 1
+    return 2
*** Add File: new/b.txt
+hello
*** End Patch
"""

GPT = ("model=gpt-5",)


def _tool_names(request) -> list[str]:
    return [t["function"]["name"] for t in request.body.get("tools", [])]


def _tool_output(request) -> str:
    return [m for m in request.messages if m["role"] == "tool"][-1]["content"]


def test_apply_patch_tool_applies_and_is_offered_to_openai_models(project, server):
    (project / "a.py").write_text("def f():\n    return 1\n")
    server.add(Reply(tool_calls=[ToolCall("apply_patch", {"patch": PATCH})]), Reply(text="done"))
    run_session(project, server, "patch it", overrides=GPT)
    assert "apply_patch" in _tool_names(server.chat_requests[0])
    assert (project / "a.py").read_text() == "def f():\n    return 2\n"
    assert (project / "new/b.txt").read_text() == "hello\n"
    assert "A new/b.txt" in _tool_output(server.chat_requests[1])


def test_apply_patch_is_not_offered_to_other_models(project, server):
    server.add(Reply(text="ok"))
    run_session(project, server, "hi")
    names = _tool_names(server.chat_requests[0])
    assert "edit_file" in names and "apply_patch" not in names


def test_failed_patch_changes_nothing_and_shows_the_nearest_lines(project, server):
    (project / "a.py").write_text("def f():\n    return 7\n")
    server.add(Reply(tool_calls=[ToolCall("apply_patch", {"patch": PATCH})]), Reply(text="done"))
    run_session(project, server, "patch it", overrides=GPT)
    out = _tool_output(server.chat_requests[1])
    assert "No file was changed" in out and "a.py" in out and "return 7" in out, out
    assert (project / "a.py").read_text() == "def f():\n    return 7\n"
    assert not (project / "new").exists()


def test_patch_sent_through_shell_is_applied_by_auger_not_bash(project, server):
    (project / "a.py").write_text("def f():\n    return 1\n")
    command = f"apply_patch <<'EOF'\n{PATCH}EOF\n"
    server.add(Reply(tool_calls=[ToolCall("shell", {"command": command})]), Reply(text="done"))
    run_session(project, server, "patch it", overrides=GPT)
    assert (project / "a.py").read_text() == "def f():\n    return 2\n"
    assert (project / "new/b.txt").read_text() == "hello\n"
    assert "Applied the patch" in _tool_output(server.chat_requests[1])


def test_approving_a_patch_shows_its_diff_through_the_tool_and_through_shell(project, server):
    from auger.protocol import events as ev
    from auger.protocol.ops import ApprovalDecision

    (project / "a.txt").write_text("one\n")
    patch = "*** Begin Patch\n*** Update File: a.txt\n@@\n-one\n+two\n*** End Patch\n"
    server.add(Reply(tool_calls=[ToolCall("apply_patch", {"patch": patch})]),
               Reply(tool_calls=[ToolCall("shell", {"command": f"apply_patch <<'EOF'\n{patch}EOF"})]),
               Reply(tool_calls=[ToolCall("shell", {"command": "touch b.txt"})]),
               Reply(text="done"))
    asked: list = []

    def on_event(session, event):
        if isinstance(event, ev.ApprovalRequest):
            asked.append(event.details)
            session.submit(ApprovalDecision(event.request_id, "deny"))

    run_session(project, server, "patch", overrides=(*GPT, "mode=safe"), interactive=True, on_event=on_event)
    assert [d.tool for d in asked] == ["apply_patch", "shell", "shell"]
    assert "-one\n+two" in asked[0].diff and "-one\n+two" in asked[1].diff
    assert asked[2].diff is None
    assert (project / "a.txt").read_text() == "one\n"


def test_approving_a_patch_for_the_session_covers_exactly_its_files(project, server):
    from auger.protocol import events as ev
    from auger.protocol.ops import ApprovalDecision

    def add(path: str) -> str:
        return f"*** Begin Patch\n*** Add File: {path}\n+x\n*** End Patch\n"

    server.add(Reply(tool_calls=[ToolCall("apply_patch", {"patch": add("a.txt")})]),
               Reply(tool_calls=[ToolCall("apply_patch", {"patch": add("b.txt")})]),
               Reply(text="done"))
    asked: list = []

    def on_event(session, event):
        if isinstance(event, ev.ApprovalRequest):
            asked.append(event.details.subject)
            session.submit(ApprovalDecision(event.request_id, "approve_session" if len(asked) == 1 else "deny"))

    run_session(project, server, "patch", overrides=(*GPT, "mode=safe"), interactive=True, on_event=on_event)
    assert asked == ["a.txt", "b.txt"]
    assert (project / "a.txt").exists() and not (project / "b.txt").exists()


OUT_OF_ORDER = """*** Begin Patch
*** Update File: o.txt
@@
-d
+D
@@
-b
+B
*** End Patch
"""


def test_hunks_out_of_order_fail_clearly_through_the_tool_shell_and_approval(project, server):
    """Lines that occur only before the previous hunk: a clear error the model reads, never a hung turn
    (the tool and the heredoc through `shell`, and the preview an approval shows)."""
    from auger.protocol import events as ev
    from auger.protocol.ops import ApprovalDecision

    (project / "o.txt").write_text("a\nb\nc\nd\n")
    server.add(Reply(tool_calls=[ToolCall("apply_patch", {"patch": OUT_OF_ORDER})]),
               Reply(tool_calls=[ToolCall("shell", {"command": f"apply_patch <<'EOF'\n{OUT_OF_ORDER}EOF"})]),
               Reply(text="done"))
    asked: list = []

    def on_event(session, event):
        if isinstance(event, ev.ApprovalRequest):
            asked.append(event.details)
            session.submit(ApprovalDecision(event.request_id, "approve"))

    run = run_session(project, server, "patch", overrides=(*GPT, "mode=safe"), interactive=True, on_event=on_event)
    assert run.ended.reason == "complete"
    assert [d.tool for d in asked] == ["apply_patch", "shell"]
    assert all("they match only earlier, at line 2" in d.diff for d in asked), [d.diff for d in asked]
    outputs = [m["content"] for m in server.chat_requests[2].messages if m["role"] == "tool"]
    assert len(outputs) == 2 and all("they match only earlier, at line 2" in out for out in outputs), outputs
    assert all("No file was changed" in out for out in outputs)
    assert (project / "o.txt").read_text() == "a\nb\nc\nd\n"


def _cd_patch(where: str, body: str) -> str:
    return f"cd {where} && apply_patch <<'EOF'\n*** Begin Patch\n{body}*** End Patch\nEOF"


def test_a_patch_after_cd_applies_beneath_that_directory(project, server):
    (project / "pkg").mkdir()
    (project / "pkg/mod.py").write_text("x = 1\n")
    (project / "mod.py").write_text("x = 1\n")  # the same name at the root is left alone
    (project / "link").symlink_to("pkg")  # a link that stays inside is followed
    server.add(Reply(tool_calls=[ToolCall("shell", {"command": _cd_patch(
                   "pkg", "*** Update File: mod.py\n@@\n-x = 1\n+x = 2\n*** Add File: new.txt\n+new\n")})]),
               Reply(tool_calls=[ToolCall("shell", {"command": _cd_patch(
                   "'link'", "*** Update File: mod.py\n*** Move to: moved.py\n@@\n-x = 2\n+x = 3\n")})]),
               Reply(tool_calls=[ToolCall("shell", {"command": _cd_patch("sub", "*** Add File: deep.txt\n+d\n"),
                                                    "workdir": "pkg"})]),
               Reply(text="done"))
    (project / "pkg/sub").mkdir()
    run_session(project, server, "patch", overrides=GPT)
    outputs = [m["content"] for m in server.chat_requests[3].messages if m["role"] == "tool"]
    assert all(out.startswith("Applied the patch") for out in outputs), outputs
    assert "M pkg/mod.py" in outputs[0] and "A pkg/new.txt" in outputs[0]
    assert not (project / "pkg/mod.py").exists() and (project / "pkg/moved.py").read_text() == "x = 3\n"
    assert (project / "pkg/new.txt").read_text() == "new\n" and (project / "pkg/sub/deep.txt").read_text() == "d\n"
    assert (project / "mod.py").read_text() == "x = 1\n" and not (project / "new.txt").exists()


def test_a_patch_after_cd_out_of_the_project_is_refused(project, server, tmp_path):
    outside = tmp_path / "x"
    outside.mkdir()
    (outside / "f.txt").write_text("keep\n")
    (project / "out").symlink_to(outside)
    add = "*** Add File: f.txt\n+changed\n"
    server.add(Reply(tool_calls=[ToolCall("shell", {"command": _cd_patch("../x", add)})]),
               Reply(tool_calls=[ToolCall("shell", {"command": _cd_patch("out", add)})]),
               Reply(tool_calls=[ToolCall("shell", {"command": _cd_patch(str(outside), add)})]),
               Reply(tool_calls=[ToolCall("shell", {"command": _cd_patch("nope", add)})]),
               Reply(text="done"))
    run_session(project, server, "patch", overrides=GPT)
    outputs = [m["content"] for m in server.chat_requests[4].messages if m["role"] == "tool"]
    assert len(outputs) == 4
    assert all("outside the project root" in out and "No file was changed" in out for out in outputs[:3]), outputs
    assert "cd nope: there is no such directory" in outputs[3]
    assert (outside / "f.txt").read_text() == "keep\n" and not (project / "f.txt").exists()
