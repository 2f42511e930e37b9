"""The repository map: the most used definitions first, within the caller's token budget, around a focus;
its index kept in the cache dir and brought up to date by what changed only; offered as `repo_map`, and with
`repo_map = "auto"` put once into the first turn of a session in an unfamiliar large project — never into
a request that did not ask for it."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from auger.lsp.files import Project
from auger.lsp.repo_map import NO_FOCUS, Focus, RepoMap, parse_focus
from auger.protocol import events as ev
from tests.support.harness import drive, open_session
from tests.support.mock_openai import MockChatServer, Reply, ToolCall


def tokens(text: str) -> int:
    return (len(text.encode()) + 3) // 4


def layered_project(root: Path) -> Path:
    """core.py is used by every service, the services by the apps, the apps by nobody."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "core.py").write_text("class StorageEngine:\n    pass\n\n\ndef open_storage_engine() -> StorageEngine:\n"
                                  "    return StorageEngine()\n")
    for n in range(6):
        (root / f"service_{n}.py").write_text(
            f"from core import StorageEngine, open_storage_engine\n\n\ndef run_service_{n}() -> StorageEngine:\n"
            f"    return open_storage_engine()\n")
    for n in range(3):
        calls = "\n".join(f"    run_service_{k}()" for k in range(6))
        (root / f"app_{n}.py").write_text(f"from service_0 import *\n\n\ndef main_{n}() -> None:\n{calls}\n")
    return root


def render(repo_map: RepoMap, budget: int, focus: Focus = NO_FOCUS) -> str:
    return asyncio.run(repo_map.render(budget, focus))


def test_the_most_used_definitions_come_first_within_the_budget(tmp_path):
    root = layered_project(tmp_path / "p")
    repo_map = RepoMap(Project(root), tmp_path / "cache")
    small, large = render(repo_map, 64), render(repo_map, 2000)
    assert tokens(small) <= 64 and tokens(large) <= 2000 and len(large) > len(small)
    assert small.startswith("core.py:\n  1: class StorageEngine:\n  5: def open_storage_engine() -> StorageEngine:")
    assert "more definitions" in small and "main_0" not in small
    assert "main_2" in large and "more definitions" not in large
    assert render(repo_map, 1) == "The budget of 1 tokens holds no entry of the map; ask for more."


def test_a_focus_ranks_around_its_files_and_names(tmp_path):
    repo_map = RepoMap(Project(layered_project(tmp_path / "p")), tmp_path / "cache")
    assert render(repo_map, 64, parse_focus("app_2.py")).startswith("app_2.py:\n  4: def main_2() -> None:")
    assert render(repo_map, 64, parse_focus(["run_service_4"])).startswith("service_4.py:\n  4: def run_service_4")
    assert parse_focus("src/a.py, Engine") == Focus(("src/a.py",), ("Engine",))


def test_the_index_is_kept_and_updated_by_what_changed(tmp_path):
    root = layered_project(tmp_path / "p")
    first = RepoMap(Project(root), tmp_path / "cache")
    render(first, 500)
    assert first.parsed == 10
    again = RepoMap(Project(root), tmp_path / "cache")  # a later session: the index from the cache dir
    render(again, 500)
    assert again.parsed == 0
    (root / "service_3.py").write_text("def brand_new_function() -> int:\n    return 3\n")
    os.utime(root / "service_3.py", ns=(1, 1))  # a different time, whatever the clock's resolution
    (root / "app_1.py").unlink()
    text = render(again, 2000)
    assert again.parsed == 1 and "brand_new_function" in text and "app_1.py" not in text
    assert "run_service_3" not in text


def session_requests(project: Path, *overrides: str, replies=(), prompt: str = "hi") -> list:
    with MockChatServer([*replies, Reply(text="done")]) as server:
        async def main():
            session, store = await open_session(project, server, project.parent / "s.db", *overrides)
            try:
                return await asyncio.wait_for(drive(session, prompt), 120)
            finally:
                await store.aclose()

        run = asyncio.run(main())
        return [server.chat_requests, run]


def test_the_tool_answers_with_the_map(tmp_path):
    project = layered_project(tmp_path / "project")
    requests, run = session_requests(project, replies=[
        Reply(tool_calls=[ToolCall("repo_map", {"budget": 100, "focus": "service_1.py"})])])
    (call,) = run.of(ev.ToolCallEnded)
    assert call.ok and call.output.startswith("service_1.py:") and tokens(call.output) <= 100


def big_project(root: Path, files: int = 320) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for n in range(files):
        (root / f"module_{n:03}.py").write_text(f"def helper_function_{n}() -> int:\n    return {n}\n\n\n"
                                               f"VALUE_{n} = helper_function_{(n + 1) % files}()\n")
    return root


def repo_map_messages(requests: list) -> list[str]:
    return [m["content"] for m in requests[0].body["messages"]
            if m["role"] == "user" and "A map of this repository" in str(m["content"])]


def test_auto_puts_the_map_into_an_unfamiliar_large_projects_first_turn_once(tmp_path):
    project = big_project(tmp_path / "project")
    first, _ = session_requests(project, "repo_map=auto", "repo_map_tokens=300")
    (told,) = repo_map_messages(first)
    assert "module_" in told and tokens(told) <= 340
    second, _ = session_requests(project, "repo_map=auto")  # no longer unfamiliar: an earlier session exists
    assert repo_map_messages(second) == []


def test_auto_leaves_a_small_project_alone_and_the_default_never_puts_a_map_in(tmp_path):
    small = layered_project(tmp_path / "small")
    requests, _ = session_requests(small, "repo_map=auto")
    assert repo_map_messages(requests) == []
    large = big_project(tmp_path / "large")
    default, _ = session_requests(large)
    assert repo_map_messages(default) == []
    off, _ = session_requests(large, "repo_map=off", "code_nav=false")
    names = {t["function"]["name"] for t in off[0].body["tools"]}
    assert not {"repo_map", "code_nav"} & names and {"repo_map", "code_nav"} <= {
        t["function"]["name"] for t in default[0].body["tools"]}
