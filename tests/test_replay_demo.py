"""The replay provider (cassettes, exporting a stored session, replaying it) and `auger demo`."""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from auger.engine.session.sessions import SessionManager
from auger.engine.workspace import Workspace
from auger.models.base import (
    Completed, ModelError, ModelRequest, ReasoningDelta, TextDelta, ToolCallReady, UsageReport,
)
from auger.models.replay import (
    RecordedCall, RecordedReply, ReplayClient, ReplayError, cassette_from_items, dump_cassette, load_cassette,
    parse_cassette,
)
from auger.protocol import events as ev
from auger.protocol.events import Usage
from auger.protocol.items import (
    AssistantMessage, Compaction, ContextMessage, Reasoning, ToolCall, ToolOutput, TurnAborted, UserMessage,
)
from auger.store.sqlite import SqliteStore
from tests.support.harness import Run, drive, make_config, run_session
from tests.support.mock_openai import Reply, ToolCall as MockCall


def collect(client: ReplayClient, request: ModelRequest | None = None) -> list:
    async def main():
        return [event async for event in client.stream(request or ModelRequest("sys", [UserMessage("hi")]))]

    return asyncio.run(main())


def replay_session(project: Path, replies: list[RecordedReply], db: Path, *prompts: str) -> Run:
    """One session of the real engine in `project`, its model replaced by the replies."""
    async def main() -> Run:
        store = SqliteStore(db)
        try:
            session = await SessionManager(Workspace.open(project, make_config()), store).create(
                ReplayClient(replies=replies))
            return await asyncio.wait_for(drive(session, *prompts), 60)
        finally:
            await store.aclose()

    return asyncio.run(main())


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts}


# -- cassettes -------------------------------------------------------------------------------
def test_cassette_round_trip(tmp_path):
    replies = [
        RecordedReply(text="Looking.", reasoning="first, look",
                      tool_calls=[RecordedCall("shell", {"command": "ls -la"}, "c1"),
                                  RecordedCall("grep", '{"pattern": "x",  "path": "."}')],
                      usage=Usage(100, 10, 20, 5), finish_reason="tool_calls"),
        RecordedReply(text="Über done ✓"),
        RecordedReply(),
    ]
    text = dump_cassette(replies, header="exported for a test\nsecond line")
    assert text.startswith("# exported for a test\n# second line\n")
    assert len(text.splitlines()) == 5 and all(json.loads(line) is not None for line in text.splitlines()[2:])
    path = tmp_path / "c.jsonl"
    path.write_text(text + "\n   \n# trailing comment\n", encoding="utf-8")
    assert load_cassette(path) == replies == parse_cassette(text)
    with pytest.raises(ReplayError, match=r"^<exported>:2: not valid JSON"):
        parse_cassette('{"text": "ok"}\n{', "<exported>")
    assert dump_cassette(load_cassette(path), header="exported for a test\nsecond line") == text


@pytest.mark.parametrize("line, problem", [
    ("{not json", "not valid JSON"),
    ('["a list"]', "expected a JSON object"),
    ('{"txt": "typo"}', "unknown key(s) 'txt'"),
    ('{"text": 5}', "'text' must be a string"),
    ('{"tool_calls": {"name": "shell"}}', "'tool_calls' must be a list"),
    ('{"tool_calls": [{"arguments": {}}]}', "tool_calls[0] needs a 'name'"),
    ('{"tool_calls": [{"name": "shell", "arguments": [1]}]}', "'arguments' must be a JSON object or a string"),
    ('{"usage": {"input_tokens": 1}}', "'usage' needs 'output_tokens'"),
    ('{"usage": {"input_tokens": -1, "output_tokens": 2}}', "must be a non-negative integer"),
    ('{"finish_reason": 1}', "'finish_reason' must be a string"),
])
def test_malformed_line_names_file_and_line(tmp_path, line, problem):
    path = tmp_path / "bad.jsonl"
    path.write_text(f'# header\n{{"text": "fine"}}\n\n{line}\n{{"text": "never read"}}\n')
    with pytest.raises(ReplayError) as info:
        load_cassette(path)
    assert isinstance(info.value, ValueError)
    assert str(info.value).startswith(f"{path}:4: ") and problem in str(info.value)


def test_unreadable_cassette(tmp_path):
    with pytest.raises(ReplayError, match="missing.jsonl: cannot read cassette"):
        load_cassette(tmp_path / "missing.jsonl")


