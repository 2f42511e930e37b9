"""Toolsets and the router: lifecycle, wrappers, and a catalog that stays byte-stable for a session."""

from __future__ import annotations

import asyncio
import json

import pytest

from auger.protocol import events as ev
from auger.tools.base import LOCAL_MUTATION, READ_ONLY, SessionToolState, ToolContext, ToolError, ToolResult, ToolSpec
from auger.tools.router import ToolRouter
from auger.tools.toolset import Combined, Prefixed, StaticToolset, allow_only, builtin_toolset, read_only
from tests.support.harness import run_session
from tests.support.mock_openai import Reply, ToolCall


def _spec(name: str, effect: str = READ_ONLY, parallel: bool = False) -> ToolSpec:
    async def handler(args, ctx):
        return ToolResult(f"{name} ran with {json.dumps(args)}")

    return ToolSpec(name, f"the {name} tool", {"type": "object", "properties": {}}, handler, effect=effect,
                    parallel_safe=parallel)


class Recording(StaticToolset):
    """A toolset that notes its lifecycle, as a server-backed one would start and stop."""

    def __init__(self, specs, log: list[str], label: str) -> None:
        super().__init__(specs)
        self.log, self.label = log, label

    async def open(self) -> None:
        self.log.append(f"open {self.label}")

    async def close(self) -> None:
        self.log.append(f"close {self.label}")


def _ctx(tmp_path) -> ToolContext:
    return ToolContext(root=tmp_path, state=SessionToolState(scratch_dir=tmp_path / "s"), call_id="c", archive=None)


def test_wrappers_rename_filter_and_combine(tmp_path):
    log: list[str] = []
    github = Prefixed(Recording([_spec("search"), _spec("comment", LOCAL_MUTATION)], log, "gh"), "gh")
    combined = Combined([StaticToolset([_spec("search", parallel=True)]), github])

    async def main():
        router = await ToolRouter.open(combined)
        names = router.names
        ran = await router.call(router.get("gh_comment"), {"x": 1}, _ctx(tmp_path))
        looked = read_only(combined)
        await looked.open()
        visible = [s.name for s in looked.list_tools()]
        with pytest.raises(ToolError, match="no tool named 'gh_comment'"):
            await looked.call("gh_comment", {}, _ctx(tmp_path))
        await router.close()
        return names, ran.output, visible, router.parallel_safe("search"), router.parallel_safe("gh_search")

    names, output, visible, parallel, prefixed_parallel = asyncio.run(main())
    assert names == ["search", "gh_search", "gh_comment"]
    assert output == 'comment ran with {"x": 1}'  # the inner tool gets its own name back
    assert visible == ["search", "gh_search"] and parallel and not prefixed_parallel
    assert log[0] == "open gh" and log[-1] == "close gh"


def test_a_duplicate_name_is_refused_and_what_was_opened_is_closed():
    log: list[str] = []
    combined = Combined([Recording([_spec("look")], log, "a"), Recording([_spec("look")], log, "b")])
    with pytest.raises(ValueError, match="duplicate tool name 'look'"):
        asyncio.run(ToolRouter.open(combined))
    assert log == ["open a", "open b", "close b", "close a"]


def test_read_only_and_allow_lists_narrow_the_built_ins():
    builtins = builtin_toolset()
    read = {s.name for s in read_only(builtins).list_tools()}
    assert "read_file" in read and not {"shell", "write_file", "edit_file"} & read
    assert [s.name for s in allow_only(builtins, ["grep", "nope"]).list_tools()] == ["grep"]


def test_the_router_renders_its_catalog_once():
    router = asyncio.run(ToolRouter.open(builtin_toolset()))
    assert router.schemas is router.schemas and [s.name for s in router.schemas] == router.names


def test_a_session_opens_its_toolset_and_closes_it_at_shutdown(project, server):
    log: list[str] = []
    tools = Combined([builtin_toolset(), Recording([_spec("ping")], log, "extra")])
    server.add(Reply(tool_calls=[ToolCall("ping", {})]), Reply(text="done"))
    run = run_session(project, server, "go", tools=tools)
    assert run.ended.reason == "complete"
    assert [e.output for e in run.of(ev.ToolCallEnded)] == ["ping ran with {}"]
    tools = [t["function"]["name"] for t in server.chat_requests[0].body["tools"]]
    assert "ping" in tools and "shell" in tools
    assert log == ["open extra", "close extra"]
