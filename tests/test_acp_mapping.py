"""The pieces of `auger acp` that need no process: paths shown to the editor, prompt blocks, MCP tables."""

from __future__ import annotations

import base64
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("acp", reason="the agent-client-protocol SDK (the `acp` extra) is not installed")
from acp import RequestError, image_block, resource_block, text_block  # noqa: E402
from acp.schema import HttpHeader, HttpMcpServer, SseMcpServer, TextResourceContents  # noqa: E402

from auger.frontends.acp.agent import OPTIONS, mcp_table, option_name, user_turn  # noqa: E402
from auger.frontends.acp.updates import UpdateMapper, inside  # noqa: E402


def test_paths_shown_to_the_editor_stay_beneath_the_root(tmp_path: Path):
    root = tmp_path / "p"
    assert inside(root, "a/../b.txt") == str(root / "b.txt")
    assert inside(root, ".") == str(root)
    for hostile in ("../secret", "/etc/passwd", "a/../../x", "x\x00y", "", None, 7, ["a"]):
        assert inside(root, hostile) is None
    mapper = UpdateMapper(root)
    start = mapper.start("c1", "edit_file", {"path": "../../etc/passwd", "old_string": "a", "new_string": "b"})
    assert start.locations is None and start.content is None  # nothing about a path outside is sent


def test_prompt_blocks_become_one_user_turn():
    session = SimpleNamespace(workspace=SimpleNamespace(prompts={"review": object()}),
                              skills=SimpleNamespace(get=lambda name: object() if name == "deploy" else None))
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 16).decode()
    turn = user_turn([text_block("look at this"), image_block(png, "image/png"),
                      resource_block(TextResourceContents(uri="file:///p/a.py", text="print(1)"))], session)
    assert turn.images == [f"data:image/png;base64,{png}"]
    assert turn.text == "look at this\n<file uri='file:///p/a.py'>\nprint(1)\n</file>"
    skill = user_turn([text_block("/deploy to staging")], session)
    assert (skill.text, skill.skills) == ("to staging", ["deploy"])
    prompt = user_turn([text_block("/review a.py")], session)  # a custom prompt: the engine expands it
    assert (prompt.text, prompt.skills) == ("/review a.py", [])
    with pytest.raises(RequestError):
        user_turn([text_block("   ")], session)
    for data, mime in (("aGk=", "image/png"), (png, "image/jpeg"), (png, "image/svg+xml"), ("not base64!", "image/png")):
        with pytest.raises(RequestError):  # an image block's bytes must be an image of the type it names
            user_turn([text_block("look"), image_block(data, mime)], session)


def test_mcp_servers_from_the_editor_as_config_tables():
    http = HttpMcpServer(name="web", url="https://mcp.example/mcp", headers=[HttpHeader(name="X-A", value="1")],
                         type="http")
    assert mcp_table(http) == ("web", {"url": "https://mcp.example/mcp", "headers": {"X-A": "1"},
                                       "transport": "streamable_http"})
    sse = SseMcpServer(name="old", url="https://mcp.example/sse", headers=[], type="sse")
    assert mcp_table(sse)[1]["transport"] == "sse"
    name, table = mcp_table(SimpleNamespace(name="x", type="acp"))
    assert table is None and "cannot use" in name


def test_web_calls_are_shown_as_fetch_and_search_with_their_subject(tmp_path: Path):
    mapper = UpdateMapper(tmp_path)
    fetch = mapper.start("c1", "web_fetch", {"url": "https://docs.example/guide"})
    search = mapper.start("c2", "web_search", {"query": "widget spin"})
    assert (fetch.kind, fetch.title) == ("fetch", "Fetch https://docs.example/guide")
    assert (search.kind, search.title) == ("search", "Search the web for widget spin")


def test_the_writable_root_answer_is_an_allow_option_naming_its_directory():
    from auger.protocol.events import ApprovalDetails
    from auger.protocol.vocab import ApprovalOption

    details = ApprovalDetails("c1", "shell", "local_mutation", "echo x > /srv/out/a", "touches paths outside the "
                              "project", outside_paths=["/srv/out/a"], writable_root="/srv/out")
    assert OPTIONS[ApprovalOption.APPROVE_WRITABLE_ROOT][0] == "allow_always"
    assert option_name(ApprovalOption.APPROVE_WRITABLE_ROOT, details) == \
        "Allow, and writes beneath /srv/out for this session"
    assert option_name(ApprovalOption.APPROVE, details) == "Allow once"
