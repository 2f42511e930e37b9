"""The session's tool catalog: registry generations, overlays, prompt contributions, and a rendering
that is rebuilt only when a part of its key changes."""

from __future__ import annotations

import asyncio
import json

from auger.tools.base import READ_ONLY, SessionToolState, ToolContext, ToolResult, ToolSpec
from auger.tools.router import Overlay, ToolRouter
from auger.tools.toolset import Contribution, StaticToolset


def _spec(name: str) -> ToolSpec:
    async def handler(args, ctx):
        return ToolResult(f"{name} ran")

    return ToolSpec(name, f"the {name} tool", {"type": "object", "properties": {}}, handler, effect=READ_ONLY)


class Talking(StaticToolset):
    """A tool source with something to say in the system prompt while its tools are offered."""

    def __init__(self, names, text, **kw) -> None:
        super().__init__([_spec(n) for n in names])
        self._contribution = Contribution(text, tools=frozenset(names), **kw)

    def contributions(self):
        return [self._contribution]


def test_catalog_is_rebuilt_only_when_its_key_changes():
    async def main():
        router = await ToolRouter.open(StaticToolset([_spec("read")]))
        first = router.catalog("BASE")
        start = router.rebuilds
        for _ in range(5):
            assert router.catalog("BASE") is first
            await router.refresh()
        assert router.rebuilds == start
        await router.registry.add("srv", Talking(["mcp__srv__x"], "SRV SAYS"))
        second = router.catalog("BASE")
        assert router.rebuilds == start + 1
        assert [s.name for s in second.schemas] == ["read", "mcp__srv__x"]
        assert second.system_prompt == "BASE\n\nSRV SAYS"
        assert router.catalog("BASE") is second and router.rebuilds == start + 1
        await router.registry.remove("srv")
        third = router.catalog("BASE")
        assert router.rebuilds == start + 2 and third.system_prompt == "BASE" and router.names == ["read"]
        await router.close()

    asyncio.run(main())


def test_overlay_adds_tools_and_can_hide_the_base(tmp_path):
    async def main():
        router = await ToolRouter.open(StaticToolset([_spec("read"), _spec("write")]))
        router.catalog("B")
        before = router.rebuilds
        extra = StaticToolset([_spec("review")])
        router.set_overlay(Overlay([extra], [Contribution("You are reviewing.", slot="guidance")],
                                   include_base=False))
        catalog = router.catalog("B")
        assert router.rebuilds == before + 1
        assert [s.name for s in catalog.schemas] == ["review"]
        assert catalog.system_prompt == "B\n\nYou are reviewing."
        assert router.get("write") is None
        ctx = ToolContext(root=tmp_path, state=SessionToolState(scratch_dir=tmp_path / "s"), call_id="c",
                          archive=None)
        assert (await router.call(router.get("review"), {}, ctx)).output == "review ran"
        router.set_overlay(Overlay())
        assert router.names == ["review"]  # the last rendering stays until the next request renders
        assert router.catalog("B").schemas and router.names == ["read", "write"]

    asyncio.run(main())


def test_contributions_follow_their_tools_and_are_ordered_by_slot_and_priority():
    async def main():
        router = await ToolRouter.open(StaticToolset([_spec("read")]))
        await router.registry.add("b", Talking(["b1"], "B tools", priority=50))
        await router.registry.add("a", Talking(["a1"], "A tools", priority=10))
        router.set_overlay(Overlay([], [Contribution("guide first", slot="guidance", priority=999),
                                        Contribution("only with zz", tools=frozenset({"zz"}))]))
        assert router.catalog("BASE").system_prompt == "BASE\n\nguide first\n\nA tools\n\nB tools"
        await router.registry.remove("a")
        assert router.catalog("BASE").system_prompt == "BASE\n\nguide first\n\nB tools"

    asyncio.run(main())


def test_a_source_whose_tools_changed_moves_the_generation_at_refresh():
    class Changing(StaticToolset):
        def __init__(self):
            super().__init__([_spec("one")])
            self.pending = False

        async def refresh(self) -> bool:
            if not self.pending:
                return False
            self.pending = False
            self._specs["two"] = _spec("two")
            return True

    async def main():
        router = await ToolRouter.open(StaticToolset([]))
        changing = Changing()
        await router.registry.add("c", changing)
        router.catalog("")
        before = router.rebuilds
        await router.refresh()
        assert router.catalog("").schemas == router.schemas and router.rebuilds == before
        changing.pending = True
        await router.refresh()
        assert [s.name for s in router.catalog("").schemas] == ["one", "two"]
        assert router.rebuilds == before + 1
        assert json.dumps([s.name for s in router.schemas]) == '["one", "two"]'

    asyncio.run(main())


def test_a_removed_mcp_server_is_never_started_again(tmp_path):
    import sys
    from pathlib import Path

    from auger.tools.mcp import McpToolset
    from auger.tools.mcp_config import parse_server

    root = Path(__file__).resolve().parent.parent
    server = parse_server("t", {"command": sys.executable, "args": ["-m", "tests.support.mcp_server"],
                                "cwd": str(root)})
    ctx = ToolContext(root=tmp_path, state=SessionToolState(scratch_dir=tmp_path / "s"), call_id="c", archive=None)

    async def main():
        toolset = McpToolset(server, root=tmp_path, warn=print)
        await toolset.open()
        assert (await toolset.call("mcp__t__echo", {"text": "a"}, ctx)).output == "echo: a"
        await toolset.close()
        late = await toolset.call("mcp__t__echo", {"text": "b"}, ctx)  # a call in flight at removal
        assert not late.ok and "was removed" in late.output

    asyncio.run(main())


