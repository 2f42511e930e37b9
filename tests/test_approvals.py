"""The approval flow end to end: interactive decisions, session grants, headless runs, plan mode, rules."""

from __future__ import annotations

import subprocess

from auger.protocol import events as ev
from auger.protocol.ops import ApprovalDecision, SetMode
from tests.support.harness import auger_cli, run_session
from tests.support.mock_openai import Reply, ToolCall


def answering(*answers: str | tuple[str, str]):
    """An on_event hook answering approval requests in order; records the requests."""
    asked: list[ev.ApprovalRequest] = []
    queue = list(answers)

    def on_event(session, event):
        if isinstance(event, ev.ApprovalRequest):
            asked.append(event)
            answer = queue.pop(0) if queue else "deny"
            decision, feedback = answer if isinstance(answer, tuple) else (answer, None)
            session.submit(ApprovalDecision(event.request_id, decision, feedback))

    return on_event, asked


def tool_outputs(server) -> list[str]:
    return [m["content"] for m in server.chat_requests[-1].body["messages"] if m["role"] == "tool"]


def test_approve_once_shows_a_diff_and_asks_again_next_time(project, server):
    (project / "a.txt").write_text("old\n")
    server.add(Reply(tool_calls=[ToolCall("write_file", {"path": "a.txt", "content": "new\n"})]),
               Reply(tool_calls=[ToolCall("write_file", {"path": "a.txt", "content": "newer\n"})]),
               Reply(text="done"))
    on_event, asked = answering("approve", "deny")
    run = run_session(project, server, "edit", overrides=("mode=safe",), interactive=True, on_event=on_event)
    assert len(asked) == 2
    first = asked[0]
    assert first.kind == "tool" and first.details.tool == "write_file" and first.details.effect == "local_mutation"
    assert "-old" in first.details.diff and "+new" in first.details.diff
    assert first.options[:2] == ["approve", "approve_session"] and "deny" in first.options and "abort" in first.options
    assert (project / "a.txt").read_text() == "new\n"
    assert "denied" in tool_outputs(server)[1]
    assert run.ended.reason == "complete"


def test_approve_for_session_covers_exactly_that_file(project, server):
    server.add(Reply(tool_calls=[ToolCall("write_file", {"path": "a.txt", "content": "1"})]),
               Reply(tool_calls=[ToolCall("write_file", {"path": "a.txt", "content": "2"})]),
               Reply(tool_calls=[ToolCall("write_file", {"path": "b.txt", "content": "3"})]),
               Reply(text="done"))
    on_event, asked = answering("approve_session", "approve")
    run_session(project, server, "edit", overrides=("mode=safe",), interactive=True, on_event=on_event)
    assert [a.details.subject for a in asked] == ["a.txt", "b.txt"]
    assert (project / "a.txt").read_text() == "2" and (project / "b.txt").read_text() == "3"


def test_session_approval_of_git_push_does_not_approve_force_push_or_curl(project, server):
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    server.add(Reply(tool_calls=[ToolCall("shell", {"command": "git push origin main"})]),
               Reply(tool_calls=[ToolCall("shell", {"command": "git push origin main"})]),
               Reply(tool_calls=[ToolCall("shell", {"command": "git push --force origin main"})]),
               Reply(tool_calls=[ToolCall("shell", {"command": "curl -s http://127.0.0.1:9/"})]),
               Reply(tool_calls=[ToolCall("shell", {"command": "git push origin main && git push origin dev"})]),
               Reply(text="done"))
    on_event, asked = answering("approve_session", "deny", "deny", "deny")
    run_session(project, server, "push", overrides=("mode=auto",), interactive=True, on_event=on_event)
    subjects = [a.details.subject for a in asked]
    assert subjects == ["git push origin main", "git push --force origin main", "curl -s http://127.0.0.1:9/",
                        "git push origin main && git push origin dev"]
    assert asked[1].details.effect == "destructive" and asked[2].details.effect == "remote_action"
    assert "approve_always" not in asked[1].options  # a destructive command is never remembered
    outputs = tool_outputs(server)
    assert "denied" not in outputs[1]  # the second identical push ran without asking