def test_cassette_from_items_groups_replies():
    items = [
        ContextMessage("<environment_context/>", "environment"),
        UserMessage("fix it"),
        Reasoning("hmm"), AssistantMessage("Looking."), ToolCall("a", "shell", '{"command": "ls"}'),
        ToolCall("b", "grep", '{"pattern":"x"}'),  # not in json.dumps form: kept verbatim
        ToolOutput("a", "..."), ToolOutput("b", "..."),
        Reasoning("", encrypted="opaque", provider="anthropic"),  # provider state only
        ToolCall("c", "read_file", '{"path": "x.py"}'),
        TurnAborted("interrupted"),
        UserMessage("go on"),
        Compaction("summary", ["fix it"]),
        AssistantMessage("Done."),
    ]
    assert cassette_from_items(items) == [
        RecordedReply(text="Looking.", reasoning="hmm",
                      tool_calls=[RecordedCall("shell", {"command": "ls"}, "a"),
                                  RecordedCall("grep", '{"pattern":"x"}', "b")]),
        RecordedReply(tool_calls=[RecordedCall("read_file", {"path": "x.py"}, "c")]),
        RecordedReply(text="Done."),
    ]


# -- the client --------------------------------------------------------------------------------
def test_client_streams_replies_as_events():
    client = ReplayClient(replies=[
        RecordedReply(text="A fairly long message that is streamed in several chunks, word by word, so it shows.",
                      reasoning="think", tool_calls=[RecordedCall("shell", {"command": "ls"}),
                                                     RecordedCall("read_file", '{"path": "a"}', "mine")]),
        RecordedReply(tool_calls=[RecordedCall("list_dir")], usage=Usage(7, 3), finish_reason="length"),
        RecordedReply(text="bye"),
    ])
    first = collect(client)
    texts = [e.text for e in first if isinstance(e, TextDelta)]
    assert len(texts) > 1 and "".join(texts).startswith("A fairly long message") and texts[-1].endswith("shows.")
    assert isinstance(first[0], ReasoningDelta) and first[0].text == "think"
    assert [e for e in first if isinstance(e, ToolCallReady)] == [
        ToolCallReady("replay_1", "shell", '{"command": "ls"}'), ToolCallReady("mine", "read_file", '{"path": "a"}')]
    usage = next(e for e in first if isinstance(e, UsageReport)).usage
    assert usage.input_tokens > 0 and usage.output_tokens > 0  # estimated: nothing was recorded
    assert first[-1] == Completed("tool_calls")
    second = collect(client)
    assert second == [ToolCallReady("replay_2", "list_dir", "{}"), UsageReport(Usage(7, 3)), Completed("length")]
    assert collect(client)[-1] == Completed("stop") and client.remaining == 0
    with pytest.raises(ModelError) as info:
        collect(client)
    assert not info.value.retryable and "replay cassette exhausted after 3 replies" in str(info.value)


def test_exhausted_cassette_ends_the_turn_with_a_clear_error(project, tmp_path):
    run = replay_session(project, [RecordedReply(tool_calls=[RecordedCall("list_dir", {})])], tmp_path / "s.db",
                         "look around")
    assert run.ended.reason == "error"
    assert run.ended.message.startswith("replay cassette exhausted after 1 reply")
    assert not run.of(ev.Retrying)  # not retryable: no backoff, no "failed after 5 attempts"
    assert [e.name for e in run.of(ev.ToolCallEnded)] == ["list_dir"]


def test_stored_session_exports_and_replays_identically(project, server, tmp_path):
    """Record a real session (mock HTTP model), rebuild its cassette from the store, replay it in a fresh
    copy of the project: the same tool calls run and the same files result."""
    (project / "notes.txt").write_text("seed\n")
    fresh = tmp_path / "fresh"
    shutil.copytree(project, fresh)
    run_greet = f"{sys.executable} -c \"import greet; print(greet.greet('{{}}'))\""
    server.add(
        Reply(text="Writing the module.", tool_calls=[MockCall("write_file", {
            "path": "greet.py", "content": "def greet(name):\n    return 'Hi ' + name\n"})]),
        Reply(tool_calls=[MockCall("shell", {"command": run_greet.format("x") + " > out.txt"})]),
        Reply(reasoning="make it friendlier", tool_calls=[
            MockCall("read_file", {"path": "greet.py"}),
            MockCall("edit_file", {"path": "greet.py", "old_string": "'Hi '", "new_string": "'Hello, '"})]),
        Reply(tool_calls=[MockCall("shell", {"command": run_greet.format("y") + " >> out.txt"})]),
        Reply(text="Done: greet.py says hello."),
    )
    db = tmp_path / "original.db"
    original = run_session(project, server, "write a greeter", db=db)
    assert original.ended.reason == "complete" and not server.errors, (original.ended, server.errors)
    assert (project / "out.txt").read_text() == "Hi x\nHello, y\n"

    async def load():
        store = SqliteStore(db)
        try:
            return [s.item for s in await store.load_items(original.session_id)]
        finally:
            await store.aclose()

    replies = cassette_from_items(asyncio.run(load()))
    assert len(replies) == 5 and replies[2].reasoning == "make it friendlier"
    assert replies[-1] == RecordedReply(text="Done: greet.py says hello.")
    cassette = tmp_path / "exported.jsonl"
    cassette.write_text(dump_cassette(replies))

    replayed = replay_session(fresh, load_cassette(cassette), tmp_path / "replay.db", "write a greeter")
    assert replayed.ended.reason == "complete"

    def calls(run: Run):
        return [(e.call_id, e.name, e.arguments) for e in run.of(ev.ToolCallStarted)]

    assert calls(replayed) == calls(original) and len(calls(original)) == 5
    assert [e.ok for e in replayed.of(ev.ToolCallEnded)] == [True] * 5
    assert tree(fresh) == tree(project)
    assert [e.text for e in replayed.of(ev.AgentMessage)] == [e.text for e in original.of(ev.AgentMessage)]


