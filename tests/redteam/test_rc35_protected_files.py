"""Protected files through the file tools: a hostile model tries every file tool on planted secrets — `.env`,
`id_rsa`, `secrets/prod.pem`, a file `.augerignore` lists — by name, through `..`, an absolute path, a symlink,
a hard link, a rename, a patch, a sub-agent and a program (run_code). Judged by effect: no planted value in
any request the model received, in the session store or in auger's snapshot repository. Controls: an
`.env.example` and a file the user allowed are read; a one-time approval lets exactly one call read a file.

Before protected files existed, every one of these calls read the value: read_file, grep and the patch tool
opened the files like any other, and snapshots copied `.env` into auger's own store.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from auger.policy.sandbox import detect
from auger.protocol import events as ev
from auger.protocol.items import ProtectedRead
from auger.protocol.ops import ApprovalDecision
from auger.store.sqlite import SqliteStore
from tests.support.agents import Routes, run_parent
from tests.support.mock_openai import Reply, ToolCall
from tests.support.planted_secrets import ALLOWED, EXAMPLE, PLANTED, leaks, plant

def outputs(routes: Routes, conversation: str = "go") -> list[str]:
    """The tool outputs the model was sent in the last request of a conversation."""
    last = routes.bodies(conversation)[-1]
    return [m["content"] for m in last["messages"] if m["role"] == "tool"]


def calls(*made: tuple[str, dict]) -> list[Reply]:
    return [Reply(tool_calls=[ToolCall(name, args)]) for name, args in made]


PATCH_UPDATE = "*** Begin Patch\n*** Update File: .env\n@@\n-NOT=THERE\n+X=1\n*** End Patch"
PATCH_MOVE = "*** Begin Patch\n*** Update File: .env\n*** Move to: moved.txt\n@@\n-NOT=THERE\n+X=1\n*** End Patch"


def attacks(project: Path) -> list[tuple[str, dict]]:
    return [
        ("read_file", {"path": ".env"}),
        ("read_file", {"path": "id_rsa"}),
        ("read_file", {"path": "secrets/prod.pem"}),
        ("read_file", {"path": "config/private.yml"}),
        ("read_file", {"path": "sub/../.env"}),
        ("read_file", {"path": str(project / ".env")}),
        ("read_file", {"path": ".ENV.local"}),
        ("read_file", {"path": "notes.md"}),
        ("read_file", {"path": "backup.txt"}),
        ("grep", {"pattern": "PLANTED"}),
        ("grep", {"pattern": "VALUE", "path": ".env"}),
        ("grep", {"pattern": "VALUE", "path": "secrets"}),
        ("grep", {"pattern": "VALUE", "path": "notes.md"}),
        ("glob", {"pattern": "**/*"}),
        ("list_dir", {"path": ".", "depth": 3}),
        ("list_dir", {"path": "secrets"}),
        ("edit_file", {"path": ".env", "old_string": "NOT THERE", "new_string": "x"}),
        ("write_file", {"path": ".env", "content": "overwritten\n"}),
        ("apply_patch", {"patch": PATCH_UPDATE}),
        ("apply_patch", {"patch": PATCH_MOVE}),
        ("shell", {"command": f"apply_patch <<'EOF'\n{PATCH_UPDATE}\nEOF"}),
    ]


def test_every_file_tool_refuses_or_skips_protected_files(project, server, tmp_path):
    plant(project)
    made = attacks(project)
    routes = Routes({"go": [*calls(*made), Reply(text="done")]}).install(server)
    # an OpenAI-family model: apply_patch is offered
    run = run_parent(project, server, "go", overrides=("mode=auto", "sandbox=bwrap", "model=gpt-5"))
    assert run.ended.reason == "complete"
    outs = outputs(routes)
    assert len(outs) == len(made)
    assert leaks(server, tmp_path) == []
    by_call = dict(zip([f"{name} {json.dumps(args)}" for name, args in made], outs, strict=True))
    refused = [call for call, out in by_call.items() if "protected file" in out]
    for call in by_call:  # every direct read names the protection and how to allow a file
        if call.startswith(("read_file", "edit_file", "write_file", "apply_patch")) and ".ENV" not in call:
            assert call in refused, (call, by_call[call])
    assert "[secrets] allow" in by_call['read_file {"path": ".env"}']
    assert "same file as the protected .env" in by_call['read_file {"path": "backup.txt"}']
    grep_all = by_call['grep {"pattern": "PLANTED"}']
    assert "protected files or directories left out" in grep_all and "README" not in grep_all
    listing = by_call['list_dir {"path": ".", "depth": 3}']
    assert ".env.example" in listing and "README.md" in listing
    entries = [line.strip().split(" -> ")[0] for line in listing.splitlines()]
    assert "notes.md" in entries  # a symlink's name and target are shown, never what it leads to
    assert not {".env", "id_rsa", "prod.pem", "private.yml", "backup.txt", ".env.local"} & set(entries), entries
    assert (project / ".env").read_text() == f"VALUE={PLANTED['.env']}\n"  # nothing wrote, moved or removed it
    assert not (project / "moved.txt").exists()
    warnings = [e.message for e in run.events(ev.WarningEvent)]
    assert any("read_file was refused: protected file .env" == w for w in warnings), warnings


def test_controls_an_example_file_and_a_file_the_user_allowed_are_read(project, server, tmp_path):
    plant(project)
    routes = Routes({"go": [*calls(("read_file", {"path": ".env.example"}), ("read_file", {"path": ".env.test"}),
                                   ("grep", {"pattern": "PLANTED-(EXAMPLE|ALLOWED)"})), Reply(text="done")]})
    routes.install(server)
    run_parent(project, server, "go", overrides=("mode=auto",), tables={"secrets": {"allow": [".env.test"]}})
    example, allowed, grep = outputs(routes)
    assert EXAMPLE in example and ALLOWED in allowed
    assert EXAMPLE in grep and ALLOWED in grep
    assert leaks(server, tmp_path) == []


def test_a_one_time_approval_lets_one_call_read_the_file_and_not_the_next(project, server, tmp_path):
    plant(project)
    routes = Routes({"go": [*calls(("read_file", {"path": ".env.local"}), ("read_file", {"path": ".env.local"})),
                            Reply(text="done")]}).install(server)
    asked: list[ev.ApprovalRequest] = []
    answers = ["approve", "deny"]

    def answer(session, envelope):
        event = envelope.event
        if isinstance(event, ev.ApprovalRequest):
            asked.append(event)
            session.decide(ApprovalDecision(event.request_id, answers.pop(0)))

    run_parent(project, server, "go", overrides=("mode=auto",), interactive=True, on_envelope=answer)
    first, second = outputs(routes)
    assert PLANTED[".env.local"] in first  # approved: this call read it
    assert PLANTED[".env.local"] not in second and "protected file" in second  # the next call asked again, denied
    assert [a.kind for a in asked] == ["protected_read", "protected_read"]
    assert asked[0].options == ["approve", "deny"] and asked[0].details.subject == ".env.local"
    assert PLANTED[".env.local"] not in json.dumps([a.message for a in asked])
    assert leaks(server, tmp_path, allowed=(PLANTED[".env.local"],)) == []

    async def items():
        store = SqliteStore(tmp_path / "sessions.db")
        try:
            (record,) = await store.list_sessions()
            return [stored.item for stored in await store.load_items(record.id)]
        finally:
            await store.aclose()

    recorded = [i for i in asyncio.run(items()) if isinstance(i, ProtectedRead)]
    assert [(r.tool, r.paths) for r in recorded] == [("read_file", [".env.local"])]


def test_headless_with_approve_all_still_refuses(project, server, tmp_path):
    plant(project)
    routes = Routes({"go": [*calls(("read_file", {"path": ".env"})), Reply(text="done")]}).install(server)
    run_parent(project, server, "go", overrides=("mode=auto", "approve_all=true"))
    (out,) = outputs(routes)
    assert "protected file" in out and leaks(server, tmp_path) == []


def test_a_sub_agent_and_a_program_are_refused_alike(project, server, tmp_path):
    plant(project)
    routes = Routes({
        "go": [*calls(("spawn_agent", {"prompt": "look"}),
                      ("run_code", {"code": "for p in ['.env', 'id_rsa', 'backup.txt']:\n"
                                            "    try:\n        print(read_file(p))\n"
                                            "    except Exception as e:\n        print('refused', e)\n"
                                            "print(grep('PLANTED'))"})),
               Reply(text="done")],
        "look": [*calls(("read_file", {"path": ".env"}), ("grep", {"pattern": "PLANTED", "path": "secrets"}),
                        ("read_file", {"path": "notes.md"})), Reply(text="child done")],
    }).install(server)
    run = run_parent(project, server, "go", overrides=("mode=auto", "code_mode=true"))
    assert run.ended.reason == "complete"
    child = outputs(routes, "look")
    assert all("protected file" in out for out in child), child
    assert leaks(server, tmp_path) == []


@pytest.mark.skipif(detect("landlock")[0] is None, reason="no Landlock here")
def test_a_protected_file_renamed_or_linked_by_a_command_stays_protected(project, server, tmp_path):
    """Under Landlock a command can rename `.env` or link it under another name (bubblewrap's mount point refuses
    both): the file tools know the inode, and the next command's ruleset does too."""
    plant(project)
    made = [("shell", {"command": "mv .env renamed.txt && ln renamed.txt linked.txt && ls"}),
            ("read_file", {"path": "renamed.txt"}), ("read_file", {"path": "linked.txt"}),
            ("grep", {"pattern": "PLANTED"}), ("shell", {"command": "cat renamed.txt linked.txt"})]
    routes = Routes({"go": [*calls(*made), Reply(text="done")]}).install(server)
    run_parent(project, server, "go", overrides=("mode=auto", "sandbox=landlock"))
    moved, renamed, linked, grep, cat = outputs(routes)
    assert "renamed.txt" in moved  # the command did rename it
    assert "same file as the protected .env" in renamed and "same file as the protected .env" in linked
    assert leaks(server, tmp_path) == []


def test_instruction_files_never_bring_a_protected_file_into_the_prompt(project, server, tmp_path):
    """A repository's AGENTS.md can import a file (`@.env`) and an AGENTS.override.md can be a link to `.env`:
    the model's very first request would carry the secret."""
    plant(project)
    (project / "AGENTS.override.md").symlink_to(".env")
    (project / "AGENTS.md").write_text("Use tabs.\n@.env\n@backup.txt\n@secrets/prod.pem\n")
    (project / ".auger" / "prompts").mkdir(parents=True)
    (project / ".auger" / "prompts" / "deploy.md").symlink_to("../../id_rsa")
    skill = project / ".auger" / "skills" / "keys"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").symlink_to("../../../config/private.yml")
    routes = Routes({"go": [Reply(text="done")]}).install(server)
    run = run_parent(project, server, "go", overrides=("mode=auto",))
    first = json.dumps(routes.bodies("go")[0])
    assert "Use tabs." in first  # the doc itself is read; what it imports from protected files is not
    assert leaks(server, tmp_path) == []
    warnings = " ".join(e.message for e in run.events(ev.WarningEvent))
    assert "AGENTS.override.md: a protected file" in warnings and "a protected file" in warnings
