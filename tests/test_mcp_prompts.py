"""MCP server prompts as slash commands (`/mcp__<server>__<prompt> args`), against the tests' own MCP
server (tests/support/mcp_server.py, prompt `review(topic)`) through the real model loop."""

from __future__ import annotations

from auger.protocol import events as ev
from auger.tools.mcp_servers import prompt_commands
from tests.support.harness import conversation
from tests.support.mock_openai import Reply

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