# -- auger demo -------------------------------------------------------------------------------------
def demo(**kwargs) -> tuple[int, str, str]:
    from auger.demo.run import run_demo

    out, err = io.StringIO(), io.StringIO()
    code = run_demo(out=out, err=err, delay=0, **kwargs)
    return code, out.getvalue(), err.getvalue()


LABEL = "auger demo — a scripted session replayed from a cassette; no model is called"


def test_demo_fixes_the_sample_and_cleans_up(isolated_home):
    code, out, err = demo()
    assert code == 0, out + err
    assert err == ""
    assert out.startswith(LABEL + "\n")
    assert "auger demo — a scripted session replayed from a cassette; no model was called" in out
    summaries = re.findall(r"^  (Exit code: \d+) \|", out, re.M)
    assert summaries == ["Exit code: 1", "Exit code: 0"]  # red, then green
    assert out.index("▸ edit_file booklist/paging.py") < out.rindex("▸ shell python3 -m unittest")
    assert "Fixed: `page_count`" in out
    assert "✓ The sample project's tests now pass" in out
    project = Path(re.search(r"^  project  (\S+)", out, re.M).group(1))
    assert project.name == "booklist" and not project.parent.exists()  # the temp dir is removed
    assert os.environ["AUGER_HOME"] == str(isolated_home)  # restored
    # nothing written to the (test's) user home: only the config the suite put there
    assert [p.name for p in isolated_home.iterdir()] == ["config.toml"]


def test_demo_json_output_keeps_the_project(isolated_home):
    code, out, err = demo(json_output=True, keep=True)
    assert code == 0, out + err
    events = [json.loads(line) for line in out.splitlines()]
    assert events[0]["type"] == "session_configured" and events[0]["provider"] == "replay"
    assert events[-1]["type"] == "shutdown_complete"
    assert [e["reason"] for e in events if e["type"] == "turn_ended"] == ["complete"]
    assert LABEL in err  # labels go to err, so `out` stays JSON
    project = Path(events[0]["cwd"])
    try:
        assert f"kept in {project}" in err
        assert "(total + per_page - 1) // per_page" in (project / "booklist/paging.py").read_text()
        assert (project / "README.md").read_text().startswith("# booklist")
    finally:
        shutil.rmtree(project.parent)


def test_demo_works_without_a_sandbox(monkeypatch):
    import auger.policy.sandbox as sandbox

    monkeypatch.setattr(sandbox, "detect", lambda preference="auto": (None, "no sandbox: simulated for a test"))
    code, out, err = demo()
    assert code == 0, out + err
    assert "  sandbox  none" in out
    assert re.findall(r"^  (Exit code: \d+) \|", out, re.M) == ["Exit code: 1", "Exit code: 0"]


def test_demo_reports_a_failed_turn(monkeypatch):
    import auger.demo.run as demo_run

    broken = demo_run.CASSETTE.parent / "missing.jsonl"
    monkeypatch.setattr(demo_run, "CASSETTE", broken)
    code, out, err = demo()
    assert code == 1
    assert err.startswith("auger demo: failed: ReplayError: ") and "missing.jsonl" in err
    assert len(err.splitlines()) == 1


def test_demo_as_a_command_with_an_empty_home(tmp_path):
    home = tmp_path / "empty-home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("AUGER_") and not k.endswith(("_API_KEY", "_KEY", "_TOKEN"))}
    env["HOME"] = str(home)
    result = subprocess.run([sys.executable, "-c", "from auger.demo.run import run_demo; raise SystemExit(run_demo())"],
                            env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith(LABEL) and "✓ The sample project's tests now pass" in result.stdout
    assert not any(home.iterdir())


def test_demo_finds_python3_when_path_has_none(monkeypatch):
    import auger.demo.run as demo_run

    real_which = shutil.which
    monkeypatch.setattr(demo_run.shutil, "which",
                        lambda name, *a, **k: None if name == "python3" else real_which(name, *a, **k))
    path = demo_run._python3_path()
    bindir = os.path.dirname(sys.executable)
    if os.path.exists(os.path.join(bindir, "python3")):
        assert path["PATH"].split(os.pathsep)[0] == bindir
    else:
        assert path == {}
    monkeypatch.setattr(demo_run.shutil, "which", real_which)
    if real_which("python3"):
        assert demo_run._python3_path() == {}  # left alone when PATH has one
