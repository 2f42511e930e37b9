"""Trust modes × effects, exec-policy rules and their precedence, environment scrubbing."""

from __future__ import annotations

import pytest

from auger.policy.env import command_env
from auger.policy.rules import Rule, RuleSet, append_rule, load_rules
from auger.policy.trust import ALLOW, ASK, DENY, decide
from auger.tools.base import DESTRUCTIVE, LOCAL_MUTATION, READ_ONLY, REMOTE_ACTION

# (mode, effect, outside) -> verdict, with a working sandbox
TABLE = {
    ("plan", READ_ONLY, False): ALLOW, ("plan", LOCAL_MUTATION, False): DENY,
    ("plan", REMOTE_ACTION, False): DENY, ("plan", DESTRUCTIVE, False): DENY,
    ("safe", READ_ONLY, False): ALLOW, ("safe", LOCAL_MUTATION, False): ASK,
    ("safe", REMOTE_ACTION, False): ASK, ("safe", DESTRUCTIVE, False): ASK,
    ("auto", READ_ONLY, False): ALLOW, ("auto", LOCAL_MUTATION, False): ALLOW,
    ("auto", REMOTE_ACTION, False): ASK, ("auto", DESTRUCTIVE, False): ASK,
    ("plan", READ_ONLY, True): ALLOW, ("safe", READ_ONLY, True): ALLOW, ("auto", READ_ONLY, True): ALLOW,
    ("plan", LOCAL_MUTATION, True): DENY, ("safe", LOCAL_MUTATION, True): ASK, ("auto", LOCAL_MUTATION, True): ASK,
}


@pytest.mark.parametrize(("mode", "effect", "outside"), list(TABLE))
def test_mode_by_effect(mode, effect, outside):
    assert decide(mode, effect, outside=outside).verdict == TABLE[(mode, effect, outside)]


def test_plan_refusal_tells_the_model_why():
    assert "plan mode" in decide("plan", LOCAL_MUTATION).reason


def test_auto_without_a_sandbox_acts_as_safe():
    assert decide("auto", LOCAL_MUTATION, sandboxed=False).verdict == ASK
    assert decide("auto", READ_ONLY, sandboxed=False).verdict == ALLOW


@pytest.mark.parametrize("mode", ["plan", "safe", "auto"])
def test_rules_adjust_every_mode(mode):
    assert decide(mode, READ_ONLY, rule="forbidden").verdict == DENY
    assert decide(mode, LOCAL_MUTATION, rule="forbidden").verdict == DENY
    assert decide(mode, READ_ONLY, rule="prompt").verdict == (ASK)
    # allow never opens plan mode, a destructive action, or an outside path
    assert decide(mode, LOCAL_MUTATION, rule="allow").verdict == (DENY if mode == "plan" else ALLOW)
    assert decide(mode, REMOTE_ACTION, rule="allow").verdict == (DENY if mode == "plan" else ALLOW)
    assert decide(mode, DESTRUCTIVE, rule="allow").verdict == (DENY if mode == "plan" else ASK)
    assert decide(mode, LOCAL_MUTATION, rule="allow", outside=True).verdict == (DENY if mode == "plan" else ASK)


def test_strictest_rule_wins_and_allow_needs_every_part():
    rules = RuleSet([Rule(("git",), "allow", "u:1"), Rule(("git", "push"), "prompt", "u:2"),
                     Rule(("git", "push", "--force"), "forbidden", "u:3"), Rule(("npm", "test"), "allow", "u:4")])
    assert rules.evaluate([("git", "status")]).decision == "allow"
    assert rules.evaluate([("git", "push", "origin")]).decision == "prompt"
    out = rules.evaluate([("git", "push", "--force", "origin")])
    assert out.decision == "forbidden" and out.rule.source == "u:3"
    assert rules.evaluate([("npm", "test"), ("git", "log")]).decision == "allow"
    # one part no rule covers: the mode decides, an allow elsewhere does not leak to it
    assert rules.evaluate([("npm", "test"), ("curl", "x")]).decision is None
    assert rules.evaluate([("npm", "test"), ("git", "push")]).decision == "prompt"
    assert rules.evaluate([("npmx",)]).decision is None  # whole words, not string prefixes


