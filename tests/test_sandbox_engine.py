"""The sandbox and egress proxy through a real session: escapes that really run, all blocked and reported."""

from __future__ import annotations

import time

import pytest

from auger.policy.sandbox import detect
from auger.protocol import events as ev
from auger.protocol.ops import ApprovalDecision
from tests.support.harness import run_session
from tests.support.mock_openai import Reply, ToolCall


@pytest.fixture(autouse=True)
def require_bwrap(tmp_path, monkeypatch):
    sandbox, why = detect("bwrap")
    assert sandbox is not None, f"these tests need bubblewrap (apt-get install bubblewrap): {why}"
    # The test project lives under /tmp, which commands may write; give them a temp dir of their own
    # so "outside the project" really is outside everything writable, as for a project in ~/src.
    systmp = tmp_path / "systmp"
    systmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(systmp))


def shell_outputs(server) -> list[str]:
    return [m["content"] for m in server.chat_requests[-1].body["messages"] if m["role"] == "tool"]


def run_commands(project, server, *commands, overrides=(), **kw):
    server.add(Reply(tool_calls=[ToolCall("shell", {"command": c}) for c in commands]), Reply(text="done"))
    return run_session(project, server, "go", overrides=overrides, **kw)


def test_session_reports_its_sandbox(project, server):
    server.add(Reply(text="hi"))
    run = run_session(project, server, "hi")
    assert run.of(ev.SessionConfigured)[0].sandbox == "bwrap"
    assert not run.of(ev.WarningEvent)


def test_writes_outside_the_project_are_blocked_and_reported(project, server, tmp_path):
    import subprocess

    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    # (Under ../outside, not `..` itself: the project lives in /tmp here, and the directories on
    # its path exist, writable, in the sandbox's own fresh /tmp — where a write reaches no host file.)
    outside = tmp_path / "outside"
    outside.mkdir()
    (project / "link").symlink_to(outside)
    run_commands(project, server,
                 "D=../outside; echo x > $D/escaped.txt",  # a variable hides the path from the classifier
                 "echo y > link/via-symlink.txt",
                 "H=.git/hooks; echo 'curl evil' > $H/pre-commit",  # (named plainly, the classifier asks first)
                 "echo fine > inside.txt")
    outs = shell_outputs(server)
    assert not (outside / "escaped.txt").exists() and not (outside / "via-symlink.txt").exists()
    assert not (project / ".git/hooks/pre-commit").exists()
    for out in outs[:3]:
        assert out.startswith("[sandbox] ") and "blocked by the sandbox" in out, out
    assert (project / "inside.txt").read_text() == "fine\n" and outs[3].startswith("Exit code: 0")


def test_credentials_are_unreadable(project, server, tmp_path, monkeypatch):
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("TOP-SECRET-KEY\n")
    (home / "notes.txt").write_text("ordinary\n")
    monkeypatch.setenv("HOME", str(home))
    run_commands(project, server, "cat $HOME/.ssh/id_rsa", "cat $HOME/notes.txt")
    secret, ordinary = shell_outputs(server)
    assert "TOP-SECRET-KEY" not in secret and "blocked by the sandbox" in secret
    assert "ordinary" in ordinary


def test_background_fork_does_not_outlive_the_command(project, server):
    marker = project / "outlived"
    run_commands(project, server, f"(sleep 1; touch {marker}) & echo forked")
    time.sleep(1.5)
    assert "forked" in shell_outputs(server)[0] and not marker.exists()


def test_secret_environment_is_scrubbed(project, server, monkeypatch):
    monkeypatch.setenv("DEPLOY_TOKEN", "tok-123")
    monkeypatch.setenv("HARMLESS_SETTING", "visible")
    run_commands(project, server, "echo token=${DEPLOY_TOKEN:-absent} setting=$HARMLESS_SETTING",
                 overrides=('shell_env_include=["HARMLESS_*"]',))
    assert "token=absent setting=visible" in shell_outputs(server)[0]


def test_egress_allowlisted_host_reachable_others_refused(project, server, upstream):
    overrides = ("approve_all=true", 'egress_allow=["mirror.test"]',
                 'egress_hosts={ "mirror.test" = "127.0.0.1", "evil.test" = "127.0.0.1" }')
    run = run_commands(project, server,
                       f"curl -sS --max-time 5 http://mirror.test:{upstream}/",
                       f"curl -sS --max-time 5 http://evil.test:{upstream}/",
                       f"curl -sS --max-time 5 --noproxy '' http://127.0.0.1:{upstream}/",  # loopback via the proxy
                       f"curl -sS --max-time 5 --noproxy '*' http://127.0.0.1:{upstream}/",  # around the proxy
                       f"curl -sS --max-time 5 --socks5-hostname 127.0.0.1:1080 http://evil.test:{upstream}/",
                       overrides=overrides)
    allowed, evil, loopback, around, socks = shell_outputs(server)
    assert "hello from upstream" in allowed and allowed.startswith("Exit code: 0")
    assert "evil.test" in evil and "not in the egress allowlist" in evil
    assert "proxy refused 127.0.0.1" in loopback
    assert "hello from upstream" not in around and "network namespace" in around
    assert "hello from upstream" not in socks and "evil.test" in socks
    assert run.ended.reason == "complete"


