"""Reads that start while the model's reply still streams, on every wire API: a read the policy allows
unasked starts as soon as its arguments are complete; a write, and every call after it, waits for the
reply's end; a stream that is dropped takes its early calls with it. Each mock server holds its stream
just before the reply's end, and looks at what the engine did meanwhile (files opened, written, fetched)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from pathlib import Path

import pytest

from auger.engine.session.sessions import SessionManager
from auger.engine.workspace import Workspace
from auger.models.anthropic import AnthropicClient
from auger.models.openai_chat import OpenAIChatClient
from auger.models.openai_responses import OpenAIResponsesClient
from auger.protocol import events as ev
from auger.protocol.items import ToolCall, ToolOutput
from auger.store.sqlite import SqliteStore
from tests.support import mock_anthropic, mock_openai, mock_responses
from tests.support.file_opens import FileOpens
from tests.support.harness import Run, drive, hook_command, make_config

WIRES = ("chat", "responses", "anthropic")
MOCKS = {"chat": mock_openai, "responses": mock_responses, "anthropic": mock_anthropic}
SERVERS = {"chat": mock_openai.MockChatServer, "responses": mock_responses.MockResponsesServer,
           "anthropic": mock_anthropic.MockAnthropicServer}
REPLY_END = {"chat": b'"finish_reason":"tool_calls"', "responses": b"event: response.completed",
             "anthropic": b"event: message_delta"}  # the first event of each wire's end of a reply with calls
QUIET = 0.3  # seconds a call that must not have started is given to show that it did


def _client(wire: str, base_url: str):
    if wire == "chat":
        return OpenAIChatClient(provider="openai-compatible", model="mock-model", base_url=base_url, api_key="k")
    if wire == "responses":
        return OpenAIResponsesClient(provider="openai", model="mock-model", base_url=base_url, api_key="k")
    return AnthropicClient(provider="anthropic", model="claude-test", base_url=base_url, api_key="k")


def _session(wire: str, project: Path, server, prompt: str, *overrides: str, providers: dict | None = None,
             hooks: dict | None = None) -> tuple[Run, list]:
    """One turn through `wire`'s client (snapshots off: their start-up scan would open every file);
    `providers`, `hooks`: the config's [providers] and [hooks] tables."""

    async def main():
        config = make_config("snapshots=false", *overrides)
        config.tables["providers"] = providers or {}
        config.tables["hooks"] = hooks or {}
        store = SqliteStore(project.parent / "sessions.db")
        try:
            session = await SessionManager(Workspace.open(project, config), store).create(_client(wire, server.base_url))
            run = await asyncio.wait_for(drive(session, prompt), 30)
            return run, [stored.item for stored in await store.load_items(session.id)]
        finally:
            await store.aclose()

    return asyncio.run(main())


def _reply(wire: str, *calls: tuple[str, dict], text: str = ""):
    mock = MOCKS[wire]
    return mock.Reply(text=text, tool_calls=[mock.ToolCall(name, args) for name, args in calls], chunk_chars=16)


@pytest.mark.parametrize("wire", WIRES)
def test_a_read_starts_while_the_reply_streams_and_a_write_waits_for_its_end(wire, project):
    first, last = project / "first.txt", project / "last.txt"
    first.write_text("read early\n")
    last.write_text("read after the write\n")
    written = project / "new.txt"
    seen: dict[str, bool] = {}
    reply = _reply(wire, ("read_file", {"path": "first.txt"}), ("write_file", {"path": "new.txt", "content": "x\n"}),
                   ("read_file", {"path": "last.txt"}), text="Reading, then writing.")
    with FileOpens(first, last) as opens, SERVERS[wire]([reply, _reply(wire, text="done")]) as server:

        def hold(event: bytes) -> None:
            if REPLY_END[wire] in event and not seen:
                seen["first read"] = opens.wait(first, 5)
                time.sleep(QUIET)
                seen["write"] = written.exists()
                seen["read after the write"] = opens.count(last) > 0

        server.pace = hold
        run, items = _session(wire, project, server, "go")
    assert seen == {"first read": True, "write": False, "read after the write": False}
    assert run.ended.reason == "complete" and written.read_text() == "x\n"
    outputs = [i for i in items if isinstance(i, ToolOutput)]
    calls = [i for i in items if isinstance(i, ToolCall)]
    assert [o.call_id for o in outputs] == [c.call_id for c in calls] and all(o.ok for o in outputs)
    assert "read early" in outputs[0].output and "read after the write" in outputs[2].output
    kinds = [type(e) for e in run.events]  # told in the durable order: the reply, then its calls
    assert kinds.index(ev.TokenUsage) < kinds.index(ev.ToolCallStarted)
    assert [e.call_id for e in run.of(ev.ToolCallStarted)] == [c.call_id for c in calls]


