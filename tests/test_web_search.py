"""web_search: the provider's hosted search on the Responses and Anthropic wires (the request carries the
hosted tool; cited pages reach the final message and its events, and may be fetched), a search service
of the user's own on any wire (against a loopback server), and what a session says when neither exists."""

from __future__ import annotations

import json

from auger.protocol import events as ev
from auger.protocol.items import AssistantMessage, SearchSources
from tests.support import mock_anthropic as ant
from tests.support import mock_responses as resp
from tests.support.harness import run_configured, run_session
from tests.support.mock_openai import MockChatServer, Reply, ToolCall
from tests.support.web_server import Page, WebServer

DOCS = ('egress_hosts={"docs.test" = "127.0.0.1"}', 'egress_allow=["docs.test"]')


def test_responses_hosted_search_is_offered_and_its_citations_reach_the_message_and_may_be_fetched(project):
    with WebServer({"/spin": Page("<h1>Spinning</h1><p>Call spin().</p>")}) as docs, \
            resp.MockResponsesServer() as server:
        page = docs.url("/spin", host="docs.test")
        server.add(resp.Reply(searches=[resp.WebSearch("widget spin", [page, "https://other.example/x"])],
                              text="Widgets spin when you call spin().",
                              citations=[resp.Citation(page, "Spinning widgets")],
                              tool_calls=[resp.ToolCall("web_fetch", {"url": page})]),
                   resp.Reply(text="done"))
        run, items = run_configured(project, "provider=openai", f"base_url={server.base_url}", "model=mock-model",
                          "web_search=true", *DOCS, env={"OPENAI_API_KEY": "sk-test"}, prompt="how do widgets spin?")
        first = server.responses_requests[0].body
        assert [r.path for r in docs.requests] == ["/spin"], "a page the search returned could not be fetched"
    assert {"type": "web_search"} in first["tools"]
    assert "web_search_call.action.sources" in first["include"]
    assert "web_search" not in [t.get("name") for t in first["tools"]]  # hosted, not a function of ours
    message = run.of(ev.AgentMessage)[0].text
    assert message == f"Widgets spin when you call spin().\n\nSources:\n- [Spinning widgets]({page})"
    assert any(isinstance(e, ev.MessageDelta) and page in e.delta for e in run.events)
    sources = [i for i in items if isinstance(i, SearchSources)]
    assert sources and sources[0].urls == [page, "https://other.example/x"]
    assert [e.ok for e in run.of(ev.ToolCallEnded)] == [True]


def test_anthropic_hosted_search_is_offered_and_its_citations_reach_the_message(project):
    with ant.MockAnthropicServer() as server:
        server.add(ant.Reply(searches=[ant.WebSearch("widget spin", [("https://docs.example/spin", "Spin")])],
                             text="Call spin().", citations=[ant.Citation("https://docs.example/spin", "Spin")]))
        run, items = run_configured(project, "provider=anthropic", f"base_url={server.base_url}", "model=claude-test",
                          "web_search=true", env={"ANTHROPIC_API_KEY": "k"})
        request = server.message_requests[0]
        assert not server.rejections, server.rejections
    assert request.body["tools"][0] == {"type": "web_search_20250305", "name": "web_search", "max_uses": 5}
    assert run.ended.reason == "complete", run.ended.message
    assert run.of(ev.AgentMessage)[0].text == "Call spin().\n\nSources:\n- [Spin](https://docs.example/spin)"
    assert [i.urls for i in items if isinstance(i, SearchSources)] == [["https://docs.example/spin"]]
    assert [i.text for i in items if isinstance(i, AssistantMessage)] == [run.of(ev.AgentMessage)[0].text]


def test_without_web_search_no_hosted_tool_is_sent(project):
    with resp.MockResponsesServer([resp.Reply(text="hi")]) as server:
        run_configured(project, "provider=openai", f"base_url={server.base_url}", "model=mock-model",
             env={"OPENAI_API_KEY": "sk-test"})
        body = server.responses_requests[0].body
    assert all(t["type"] == "function" for t in body["tools"])
    assert "web_search_call.action.sources" not in body.get("include", [])


def test_a_configured_search_service_backs_a_web_search_tool_and_its_results_may_be_fetched(project):
    answer = {"query": "widget", "results": [
        {"title": "Widget guide", "url": "", "content": "How widgets   spin."},
        {"title": "Elsewhere", "url": "https://elsewhere.example/", "content": ""}]}
    with WebServer() as search, WebServer({"/guide": Page("<h1>Guide</h1>")}) as docs:
        guide = docs.url("/guide", host="docs.test")
        answer["results"][0]["url"] = guide
        search.pages["/search"] = Page(json.dumps(answer), "application/json")
        template = search.url("/search?q={query}&format=json", host="search.test")
        with MockChatServer([Reply(tool_calls=[ToolCall("web_search", {"query": "widget spin & more"})]),
                             Reply(tool_calls=[ToolCall("web_fetch", {"url": guide})]),
                             Reply(text="done")]) as server:
            run = run_session(project, server, "find the widget guide", overrides=(
                f"web_search_url={template}", 'egress_hosts={"docs.test" = "127.0.0.1", "search.test" = "127.0.0.1"}',
                'egress_allow=["docs.test"]'))
            tools = [t["function"]["name"] for t in server.chat_requests[0].body["tools"]]
            found = [m["content"] for m in server.chat_requests[1].body["messages"] if m["role"] == "tool"][0]
        assert [r.path for r in search.requests] == ["/search?q=widget+spin+%26+more&format=json"]
        assert [r.path for r in docs.requests] == ["/guide"]
    assert "web_search" in tools
    assert found == f"1. Widget guide\n   {guide}\n   How widgets spin.\n2. Elsewhere\n   https://elsewhere.example/"
    assert [e.ok for e in run.of(ev.ToolCallEnded)] == [True, True]


def test_a_search_service_that_fails_is_an_error_the_model_reads(project):
    with WebServer({"/search": Page("<html>not json</html>")}) as search:
        template = search.url("/search?q={query}", host="search.test")
        with MockChatServer([Reply(tool_calls=[ToolCall("web_search", {"query": "x"})]), Reply(text="done")]) as server:
            run = run_session(project, server, "search", overrides=(
                f"web_search_url={template}", 'egress_hosts={"search.test" = "127.0.0.1"}'))
    ended = run.of(ev.ToolCallEnded)[0]
    assert not ended.ok and "did not answer JSON" in ended.output


def test_web_search_on_a_wire_without_hosted_search_says_so_and_offers_nothing(project):
    with MockChatServer([Reply(text="hi")]) as server:
        run = run_session(project, server, "hi", overrides=("web_search=true",))
        tools = [t["function"]["name"] for t in server.chat_requests[0].body["tools"]]
    assert "web_search" not in tools
    assert any("no hosted web search; set web_search_url" in w.message for w in run.of(ev.WarningEvent))


def test_a_bad_search_service_url_is_a_warning(project):
    with MockChatServer([Reply(text="hi")]) as server:
        run = run_session(project, server, "hi", overrides=("web_search_url=https://search.example/",))
        tools = [t["function"]["name"] for t in server.chat_requests[0].body["tools"]]
    assert "web_search" not in tools
    assert any("must contain {query}" in w.message for w in run.of(ev.WarningEvent))