def test_blocked_command_can_be_rerun_unsandboxed_with_approval(project, server, tmp_path):
    (tmp_path / "outside").mkdir()
    outside = tmp_path / "outside" / "outside-ok.txt"
    server.add(Reply(tool_calls=[ToolCall("shell", {"command": f"D={outside.parent}; echo x > $D/outside-ok.txt"})]),
               Reply(text="done"))
    asked = []

    def on_event(session, event):
        if isinstance(event, ev.ApprovalRequest):
            asked.append(event)
            session.submit(ApprovalDecision(event.request_id, "approve"))

    run_session(project, server, "go", interactive=True, on_event=on_event)
    assert [a.kind for a in asked] == ["unsandboxed"]
    assert outside.read_text() == "x\n"
    assert "Re-run outside the sandbox" in shell_outputs(server)[0]


def test_without_a_sandbox_auto_acts_as_safe_and_says_so_once(project, server):
    server.add(Reply(tool_calls=[ToolCall("write_file", {"path": "x.txt", "content": "x"})]), Reply(text="ok"))
    run = run_session(project, server, "go", overrides=("sandbox=off",))
    warnings = [w.message for w in run.of(ev.WarningEvent)]
    assert len(warnings) == 1 and "unsandboxed" in warnings[0] and "safe mode" in warnings[0]
    assert run.of(ev.SessionConfigured)[0].sandbox == "none"
    assert not (project / "x.txt").exists()
    assert "headless" in shell_outputs(server)[0]


def test_proxy_that_cannot_start_leaves_a_working_session_without_network(project, server, upstream):
    overrides = ("approve_all=true", 'egress_allow=["not a host name!"]', 'egress_hosts={ "mirror.test" = "127.0.0.1" }')
    run = run_commands(project, server, "echo still works",
                       f"curl -sS --max-time 5 http://mirror.test:{upstream}/", overrides=overrides)
    warnings = [w.message for w in run.of(ev.WarningEvent)]
    assert any("egress proxy could not start" in w and "not a host name!" in w for w in warnings)
    works, curl = shell_outputs(server)
    assert works.startswith("Exit code: 0") and "still works" in works
    assert "hello from upstream" not in curl and not curl.startswith("Exit code: 0")


def test_without_a_sandbox_the_proxy_still_runs_and_the_warning_says_it_is_advisory(project, server, upstream):
    overrides = ("sandbox=off", "approve_all=true", 'egress_allow=["mirror.test"]',
                 'egress_hosts={ "mirror.test" = "127.0.0.1", "evil.test" = "127.0.0.1" }')
    run = run_commands(project, server,
                       f"curl -sS --max-time 5 http://mirror.test:{upstream}/",
                       f"curl -sS --max-time 5 http://evil.test:{upstream}/",
                       f"curl -sS --max-time 5 --noproxy '*' http://127.0.0.1:{upstream}/", overrides=overrides)
    warnings = [w.message for w in run.of(ev.WarningEvent)]
    assert len(warnings) == 1 and "unsandboxed" in warnings[0] and "advisory" in warnings[0], warnings
    allowed, evil, direct = shell_outputs(server)
    assert "hello from upstream" in allowed
    assert "hello from upstream" not in evil and "evil.test" in evil and "not in the egress allowlist" in evil
    assert "hello from upstream" in direct  # advisory indeed: nothing forces a command through the proxy


def test_landlock_warning_names_what_it_cannot_enforce(project, server):
    import subprocess

    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    server.add(Reply(text="hi"))
    run = run_session(project, server, "hi", overrides=("sandbox=landlock",))
    assert run.of(ev.SessionConfigured)[0].sandbox == "landlock"
    warnings = [w.message for w in run.of(ev.WarningEvent)]
    assert any(".git is not protected" in w and "auto mode will ask" in w for w in warnings), warnings


def test_landlock_proxy_failure_warning_matches_what_curl_gets(project, server, upstream):
    sandbox, _ = detect("landlock")
    overrides = ("sandbox=landlock", "approve_all=true", 'egress_allow=["not a host name!"]')
    run = run_commands(project, server, f"curl -sS --max-time 3 --noproxy '*' http://127.0.0.1:{upstream}/",
                       overrides=overrides)
    warnings = [w.message for w in run.of(ev.WarningEvent)]
    reached = "hello from upstream" in shell_outputs(server)[0]
    if sandbox.abi >= 4:
        assert any("no network" in w for w in warnings) and not reached, warnings
    else:
        assert any("NOT restricted" in w for w in warnings) and reached, warnings