@pytest.mark.parametrize("event", ["before_tool", "after_tool"])
def test_with_tool_hooks_every_call_waits_for_the_reply(event, project, tmp_path):
    """A hook is the user's program, run once per call that stands: no call starts before the reply is in."""
    notes = project / "notes.txt"
    notes.write_text("notes\n")
    hook = hook_command(tmp_path, "log", "open(%r, 'a').write(event['tool'] + '\\n')" % str(tmp_path / "hook.log"))
    seen = []
    with FileOpens(notes) as opens, mock_openai.MockChatServer(
            [_reply("chat", ("read_file", {"path": "notes.txt"}), ("list_dir", {})), _reply("chat", text="done")]
    ) as server:

        def hold(event_bytes: bytes) -> None:
            if REPLY_END["chat"] in event_bytes and not seen:
                seen.append(opens.wait(notes, QUIET))

        server.pace = hold
        run, _ = _session("chat", project, server, "go", hooks={event: [{"command": hook}]})
    assert seen == [False] and run.ended.reason == "complete"
    assert sorted((tmp_path / "hook.log").read_text().split()) == ["list_dir", "read_file"]  # run together


@pytest.mark.parametrize("wire", WIRES)
def test_a_dropped_stream_cancels_its_early_calls_and_forgets_them(wire, project):
    """The first attempt's stream ends before the reply is complete, while a search it started early is still
    waiting for the search service: the search is cancelled (its connection closed), nothing of it is
    recorded or shown, and the retried reply is what the turn goes on with."""
    with _HangingPage() as service, SERVERS[wire]() as server:
        search = ("web_search", {"query": "widgets"})
        read = ("read_file", {"path": "notes.txt"})
        (project / "notes.txt").write_text("notes\n")
        server.add(_dropped(wire, _reply(wire, search, read)), _reply(wire, text="done without it"))

        def hold(event: bytes) -> None:
            if b"still going" in event:  # the broken stream's last words: the search has started by now
                service.requested.wait(5)

        server.pace = hold
        run, items = _session(wire, project, server, "search for widgets", "model_retry_base_delay=0.01",
                              f'web_search_url="http://127.0.0.1:{service.port}/search?q={{query}}&format=json"')
        closed = service.closed_by_client.wait(5)
    assert service.requested.is_set() and closed  # started while the reply streamed, then cancelled
    assert run.ended.reason == "complete" and len(run.of(ev.Retrying)) == 1
    assert not run.of(ev.ToolCallStarted) and not run.of(ev.ToolCallEnded)
    assert not [i for i in items if isinstance(i, (ToolCall, ToolOutput))]
    replies = [r for r in server.requests if r.method == "POST" and r.body.get("stream")]
    assert len(replies) == 2 and EARLY_ID[wire] not in str(replies[1].body)  # never sent back


EARLY_ID = {"chat": "call_a", "responses": "call_a", "anthropic": "toolu_a"}


