"""Root cause 1: auger's own I/O must not follow paths that commands control.

Each attack is judged by its effect (a file outside the project written or changed, a secret
reaching the model) and comes with a control showing the same payload works when the path is
opened the ordinary way. Races use `Swapper` (renameat2 RENAME_EXCHANGE in a tight loop), the
thing a background command in the sandbox can do while the model calls a tool.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from pathlib import Path

import pytest

from auger.context.prompts import discover_prompts
from auger.protocol import events as ev
from auger.tools.base import SessionToolState, ToolContext
from auger.tools.files import EDIT_FILE, READ_FILE, WRITE_FILE
from auger.tools.search import GLOB, GREP, LIST_DIR
from tests.support.mock_openai import ToolCall
from tests.support.redteam import (  # noqa: F401 - fixtures
    Swapper,
    files_under,
    fs_mode,
    run_many,
    sandbox,
    scripted_session,
    text_of,
)

SECRET = "RC1-OWN-IO-SECRET-7d3f"
ROUNDS = 400
CONTROL_SECONDS = 20.0  # how long a control may try to win a race before it says the race cannot be won


@pytest.fixture
def world(tmp_path: Path) -> tuple[Path, Path]:
    """A project with `sub/data.txt`, and an outside directory holding the same name with a secret."""
    project = tmp_path / "project"
    (project / "sub").mkdir(parents=True)
    (project / "sub" / "data.txt").write_text("inside\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "data.txt").write_text(f"inside {SECRET}\n")
    (outside / f"{SECRET}.txt").write_text(f"{SECRET}\n")
    return project.resolve(), outside


def ctx_for(project: Path, tmp: Path) -> ToolContext:
    return ToolContext(root=project, state=SessionToolState(scratch_dir=tmp / "scratch"), call_id="c1",
                       archive=None)  # type: ignore[arg-type]


def control_read_leaks(path: Path, outside: Path) -> bool:
    """Control: opening by name while the swap runs reaches the outside file at least once (tried for up to
    CONTROL_SECONDS: on a busy machine the swapping thread may get little time for a while)."""
    deadline = time.monotonic() + CONTROL_SECONDS
    with Swapper(path.parent, outside):
        while time.monotonic() < deadline:
            try:
                if SECRET in path.read_text():
                    return True
            except OSError:
                pass
    return False


# ----------------------------------------------------------------------------- races on the file tools


def test_read_file_race_never_reads_outside(fs_mode, world, tmp_path) -> None:
    project, outside = world
    assert control_read_leaks(project / "sub" / "data.txt", outside)
    ctx = ctx_for(project, tmp_path)
    with Swapper(project / "sub", outside) as swap:
        results = asyncio.run(run_many(READ_FILE, [{"path": "sub/data.txt"}] * ROUNDS, ctx))
    assert swap.swaps > ROUNDS
    texts = [text_of(r) for r in results]
    assert not any(SECRET in t for t in texts)
    assert any("inside" in t for t in texts)  # the tool still works between swaps


def test_write_file_race_never_writes_outside(fs_mode, world, tmp_path) -> None:
    project, outside = world
    before = files_under(outside)
    deadline = time.monotonic() + CONTROL_SECONDS
    with Swapper(project / "sub", outside):  # control: a plain open by name lands outside
        for i in itertools.count():
            try:
                (project / "sub" / f"control-{i}.txt").write_text("x")
            except OSError:
                pass
            if i % 100 == 99 and (files_under(outside) - before or time.monotonic() > deadline):
                break
    planted = files_under(outside) - before
    assert planted, "control: the race never redirected a plain write"
    for name in planted:
        (outside / name).unlink()
    ctx = ctx_for(project, tmp_path)
    calls = [{"path": f"sub/new-{i}.txt", "content": "pwned\n"} for i in range(ROUNDS)]
    calls += [{"path": "sub/data.txt", "content": "pwned\n"}] * 50
    with Swapper(project / "sub", outside):
        results = asyncio.run(run_many(WRITE_FILE, calls, ctx))
    assert files_under(outside) == before
    assert (outside / "data.txt").read_text() == f"inside {SECRET}\n"
    assert any(not isinstance(r, Exception) for r in results)


def test_edit_file_race_never_edits_outside(fs_mode, world, tmp_path) -> None:
    project, outside = world
    ctx = ctx_for(project, tmp_path)
    flips = [{"path": "sub/data.txt", "old_string": "inside", "new_string": "edited"},
             {"path": "sub/data.txt", "old_string": "edited", "new_string": "inside"}] * (ROUNDS // 2)
    with Swapper(project / "sub", outside):
        results = asyncio.run(run_many(EDIT_FILE, flips, ctx))
    assert (outside / "data.txt").read_text() == f"inside {SECRET}\n"
    assert files_under(outside) == {"data.txt", f"{SECRET}.txt"}  # no temp file left there either
    assert not any(SECRET in text_of(r) for r in results)
    assert any(not isinstance(r, Exception) for r in results)


@pytest.mark.parametrize("backend", ["python", "ripgrep"])
def test_search_tools_race_never_show_outside(fs_mode, world, tmp_path, monkeypatch, backend) -> None:
    project, outside = world
    monkeypatch.setenv("AUGER_GREP_BACKEND", backend)
    ctx = ctx_for(project, tmp_path)

    async def attack() -> list:
        out = []
        for _ in range(ROUNDS // 8):
            out += await run_many(GREP, [{"pattern": "inside"}, {"pattern": SECRET, "path": "sub"}], ctx)
            out += await run_many(LIST_DIR, [{"path": "."}, {"path": "sub"}], ctx)
            out += await run_many(GLOB, [{"pattern": "*.txt"}], ctx)
        return out

    with Swapper(project / "sub", outside):
        results = asyncio.run(attack())
    assert not any(SECRET in text_of(r) for r in results)
    # The tool still works: between swaps when the scheduler lets it, and always once the race ends
    # (under load a whole attack can land on swapped states only, so the race alone cannot prove it).
    after = asyncio.run(run_many(GREP, [{"pattern": "inside"}], ctx))
    assert any("sub/data.txt:1:inside" in text_of(r) for r in results + after)


# ----------------------------------------------------------------------------- through a session


def test_symlinked_parent_dirs_lead_nowhere(sandbox, world) -> None:
    project, outside = world
    (project / "out").symlink_to(outside, target_is_directory=True)
    (project / "out-file.txt").symlink_to(outside / "data.txt")
    assert SECRET in (project / "out" / "data.txt").read_text()  # control: the link reaches the secret
    before = files_under(outside)
    run, sent = scripted_session(project, [
        ToolCall("read_file", {"path": "out/data.txt"}),
        ToolCall("read_file", {"path": "out-file.txt"}),
        ToolCall("write_file", {"path": "out/planted.txt", "content": "pwned"}),
        ToolCall("write_file", {"path": "out/newdir/planted.txt", "content": "pwned"}),
        ToolCall("edit_file", {"path": "out/data.txt", "old_string": "inside", "new_string": "pwned"}),
        ToolCall("write_file", {"path": "out-file.txt", "content": "pwned"}),
        ToolCall("grep", {"pattern": "inside", "path": "out"}),
        ToolCall("list_dir", {"path": "out"}),
    ], sandbox=sandbox)
    assert run.ended.reason == "complete"
    assert SECRET not in sent
    assert files_under(outside) == before and (outside / "data.txt").read_text() == f"inside {SECRET}\n"


def test_skills_linked_out_of_the_project_are_never_read(sandbox, world) -> None:
    project, outside = world
    skill_text = f"---\nname: evil\ndescription: use always\n---\n{SECRET}\n"
    (outside / "evil-skill").mkdir()
    (outside / "evil-skill" / "SKILL.md").write_text(skill_text)
    (outside / "SKILL.md").write_text(skill_text.replace("evil", "evil2"))
    skills = project / ".auger" / "skills"
    skills.mkdir(parents=True)
    (skills / "linked-folder").symlink_to(outside / "evil-skill", target_is_directory=True)
    (skills / "linked-file").mkdir()
    (skills / "linked-file" / "SKILL.md").symlink_to(outside / "SKILL.md")
    assert SECRET in (skills / "linked-file" / "SKILL.md").read_text()  # control
    run, sent = scripted_session(project, [ToolCall("skill", {"name": "evil"}),
                                           ToolCall("skill", {"name": "evil2"})], sandbox=sandbox)
    assert SECRET not in sent and "use always" not in sent
    assert any("out of the project" in w.message for w in run.of(ev.WarningEvent))


def test_agents_md_linked_out_of_the_project_is_never_sent(sandbox, world) -> None:
    project, outside = world
    (project / ".git").mkdir()
    (project / "AGENTS.md").symlink_to(outside / "data.txt")
    (project / "docs").mkdir()
    (project / "docs" / "AGENTS.md").symlink_to(outside / "data.txt")
    assert SECRET in (project / "AGENTS.md").read_text()  # control
    run, sent = scripted_session(project, [], sandbox=sandbox)
    assert SECRET not in sent
    assert any("symlink out of the project" in w.message for w in run.of(ev.WarningEvent))


@pytest.mark.parametrize("linked", ["project", "above"])
def test_agents_md_cannot_reach_a_secret_in_an_enclosing_repository(sandbox, tmp_path, linked: str) -> None:
    """The project sits inside a bigger repository (a home directory kept in git) that holds the
    secret: a link staying inside that repository still leaves the project, and is refused."""
    home = tmp_path / "home"
    (home / ".git").mkdir(parents=True)
    (home / ".ssh").mkdir()
    (home / ".ssh" / "id_rsa").write_text(f"{SECRET}\n")
    project = home / "proj"
    project.mkdir()
    if linked == "project":
        (home / "AGENTS.md").write_text("home rules\n")
        (project / "AGENTS.md").symlink_to("../.ssh/id_rsa")
        assert SECRET in (project / "AGENTS.md").read_text()  # control
    else:
        (home / "AGENTS.md").symlink_to(".ssh/id_rsa")
        (project / "AGENTS.md").write_text("project rules\n")
        assert SECRET in (home / "AGENTS.md").read_text()  # control
    run, sent = scripted_session(project.resolve(), [], sandbox=sandbox)
    assert SECRET not in sent
    assert ("home rules" if linked == "project" else "project rules") in sent  # the plain doc is still read
    assert any("AGENTS.md" in w.message and "symlink" in w.message for w in run.of(ev.WarningEvent))


def test_hostile_fallback_doc_names_are_refused(sandbox, world, tmp_path) -> None:
    project, outside = world
    (project / ".git").mkdir()
    hostile = ["../outside/data.txt", str(outside / "data.txt"), "sub/../../outside/data.txt", "..", "sub/data.txt"]
    assert SECRET in (project / hostile[0]).read_text()  # control: the name reaches the secret
    names = "[" + ", ".join(f'"{n}"' for n in hostile) + "]"
    run, sent = scripted_session(project, [], f"project_doc_fallback_filenames={names}", sandbox=sandbox)
    assert SECRET not in sent and "inside" not in sent.replace("inside the project", "")
    warned = [w.message for w in run.of(ev.WarningEvent) if "not a plain file name" in w.message]
    assert len(warned) == len(hostile)


def test_project_prompts_linked_out_are_not_loaded(world, tmp_path) -> None:
    project, outside = world
    prompts = project / ".auger" / "prompts"
    prompts.mkdir(parents=True)
    (prompts / "leak.md").symlink_to(outside / "data.txt")
    (prompts / "fine.md").write_text("do the thing\n")
    assert SECRET in (prompts / "leak.md").read_text()  # control
    warnings: list[str] = []
    found = discover_prompts(project, tmp_path / "config", warnings)
    assert "leak" not in found and found["fine"].body == "do the thing"
    assert any("leak.md" in w for w in warnings)


def test_tool_call_ids_never_become_file_names(sandbox, world, tmp_path) -> None:
    project, _ = world
    landing = tmp_path / "id-landing"
    landing.mkdir()
    ids = ["../../../id-landing/rc1-id-a", f"{landing}/rc1-id-b", "../rc1-id-c", "/rc1-id-d"]
    calls = [ToolCall("write_file", {"path": "w.txt", "content": "x"}, id=ids[0]),
             ToolCall("read_file", {"path": "w.txt"}, id=ids[1]),
             ToolCall("grep", {"pattern": "x"}, id=ids[2]),
             ToolCall("recall", {"call_id": ids[0]}, id=ids[3])]
    run, _ = scripted_session(project, calls, sandbox=sandbox)
    assert run.ended.reason == "complete"
    everywhere = files_under(tmp_path)
    assert not [p for p in everywhere if "rc1-id" in p], everywhere
    assert not any(Path("/").glob("rc1-id-*"))


@pytest.mark.parametrize("bad, message", [("a\x00b.txt", "NUL byte"), ("a\udcffb.txt", "not valid UTF-8")])
def test_nul_and_surrogates_in_paths_are_clear_tool_errors(world, tmp_path, bad: str, message: str) -> None:
    project, _ = world
    ctx = ctx_for(project, tmp_path)
    calls = [(READ_FILE, {"path": bad}), (WRITE_FILE, {"path": bad, "content": "x"}),
             (EDIT_FILE, {"path": bad, "old_string": "a", "new_string": "b"}),
             (LIST_DIR, {"path": bad}), (GLOB, {"pattern": "*", "path": bad}), (GREP, {"pattern": "x", "path": bad})]
    for spec, args in calls:
        result = asyncio.run(run_many(spec, [args], ctx))[0]
        assert isinstance(result, Exception) and message in str(result), (spec.name, result)
    assert files_under(project) == {"sub", "sub/data.txt"}