def test_approve_always_writes_a_rule_that_later_sessions_follow(project, server, isolated_home):
    server.add(Reply(tool_calls=[ToolCall("shell", {"command": "echo pushed > /dev/null; git push origin main"})]),
               Reply(text="done"))
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    on_event, asked = answering("approve_always")
    run_session(project, server, "push", interactive=True, on_event=on_event)
    rules = (isolated_home / "rules.toml").read_text()
    assert 'prefix = ["git", "push", "origin", "main"]' in rules and 'decision = "allow"' in rules
    server.add(Reply(tool_calls=[ToolCall("shell", {"command": "git push origin main"})]), Reply(text="done"))
    on_event, asked_again = answering()
    run_session(project, server, "push again", interactive=True, on_event=on_event)
    assert asked_again == []


def test_deny_with_feedback_reaches_the_model(project, server):
    server.add(Reply(tool_calls=[ToolCall("write_file", {"path": "x.txt", "content": "x"})]), Reply(text="ok"))
    on_event, _ = answering(("deny", "use y.txt instead"))
    run_session(project, server, "go", overrides=("mode=safe",), interactive=True, on_event=on_event)
    out = tool_outputs(server)[0]
    assert "denied" in out and "use y.txt instead" in out
    assert not (project / "x.txt").exists()


def test_abort_ends_the_turn_and_skips_the_rest(project, server):
    server.add(Reply(tool_calls=[ToolCall("write_file", {"path": "x.txt", "content": "x"}),
                                 ToolCall("write_file", {"path": "y.txt", "content": "y"})]),
               Reply(text="after abort"))
    on_event, asked = answering("abort")

    def also_continue(session, event):
        on_event(session, event)
        if isinstance(event, ev.TurnEnded) and event.reason == "cancelled":
            from auger.protocol.ops import UserTurn
            session.submit(UserTurn("next"))

    run = run_session(project, server, "go", overrides=("mode=safe",), interactive=True, on_event=also_continue,
                      turns=2)
    assert [e.reason for e in run.of(ev.TurnEnded)] == ["cancelled", "complete"]
    assert len(asked) == 1 and not (project / "x.txt").exists() and not (project / "y.txt").exists()
    outputs = tool_outputs(server)
    assert "aborted" in outputs[0] and "interrupted" in outputs[1]


def test_plan_mode_refuses_changes_and_says_so(project, server):
    server.add(Reply(tool_calls=[ToolCall("write_file", {"path": "x.txt", "content": "x"}),
                                 ToolCall("shell", {"command": "rm -rf build"}),
                                 ToolCall("shell", {"command": "ls"})]),
               Reply(text="ok"))
    on_event, asked = answering()
    run_session(project, server, "plan it", overrides=("mode=plan",), interactive=True, on_event=on_event)
    outputs = tool_outputs(server)
    assert "plan mode" in outputs[0] and "plan mode" in outputs[1] and outputs[2].startswith("Exit code: 0")
    assert asked == [] and not (project / "x.txt").exists()


def test_mode_switches_mid_session(project, server):
    server.add(Reply(tool_calls=[ToolCall("write_file", {"path": "x.txt", "content": "x"})]), Reply(text="a"),
               Reply(tool_calls=[ToolCall("write_file", {"path": "x.txt", "content": "x"})]), Reply(text="b"))
    switched = []

    def on_event(session, event):
        if isinstance(event, ev.TurnEnded) and not switched:
            switched.append(True)
            session.submit(SetMode("auto"))

    run = run_session(project, server, "first", "second", overrides=("mode=plan",), on_event=on_event)
    changes = run.of(ev.ModeChanged)
    assert [(c.previous, c.mode) for c in changes] == [("plan", "auto")]
    assert run.of(ev.SessionConfigured)[0].mode == "plan"
    assert (project / "x.txt").read_text() == "x"