@pytest.mark.parametrize("wire", WIRES)
def test_a_model_that_takes_one_call_at_a_time_is_told_so(wire, project):
    client = _client(wire, "http://127.0.0.1:9")
    described = {client.provider: {"models": {client.model: {"supports_parallel_tools": False}}}}
    bodies = []
    for providers in (None, described):
        with SERVERS[wire]([_reply(wire, text="ok")]) as server:
            run, _ = _session(wire, project, server, "hi", providers=providers)
            assert run.ended.reason == "complete"
            bodies += [r.body for r in server.requests if r.method == "POST" and r.body.get("stream")]
    if wire == "anthropic":
        assert "tool_choice" not in bodies[0]
        assert bodies[1]["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}
    else:
        assert bodies[0].get("parallel_tool_calls", True) is True and bodies[1]["parallel_tool_calls"] is False


def _dropped(wire: str, reply):
    """`reply`'s stream through its first call (and the start of its second), then a line no server sends
    (an SSE comment where the wire skips them), then its end: the reply is broken, so the client retries."""
    mock = MOCKS[wire]
    if wire == "chat":
        chunks = mock.stream_chunks(reply, [(f"call_{n}", c.name, c.arguments_json)
                                            for n, c in zip("ab", reply.tool_calls)],
                                    completion_id="chatcmpl-x", created=0, model="mock-model", include_usage=False,
                                    usage={})
        cut = next(i for i, c in enumerate(chunks) if c["choices"] and (c["choices"][0]["delta"].get("tool_calls")
                                                                        or [{}])[0].get("index") == 1)
        return mock.Raw([*chunks[:cut + 1], ": still going"], done=False)
    if wire == "responses":
        events = mock.response_events(reply, response_id="resp_x", model="mock-model", created=0,
                                      call_ids=["call_a", "call_b"], include_encrypted=False,
                                      usage=mock.response_usage(reply, 0), include_sources=False)
        cut = next(i for i, e in enumerate(events) if e["type"] == "response.output_item.done"
                   and e["item"]["type"] == "function_call")
        return mock.Raw([*events[:cut + 1], ": still going"])
    calls = [(f"toolu_{n}", c.name, c.input_json) for n, c in zip("ab", reply.tool_calls)]
    events = [data for _, data in mock.stream_events(reply, calls, message_id="msg_x", model="claude-test",
                                                     usage=mock.message_usage(reply, calls, 0))]
    cut = next(i for i, e in enumerate(events) if e["type"] == "content_block_stop")
    return mock.Raw([*events[:cut + 1], ": still going"])


class _HangingPage:
    """A web server whose one answer never comes: it says when it was asked, and when the asker hung up."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.requested = threading.Event()
        self.closed_by_client = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        try:
            conn, _ = self._listener.accept()
        except OSError:
            return
        with conn:
            conn.recv(65536)
            self.requested.set()
            conn.settimeout(10)
            try:
                while conn.recv(65536):
                    pass
                self.closed_by_client.set()
            except OSError:
                pass

    def __enter__(self) -> _HangingPage:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._listener.close()


def test_a_chat_call_that_goes_on_after_the_next_began_is_a_broken_stream(project):
    """Chat Completions hands a call on when the next index starts: a server that then adds to the earlier
    call sent a stream no client can follow, and the reply is asked for again."""
    def chunk(delta: dict) -> dict:
        return {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "mock-model",
                "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}

    def call(index: int, **fields) -> dict:
        return chunk({"tool_calls": [{"index": index, **fields}]})

    interleaved = mock_openai.Raw([
        call(0, id="call_1", type="function", function={"name": "list_dir", "arguments": '{"path"'}),
        call(1, id="call_2", type="function", function={"name": "list_dir", "arguments": "{}"}),
        call(0, function={"arguments": ': "."}'}),
        {**chunk({}), "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}])
    with mock_openai.MockChatServer([interleaved, _reply("chat", text="done")]) as server:
        run, items = _session("chat", project, server, "look", "model_retry_base_delay=0.01")
    assert run.ended.reason == "complete"
    assert ["tool call 0 continued after a later one began" in r.reason for r in run.of(ev.Retrying)] == [True]
    assert not [i for i in items if isinstance(i, ToolCall)]
