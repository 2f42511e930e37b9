"""Root cause 13: "approve always" must not lose the approval when the rule file cannot be written.

Each case answers approve_always in a real interactive session whose user rules file cannot be
written (tests run as root, so permission bits would not stop the write: the path itself is made
impossible). The effect judged: the approved command ran (its file exists), the user was warned that
the rule was not saved, and the model saw the command's output rather than an internal error.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from auger.protocol import events as ev
from tests.support.harness import run_session
from tests.support.mock_openai import Reply, ToolCall
from tests.test_approvals import answering, tool_outputs


def _rules_path_is_a_directory(home: Path) -> None:
    (home / "rules.toml").mkdir()


def _config_dir_under_a_regular_file(home: Path, monkeypatch) -> None:
    blocker = home / "not-a-dir"
    blocker.write_text("a regular file where a directory should be\n")
    monkeypatch.setenv("AUGER_HOME", str(blocker / "home"))


@pytest.mark.parametrize("breakage", ["directory-at-rules-path", "parent-is-a-file"])
def test_approve_always_runs_the_command_and_warns_when_the_rule_cannot_be_saved(
        project, server, isolated_home, monkeypatch, breakage):
    if breakage == "directory-at-rules-path":
        _rules_path_is_a_directory(isolated_home)
    else:
        _config_dir_under_a_regular_file(isolated_home, monkeypatch)
    server.add(Reply(tool_calls=[ToolCall("shell", {"command": "touch approved.txt && echo ran-it"})]),
               Reply(tool_calls=[ToolCall("shell", {"command": "touch approved.txt && echo ran-it"})]),
               Reply(text="done"))
    on_event, asked = answering("approve_always")
    run = run_session(project, server, "go", overrides=("mode=safe",), interactive=True, on_event=on_event)
    assert len(asked) == 1 and "approve_always" in asked[0].options
    assert (project / "approved.txt").exists(), "the approved command did not run"
    warnings = [w.message for w in run.of(ev.WarningEvent)]
    assert any(w.startswith("the rule was not saved: ") and w.endswith("; approved for this session")
               for w in warnings), warnings
    outputs = tool_outputs(server)
    assert len(outputs) == 2 and all("ran-it" in out for out in outputs), outputs  # the second call: session grant
    assert run.ended.reason == "complete"
