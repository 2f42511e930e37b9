"""MCP server prompts as slash commands (`/mcp__<server>__<prompt> args`) and images in MCP tool results,
against the tests' own MCP server (tests/support/mcp_server.py: prompt `review(topic)`, tool `picture`)
through the real model loop; what the model was sent is read from the mock server's request log."""

from __future__ import annotations

from auger.protocol import events as ev
from auger.tools.mcp_servers import prompt_commands
from tests.support.harness import conversation
from tests.support.mock_openai import MockChatServer, Reply, ToolCall
from tests.support.mcp_server import PNG

from tests.test_hooks import run_with, tool_message
from tests.test_mcp_client import STDIO, run_mcp


def _user_texts(request) -> list[str]:
    return [m["content"] for m in conversation(request.messages) if m["role"] == "user"]


def test_a_server_prompt_is_expanded_by_the_server_with_its_arguments(project, server):
    server.add(Reply(text="one"), Reply(text="two"), Reply(text="three"))
    commands = []

    def note(session, event):
        if isinstance(event, ev.TurnEnded) and not commands:
            commands.extend(prompt_commands(session.runtime.router.registry))

    run, _ = run_mcp(project, server, "/mcp__t__review the parser", "/mcp__t__review topic=lexer",
                     "/mcp__t__nothing here", servers={"t": STDIO}, on_event=note)
    assert [e.reason for e in run.of(ev.TurnEnded)] == ["complete"] * 3
    assert _user_texts(server.chat_requests[0]) == ["Please review the parser carefully."]
    assert _user_texts(server.chat_requests[1])[-1] == "Please review lexer carefully."
    assert _user_texts(server.chat_requests[2])[-1] == "/mcp__t__nothing here"  # no such prompt: sent as typed
    assert commands == [("mcp__t__review", "Review something.")]


def test_a_missing_argument_stops_the_message_with_the_usage(project, server):
    server.add(Reply(text="unused"))
    run, _ = run_mcp(project, server, "/mcp__t__review", servers={"t": STDIO})
    assert run.ended.reason == "error"
    assert run.ended.message == "message not sent: /mcp__t__review needs topic (usage: /mcp__t__review <topic>)"
    assert not server.chat_requests


def _image_parts(request) -> list[str]:
    return [part["image_url"]["url"] for m in request.messages if isinstance(m.get("content"), list)
            for part in m["content"] if part.get("type") == "image_url"]


PICTURE = Reply(tool_calls=[ToolCall("mcp__t__picture", {}, id="p1")])


def test_an_image_from_an_mcp_tool_reaches_a_model_that_takes_images(project, server):
    server.add(PICTURE, Reply(text="a dot"), Reply(text="still there"))
    run = run_with(project, server, "look", "and again", tables={"mcp_servers": {"t": STDIO}})
    assert [e.reason for e in run.of(ev.TurnEnded)] == ["complete", "complete"]
    after = server.chat_requests[1]
    assert tool_message(after, "p1").startswith("a picture\n[image image/png, about ")
    assert tool_message(after, "p1").endswith("[1 image attached in the next message]")
    assert _image_parts(after) == [f"data:image/png;base64,{PNG}"]
    assert _image_parts(server.chat_requests[2]) == [f"data:image/png;base64,{PNG}"]  # part of the history


def test_a_text_only_model_gets_a_note_instead(project, server):
    server.add(PICTURE, Reply(text="no picture"))
    run = run_with(project, server, "look", tables={
        "mcp_servers": {"t": STDIO}, "providers": {"openai-compatible": {"models": {"mock-model": {
            "supports_images": False}}}}})
    assert run.ended.reason == "complete"
    after = server.chat_requests[1]
    assert _image_parts(after) == []
    assert tool_message(after, "p1").endswith("[1 image not shown: model 'mock-model' does not take images]")


def test_a_rejected_tool_image_is_replaced_by_a_note_and_the_turn_goes_on(project):
    with MockChatServer(reject_images="Invalid content type. image_url is only supported by certain models.") as srv:
        srv.add(PICTURE, Reply(text="ok without it"))
        run = run_with(project, srv, "look", tables={"mcp_servers": {"t": STDIO}})
        assert run.ended.reason == "complete"
        last = srv.chat_requests[-1]
        assert _image_parts(last) == []
        assert "was removed: the model provider rejected it" in str(last.messages)
