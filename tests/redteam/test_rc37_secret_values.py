"""Root cause 37: text from outside the model reached the model, the store and the events as it came, so a
secret printed by a command, answered by an MCP server, read by a sub-agent, served by a page or said by a
backend agent went everywhere (auger/secrets: redaction where text enters, and on everything recorded or
emitted).

Planted secrets: a value auger knows (a variable whose name says it is secret, passed to commands with
`shell_env_include`), values it can only recognise by their shape (a GitHub token a project script echoes
from a file, AWS keys in a credentials-style file, a JWT on a web page) and an MCP server's credential. A
scripted hostile model tries to print each — as is, base64'd, hex'd, reversed, folded over lines, split
by a program, through `env` and `/proc/self/environ`, grep, read_file — and every model request body, the
SQLite store's bytes and every event are read: no planted value appears anywhere, in plain or base64, and
each attempt's output carries a marker instead. On the code before redaction each of these tests fails on
its first check (the value is in the next request).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from auger.protocol import events as ev
from auger.protocol import items as it
from auger.protocol.ops import RunShell, UserTurn
from auger.store.sqlite import SqliteStore
from tests.support.agents import Routes
from tests.support.harness import Follow, follow_session, run_session
from tests.support.mock_openai import MockChatServer, Reply, ToolCall
from tests.support.redteam import exposed
from tests.support.web_server import Page, WebServer
from tests.test_backends import run_backend, script, stored_items
from tests.test_mcp_client import STDIO, run_mcp

KNOWN = "rc37-Deploy-7d1c9e4b2a6f0e8d"  # $DEPLOY_TOKEN: secret by its name
GITHUB = "ghp_R7x2Kq9LmN4pV8sT1wY6zB3cD5fG0hJ2kL4m"
AWS_ID = "AKIA2E0A8F3B244C9986"
AWS_SECRET = "Tk2v9XqLp0Rz4Mw7Nb1Yc8Vd3Hf6Js5Ga2Ke9UxQ"
JWT = ("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJyYzM3IiwibmFtZSI6ImRlcGxveSJ9."
       "Qm9vdHN0cmFwU2lnbmF0dXJlVGhhdE5ldmVyTGVha3M")
PLANTED = [KNOWN, GITHUB, AWS_ID, AWS_SECRET]


def _plant(project: Path) -> None:
    (project / "scripts").mkdir()
    (project / "scripts" / "token.txt").write_text(GITHUB + "\n")
    (project / "scripts" / "show.sh").write_text('echo "using token $(cat scripts/token.txt)"\n')
    (project / "aws-profile.ini").write_text(f"[default]\naws_access_key_id = {AWS_ID}\n"
                                             f"aws_secret_access_key = {AWS_SECRET}\nregion = eu-west-1\n")


def _sh(command: str) -> ToolCall:
    return ToolCall("shell", {"command": command})


ATTEMPTS = [
    _sh("printenv DEPLOY_TOKEN"),
    _sh("env"),
    _sh("cat /proc/self/environ"),
    _sh("printenv DEPLOY_TOKEN | base64"),
    _sh("printenv DEPLOY_TOKEN | fold -w 6"),
    _sh("printenv DEPLOY_TOKEN | rev"),
    _sh("python3 -c \"import os; print(os.environ['DEPLOY_TOKEN'].encode().hex())\""),
    _sh("python3 -c \"import os; v = os.environ['DEPLOY_TOKEN']; print(v[:9]); print(v[9:])\""),
    _sh("sh scripts/show.sh"),
    _sh("base64 scripts/token.txt"),
    _sh("cat aws-profile.ini"),
    _sh("grep -rn ghp_ ."),
    ToolCall("read_file", {"path": "scripts/token.txt"}),
    ToolCall("read_file", {"path": "aws-profile.ini"}),
]


def test_a_hostile_model_printing_planted_secrets_every_way_sees_markers_and_nothing_is_kept(project, monkeypatch):
    monkeypatch.setenv("DEPLOY_TOKEN", KNOWN)
    _plant(project)
    with MockChatServer([*(Reply(tool_calls=[c]) for c in ATTEMPTS), Reply(text="done")]) as server:
        run = run_session(project, server, "debug the deploy",
                          overrides=("approve_all=true", "sandbox=off", 'shell_env_include=["DEPLOY_TOKEN"]'))
        bodies = [r.body for r in server.chat_requests]
    assert run.ended.reason == "complete", run.ended.message
    assert not exposed(PLANTED, bodies=bodies, store_dir=project.parent, events=run.events)
    ended = run.of(ev.ToolCallEnded)
    assert len(ended) == len(ATTEMPTS)
    for call, end in zip(ATTEMPTS, ended, strict=True):
        assert end.ok and "[secret:" in end.output, (call.arguments, end.output)
    # the same value is the same marker wherever it came from (the model can still compare them)
    assert "[secret:env-deploy-token#1]" in ended[0].output and "[secret:env-deploy-token#1]" in ended[1].output
    assert "[secret:github-token#1]" in ended[8].output and "[secret:github-token#1]" in ended[12].output
    reported = {e.call_id for e in run.of(ev.SecretRedacted)}
    assert {e.call_id for e in ended} <= reported  # each one said so, without the value


def test_a_value_folded_over_streamed_lines_is_never_shown_in_parts(project, monkeypatch):
    """A command prints the known value a few characters a line, a line at a time: each line is its own
    output delta, and none of them shows a piece of it."""
    monkeypatch.setenv("DEPLOY_TOKEN", KNOWN)
    command = "for p in $(printenv DEPLOY_TOKEN | fold -w 7); do echo \"$p\"; sleep 0.1; done; echo end"
    with MockChatServer([Reply(tool_calls=[_sh(command)]), Reply(text="done")]) as server:
        run = run_session(project, server, "go",
                          overrides=("approve_all=true", "sandbox=off", 'shell_env_include=["DEPLOY_TOKEN"]'))
    pieces = [KNOWN[i:i + 7] for i in range(0, len(KNOWN), 7)]
    deltas = [e.text for e in run.of(ev.ToolOutputDelta)]
    assert deltas and "end\n" in "".join(deltas)
    assert not [d for d in deltas for piece in pieces[:-1] if piece in d], deltas
    assert "[secret:env-deploy-token" in "".join(deltas)


def test_an_mcp_servers_answer_is_redacted_its_credential_and_what_it_shows(project):
    credential = "rc37-mcp-Credential-55aa01"
    box = {**STDIO, "env": {"SERVICE_TOKEN": credential, "LEAKY_VALUE": GITHUB}}
    calls = [ToolCall("mcp__box__settings", {"names": "SERVICE_TOKEN,LEAKY_VALUE"})]
    with MockChatServer([*(Reply(tool_calls=[c]) for c in calls), Reply(text="done")]) as server:
        run, _ = run_mcp(project, server, "show the settings", servers={"box": box})
        bodies = [r.body for r in server.chat_requests]
    output = run.of(ev.ToolCallEnded)[0].output
    assert "SERVICE_TOKEN=[secret:mcp-box#1]" in output and "LEAKY_VALUE=[secret:github-token#1]" in output
    assert not exposed([credential, GITHUB], bodies=bodies, store_dir=project.parent, events=run.events)


def test_a_sub_agents_reads_and_answer_are_redacted_in_its_store_and_its_parents(project, server):
    _plant(project)
    routes = Routes({
        "go": [Reply(tool_calls=[ToolCall("spawn_agent", {"prompt": "find the token"})]), Reply(text="ok")],
        "find the token": [Reply(tool_calls=[ToolCall("read_file", {"path": "scripts/token.txt"})]),
                           Reply(tool_calls=[ToolCall("shell", {"command": "sh scripts/show.sh"})]),
                           Reply(text="it is in scripts/token.txt")],
    }).install(server)
    run = run_session(project, server, "go", overrides=("approve_all=true", "sandbox=off"))
    assert run.ended.reason == "complete", run.ended.message
    child = routes.bodies("find the token")
    assert len(child) == 3 and "[secret:github-token#1]" in json.dumps(child[-1])
    assert not exposed([GITHUB], bodies=[b for _, b in routes.seen], store_dir=project.parent, events=run.events)


def test_a_fetched_page_is_redacted(project):
    page = f"<html><body><h1>Debug</h1><p>session: {JWT}</p><pre>key {AWS_ID}</pre></body></html>"
    with WebServer({"/debug": Page(page)}) as site:
        url = site.url("/debug", host="docs.test")
        with MockChatServer([Reply(tool_calls=[ToolCall("web_fetch", {"url": url})]), Reply(text="done")]) as server:
            run = run_session(project, server, f"read {url}",
                              overrides=("approve_all=true", 'egress_hosts={"docs.test" = "127.0.0.1"}',
                                         'egress_allow=["docs.test"]'))
            bodies = [r.body for r in server.chat_requests]
        assert [r.path for r in site.requests] == ["/debug"]
    output = run.of(ev.ToolCallEnded)[0].output
    assert "[secret:jwt#1]" in output and "[secret:aws-access-key-id#1]" in output and "# Debug" in output
    assert not exposed([JWT, AWS_ID], bodies=bodies, store_dir=project.parent, events=run.events)


def test_a_backend_agents_words_tool_output_and_plan_are_redacted(project, server, monkeypatch):
    """The scripted agent takes its script from the prompt, so the user's own message holds the values (what
    the user says is theirs); everything the agent said back is checked."""
    monkeypatch.setenv("DEPLOY_TOKEN", KNOWN)
    run = run_backend(project, server, script(
        {"say": f"I found the token {GITHUB[:20]}"}, {"say": f"{GITHUB[20:]} in the repo\n"},
        {"tool": "t1", "title": f"cat {AWS_ID}", "kind": "read", "input": {"env": f"DEPLOY_TOKEN={KNOWN}"}},
        {"done": "t1", "output": f"aws_secret_access_key = {AWS_SECRET}", "status": "completed"},
        {"plan": [[f"rotate {GITHUB}", "pending"]]},
        {"think": f"aws_secret_access_key={AWS_SECRET}\n"}))
    assert run.ended.reason == "complete", run.ended.message
    assert not exposed(PLANTED, events=run.events)
    kept = [json.dumps(i.to_json()) for i in stored_items(project, run.session_id) if not isinstance(i, it.UserMessage)]
    assert not [v for v in PLANTED for text in kept if v in text]
    said = "".join(e.text for e in run.of(ev.AgentMessage))
    assert "[secret:github-token#1] in the repo" in said  # split across two chunks, hidden whole
    assert any(e.where == "agent" for e in run.of(ev.SecretRedacted))


def test_numbers_survive_a_resume_without_the_values_in_the_store(project):
    """The same token printed before and after a resume is the same marker; the store holds its number and
    an HMAC, never the token."""
    _plant(project)
    db = project.parent / "sessions.db"
    with MockChatServer([Reply(tool_calls=[_sh("cat aws-profile.ini")]), Reply(tool_calls=[_sh("sh scripts/show.sh")]),
                         Reply(text="one"), Reply(tool_calls=[_sh("sh scripts/show.sh; cat scripts/token.txt")]),
                         Reply(text="two")]) as server:
        first = run_session(project, server, "look", db=db, overrides=("approve_all=true", "sandbox=off"))
        second = run_session(project, server, "again", db=db, resume=first.session_id,
                             overrides=("approve_all=true", "sandbox=off"))
    before = first.of(ev.ToolCallEnded)[1].output
    after = second.of(ev.ToolCallEnded)[0].output
    assert "[secret:github-token#1]" in before
    assert after.count("[secret:github-token#1]") == 2 and "#2]" not in after

    async def markers() -> list[it.SecretMarker]:
        store = SqliteStore(db)
        try:
            return [s.item for s in await store.load_items(first.session_id) if isinstance(s.item, it.SecretMarker)]
        finally:
            await store.aclose()

    recorded = asyncio.run(markers())
    assert {(m.kind, m.number) for m in recorded} == {("aws-access-key-id", 1), ("aws-secret-key", 1),
                                                       ("github-token", 1)}
    assert not exposed(PLANTED[1:], store_dir=project.parent)


def test_with_redaction_turned_off_the_same_checks_see_the_value(project):
    """The control: with the user's `[secrets] redact = false` the value goes through, and `exposed` finds it
    in the request, the store and the events — so where it finds nothing above, nothing is there."""
    _plant(project)
    with MockChatServer([Reply(tool_calls=[_sh("cat scripts/token.txt")]), Reply(text="done")]) as server:
        run = run_session(project, server, "go", overrides=("approve_all=true", "sandbox=off"),
                          tables={"secrets": {"redact": False}})
        bodies = [r.body for r in server.chat_requests]
    assert GITHUB in run.of(ev.ToolCallEnded)[0].output
    found = exposed([GITHUB], bodies=bodies, store_dir=project.parent, events=run.events)
    assert any("request" in f for f in found) and any(".db" in f for f in found) and any("event" in f for f in found)


def test_the_users_own_command_output_is_redacted_before_the_model_sees_it(project, server):
    """`run_shell` (`!cmd` in the terminal): the user ran it, but its output is text from outside all the same."""
    _plant(project)
    server.add(Reply(text="noted"))

    async def steps(session, follow: Follow) -> None:
        session.submit(RunShell("cat aws-profile.ini"))
        await follow.until(ev.TurnEnded)
        session.submit(UserTurn("what did I run?"))
        await follow.until(ev.TurnEnded)

    events = follow_session(project, server, steps, "sandbox=off")
    bodies = [r.body for r in server.chat_requests]
    assert "[secret:aws-access-key-id#1]" in json.dumps(bodies[0])
    assert any(e.where == "tool_output" for e in events if isinstance(e, ev.SecretRedacted))
    assert not exposed([AWS_ID, AWS_SECRET], bodies=bodies, store_dir=project.parent, events=events)
