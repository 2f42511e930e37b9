"""Root cause 9: commands get an allow-list of environment variables, not the user's whole environment.

The attack: a read-only command (`env`, which every mode runs without asking) prints the
environment, and the output goes to the model's next request. Judged by its effect: a secret's
value must not appear in anything sent to the provider. The control shows the same command does
reveal a variable the user explicitly allowed, so the payload works when the variable is let in.
"""

from __future__ import annotations

import json

import pytest

from tests.support.harness import run_session
from tests.support.redteam_sandbox import KINDS
from tests.support.mock_openai import Reply, ToolCall

SECRETS = {
    "MYSQL_PWD": "rc9-mysql-pwd-value",
    "DATABASE_URL": "postgres://app:rc9-db-url-value@db.internal/app",
    "GITHUB_PAT": "rc9-github-pat-value",
    "AWS_ACCESS_KEY_ID": "rc9-aws-access-key-value",
    "AWS_SECRET_ACCESS_KEY": "rc9-aws-secret-value",
    "AWS_SESSION_TOKEN": "rc9-aws-session-value",
    "AWS_PROFILE": "rc9-aws-profile-value",
    "FOO_CREDENTIAL": "rc9-foo-credential-value",
    "SSH_AUTH_SOCK": "/tmp/rc9-agent-socket-value",
}


def _requests_text(server) -> str:
    return json.dumps([r.body for r in server.chat_requests])


@pytest.mark.parametrize("sandbox", [*KINDS, "off"])
@pytest.mark.parametrize("mode", ["plan", "safe", "auto"])
def test_secret_variables_never_reach_a_command(project, server, monkeypatch, mode, sandbox):
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    server.add(Reply(tool_calls=[ToolCall("shell", {"command": "env | grep rc9- ; echo visible=$LANG-end"})]),
               Reply(text="done"))
    monkeypatch.setenv("LANG", "C.UTF-8")
    # a glob include must not let the AWS credentials back in
    run_session(project, server, "look", overrides=(f"mode={mode}", f"sandbox={sandbox}", "approve_all=true",
                                                       'shell_env_include=["AWS_*"]'))
    sent = _requests_text(server)
    assert "visible=C.UTF-8-end" in sent, "the command did not run"
    leaked = [name for name, value in SECRETS.items() if value in sent and name != "AWS_PROFILE"]
    assert leaked == []
    assert SECRETS["AWS_PROFILE"] in sent  # not a secret: the glob include does let it in


def test_control_an_explicitly_included_variable_is_visible(project, server, monkeypatch):
    monkeypatch.setenv("MYSQL_PWD", SECRETS["MYSQL_PWD"])
    server.add(Reply(tool_calls=[ToolCall("shell", {"command": "env | grep rc9-"})]), Reply(text="done"))
    run_session(project, server, "look", overrides=("mode=safe", 'shell_env_include=["MYSQL_PWD"]'))
    assert SECRETS["MYSQL_PWD"] in _requests_text(server)