def test_rule_files_user_and_project(tmp_path):
    user, project = tmp_path / "rules.toml", tmp_path / "proj-rules.toml"
    user.write_text('[[rules]]\nprefix = "git push"\ndecision = "prompt"\n\n'
                    '[[rules]]\nprefix = ["rm", "-rf", "/"]\ndecision = "forbidden"\nreason = "never"\n')
    project.write_text('[[rules]]\nprefix = "make test"\ndecision = "allow"\n\n'
                       '[[rules]]\nprefix = "git push"\ndecision = "forbidden"\n\n'
                       '[[rules]]\nprefix = 42\ndecision = "allow"\n\n'
                       '[[rules]]\nprefix = "ls"\ndecision = "maybe"\n')
    rules, problems = load_rules(user, project)
    assert rules.evaluate([("git", "push")]).decision == "forbidden"  # project may tighten
    assert rules.evaluate([("make", "test")]).decision is None  # ...but not widen
    assert any("make test" in p and "trust_project_rules" in p for p in problems)
    assert any("'prefix' must be" in p for p in problems) and any("'decision' must be" in p for p in problems)
    assert rules.evaluate([("rm", "-rf", "/")]).rule.describe().endswith(": never")
    assert f"{user}:5" == rules.evaluate([("rm", "-rf", "/")]).rule.source
    trusted, _ = load_rules(user, project, trust_project=True)
    assert trusted.evaluate([("make", "test")]).decision == "allow"


def test_broken_rule_files_are_diagnosed_not_raised(tmp_path):
    bad = tmp_path / "rules.toml"
    bad.write_text("[[rules]\nprefix=")
    rules, problems = load_rules(bad, None)
    assert rules.rules == () and "invalid TOML" in problems[0]
    bad.write_bytes(b"\xff\xfe")
    assert "cannot read rules" in load_rules(bad, None)[1][0]
    bad.write_text('rules = "nope"')
    assert "array of tables" in load_rules(bad, None)[1][0]


def test_append_rule_records_exactly_the_prefix(tmp_path):
    path = tmp_path / "cfg" / "rules.toml"
    append_rule(path, ["git", "push", "origin", "main"])
    append_rule(path, ["echo", 'say "hi"\\'])
    rules, problems = load_rules(path, None)
    assert not problems
    assert rules.evaluate([("git", "push", "origin", "main")]).decision == "allow"
    assert rules.evaluate([("git", "push", "--force")]).decision is None
    assert rules.evaluate([("echo", 'say "hi"\\')]).decision == "allow"


def test_command_env_is_an_allow_list():
    base = {"PATH": "/bin", "HOME": "/h", "LC_ALL": "C", "OPENAI_API_KEY": "sk", "GITHUB_TOKEN": "t",
            "DB_PASSWORD": "p", "aws_secret_access_key": "s", "MY_SETTING": "ok", "KEEP_TOKEN": "k",
            "KEEP_MODE": "m", "KEEP_DATABASE_URL": "postgres://u:p@h/db", "EXACT_TOKEN": "e", "TZ": "UTC"}
    env = command_env(base, include=["KEEP_*", "EXACT_TOKEN"], exclude=["MY_*", "TZ"], set_values={"CI": "1"})
    # a glob include never brings in a secret-looking name; an exact name is the user's explicit choice
    assert env == {"PATH": "/bin", "HOME": "/h", "LC_ALL": "C", "KEEP_MODE": "m", "EXACT_TOKEN": "e", "CI": "1"}


def test_a_call_that_continues_an_allowed_one_does_not_ask_again_but_plan_and_rules_still_refuse():
    from auger.policy.decision import decide_call
    from auger.policy.types import Classification

    typed = Classification(LOCAL_MUTATION, "input to session 1", continues="input to session 1, which policy let run")
    assert decide_call("write_stdin", typed, RuleSet(), "safe", sandboxed=True).verdict == ALLOW
    assert decide_call("write_stdin", typed, RuleSet(), "auto", sandboxed=False).verdict == ALLOW
    assert decide_call("write_stdin", typed, RuleSet(), "plan", sandboxed=True).verdict == DENY
    plain = Classification(LOCAL_MUTATION, "input to session 1")
    assert decide_call("write_stdin", plain, RuleSet(), "safe", sandboxed=True).verdict == ASK