def test_headless_runs_deny_unless_approve_all(project, server, auger_home):
    server.add(Reply(tool_calls=[ToolCall("write_file", {"path": "x.txt", "content": "x"})]), Reply(text="gave up"))
    result = auger_cli("exec", "--mode", "safe", "--base-url", server.base_url, "-m", "m", "write", home=auger_home,
                       cwd=project)
    assert result.returncode == 3 and not (project / "x.txt").exists()  # refused, and nothing changed
    assert "headless run with nobody to approve" in tool_outputs(server)[0]
    server.add(Reply(tool_calls=[ToolCall("write_file", {"path": "x.txt", "content": "x"})]), Reply(text="did it"))
    result = auger_cli("exec", "--mode", "safe", "--approve-all", "--base-url", server.base_url, "-m", "m", "write",
                       home=auger_home, cwd=project)
    assert result.returncode == 0 and (project / "x.txt").read_text() == "x"


def test_forbidden_rule_is_never_run(project, server, isolated_home):
    (isolated_home / "rules.toml").write_text('[[rules]]\nprefix = "touch"\ndecision = "forbidden"\n')
    server.add(Reply(tool_calls=[ToolCall("shell", {"command": "touch made.txt"})]), Reply(text="ok"))
    run_session(project, server, "go", overrides=("approve_all=true",))
    assert "forbidden" in tool_outputs(server)[0] and not (project / "made.txt").exists()


def test_policy_check_prints_decision_and_rule(project, auger_home):
    (auger_home / "rules.toml").write_text('[[rules]]\nprefix = "git push"\ndecision = "prompt"\n')
    out = auger_cli("policy", "check", "--", "git", "push", "origin", "main", home=auger_home, cwd=project)
    assert out.returncode == 0, out.stderr
    assert "effect:   remote_action" in out.stdout
    assert 'prefix "git push" -> prompt' in out.stdout and "rules.toml:1" in out.stdout
    assert "decision: ask" in out.stdout
    out = auger_cli("policy", "check", "--mode", "plan", "--", "rm -rf build", home=auger_home, cwd=project)
    assert "effect:   destructive" in out.stdout and "decision: deny in plan mode" in out.stdout
    out = auger_cli("policy", "check", "--", "ls", "-la", home=auger_home, cwd=project)
    assert "rule:     none matches" in out.stdout and "decision: allow" in out.stdout


def test_two_answers_to_one_request_the_first_wins_and_everyone_sees_it_resolved(project, server):
    server.add(Reply(tool_calls=[ToolCall("write_file", {"path": "a.txt", "content": "x"})]), Reply(text="done"))
    answers: list[str | None] = []

    def on_event(session, event):
        if isinstance(event, ev.ApprovalRequest):
            assert [e.event.request_id for e in session.pending_approvals()] == [event.request_id]
            answers.append(session.decide(ApprovalDecision(event.request_id, "deny", by="phone"), "sub-phone"))
            answers.append(session.decide(ApprovalDecision(event.request_id, "approve", by="laptop")))
            assert session.pending_approvals() == []

    run = run_session(project, server, "edit", overrides=("mode=safe",), interactive=True, on_event=on_event)
    assert answers[0] is None and "already answered by phone" in answers[1]
    resolved = run.of(ev.ApprovalResolved)
    assert [(r.decision, r.by) for r in resolved] == [("deny", "phone")]
    assert not (project / "a.txt").exists()  # the first answer (deny) is the one that counted


def test_a_request_its_turn_ends_without_an_answer_is_withdrawn(project, server):
    server.add(Reply(tool_calls=[ToolCall("write_file", {"path": "a.txt", "content": "x"})]))

    def on_event(session, event):
        if isinstance(event, ev.ApprovalRequest):
            from auger.protocol.ops import Interrupt

            session.submit(Interrupt())

    run = run_session(project, server, "edit", overrides=("mode=safe",), interactive=True, on_event=on_event)
    request = run.of(ev.ApprovalRequest)[0]
    assert [(r.request_id, r.decision) for r in run.of(ev.ApprovalResolved)] == [(request.request_id, None)]
    assert run.ended.reason == "cancelled"