FIRST_REQUEST_LIMIT = 12 * 1024  # bytes: the whole first request of a session, every default tool offered


def test_the_first_request_with_every_default_tool_stays_small(project):
    """Every default tool's schema rides on every request: the first one, system prompt and context
    included, stays within 12 KB (bench/bench_core.py reports the Chat figure) — also on the default
    provider's wire (Responses), where an OpenAI model is offered apply_patch too."""
    from tests.support import mock_responses
    from tests.support.harness import run_configured, run_session
    from tests.support.mock_openai import MockChatServer, Reply

    with MockChatServer([Reply(text="done")]) as server:
        run_session(project, server, "hi")
        chat = server.chat_requests[0]
    with mock_responses.MockResponsesServer([mock_responses.Reply(text="done")]) as server:
        run_configured(project, "provider=openai", f"base_url={server.base_url}", "model=gpt-5",
                       env={"OPENAI_API_KEY": "sk-test"})
        responses = server.responses_requests[0]
    offered = [t["function"]["name"] for t in chat.body["tools"]]
    assert {"shell", "exec_command", "write_stdin", "read_file", "web_fetch", "spawn_agent"} <= set(offered)
    assert offered.index("exec_command") == offered.index("shell") + 1
    assert not OPT_IN & set(offered)
    assert not FOLLOW_UPS & set(offered)  # offered once the session has a sub-agent
    assert "apply_patch" in {t.get("name") for t in responses.body["tools"]}
    for wire, request in (("chat", chat), ("responses", responses)):
        assert len(request.raw) <= FIRST_REQUEST_LIMIT, f"{wire}: the first request is {len(request.raw):,} bytes"


OPT_IN = {"run_code"}
FOLLOW_UPS = {"wait_agent", "send_input", "cancel_agent", "list_agents", "apply_agent_changes"}


def test_code_mode_is_offered_when_turned_on_and_the_interactive_pair_can_be_turned_off(project):
    """run_code (`code_mode = true`) rides on every request once on, on both OpenAI wires;
    `exec_sessions = false` takes exec_command/write_stdin away."""
    from tests.support import mock_responses
    from tests.support.harness import run_configured, run_session
    from tests.support.mock_openai import MockChatServer, Reply

    on = ("code_mode=true",)
    with MockChatServer([Reply(text="done")]) as server:
        run_session(project, server, "hi", overrides=on)
        chat = [t["function"]["name"] for t in server.chat_requests[0].body["tools"]]
    with mock_responses.MockResponsesServer([mock_responses.Reply(text="done")]) as server:
        run_configured(project, "provider=openai", f"base_url={server.base_url}", "model=gpt-5", *on,
                       env={"OPENAI_API_KEY": "sk-test"})
        responses = [t.get("name") for t in server.responses_requests[0].body["tools"]]
    for names in (chat, responses):
        assert set(names) >= OPT_IN and names.index("exec_command") == names.index("shell") + 1
    with MockChatServer([Reply(text="done")]) as server:
        run_session(project, server, "hi", overrides=("exec_sessions=false",))
        off = {t["function"]["name"] for t in server.chat_requests[0].body["tools"]}
    assert "shell" in off and not {"exec_command", "write_stdin"} & off


def test_the_sub_agent_follow_ups_join_the_catalog_after_the_first_spawn(project):
    """Only spawn_agent rides on a session's requests until it has a sub-agent; from the request after
    the spawn on, wait_agent, send_input and the others are offered (and work)."""
    from tests.support.harness import run_session
    from tests.support.mock_openai import MockChatServer, Reply, ToolCall

    replies = [Reply(tool_calls=[ToolCall("spawn_agent", {"prompt": "say hello", "agent": "explore"})]),
               Reply(text="hello"),  # the child's answer
               Reply(tool_calls=[ToolCall("list_agents", {})]),
               Reply(text="done")]
    with MockChatServer(replies) as server:
        run_session(project, server, "delegate")
        requests = server.chat_requests
    offered = [{t["function"]["name"] for t in r.body.get("tools", [])} for r in requests]
    assert "spawn_agent" in offered[0] and not FOLLOW_UPS & offered[0]
    assert offered[2] >= FOLLOW_UPS
    listed = requests[3].body["messages"][-1]
    assert listed["role"] == "tool" and "explore" in listed["content"]


def test_a_follow_up_called_before_any_sub_agent_is_told_to_spawn_one_first(project, auger_home):
    """A model may call wait_agent or list_agents before it has started a sub-agent: it reads that none has
    been started yet and how to start one, while the follow-ups stay out of the requests."""
    from tests.support.harness import auger_cli
    from tests.support.mock_openai import MockChatServer, Reply, ToolCall

    calls = [ToolCall("wait_agent", {}), ToolCall("list_agents", {}), ToolCall("send_input", {"agent_id": "a1",
                                                                                              "message": "hi"})]
    with MockChatServer([Reply(tool_calls=calls), Reply(text="done")]) as server:
        result = auger_cli("exec", "--base-url", server.base_url, "-m", "mock-model", "-c", "generate_titles=false",
                           "wait for your agents", home=auger_home, cwd=project)
        requests = server.chat_requests
    assert result.returncode == 0 and result.stdout == "done\n", result.stderr
    outputs = [m["content"] for m in requests[1].body["messages"] if m["role"] == "tool"]
    assert len(outputs) == 3
    for name, output in zip(("wait_agent", "list_agents", "send_input"), outputs, strict=True):
        assert output.startswith(f"Error: {name}: no sub-agent has been started in this session yet"), output
        assert "Start one with spawn_agent" in output and "there is no tool named" not in output
    for request in requests:
        assert not FOLLOW_UPS & {t["function"]["name"] for t in request.body["tools"]}
