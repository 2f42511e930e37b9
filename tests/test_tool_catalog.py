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
    assert {"shell", "read_file", "web_fetch", "spawn_agent", "send_input"} <= {
        t["function"]["name"] for t in chat.body["tools"]}
    assert not OPT_IN & {t["function"]["name"] for t in chat.body["tools"]}  # they would not fit
    assert "apply_patch" in {t.get("name") for t in responses.body["tools"]}
    for wire, request in (("chat", chat), ("responses", responses)):
        assert len(request.raw) <= FIRST_REQUEST_LIMIT, f"{wire}: the first request is {len(request.raw):,} bytes"


OPT_IN = {"exec_command", "write_stdin", "run_code"}


def test_interactive_processes_and_code_mode_are_offered_when_turned_on(project):
    """exec_command/write_stdin (`exec_sessions = true`) and run_code (`code_mode = true`) ride on every request
    once on, on both OpenAI wires, beside shell."""
    from tests.support import mock_responses
    from tests.support.harness import run_configured, run_session
    from tests.support.mock_openai import MockChatServer, Reply

    on = ("exec_sessions=true", "code_mode=true")
    with MockChatServer([Reply(text="done")]) as server:
        run_session(project, server, "hi", overrides=on)
        chat = [t["function"]["name"] for t in server.chat_requests[0].body["tools"]]
    with mock_responses.MockResponsesServer([mock_responses.Reply(text="done")]) as server:
        run_configured(project, "provider=openai", f"base_url={server.base_url}", "model=gpt-5", *on,
                       env={"OPENAI_API_KEY": "sk-test"})
        responses = [t.get("name") for t in server.responses_requests[0].body["tools"]]
    for names in (chat, responses):
        assert OPT_IN <= set(names) and names.index("exec_command") == names.index("shell") + 1
