"""Writable roots granted at an approval: a command writing outside the project is asked once, the user lets
commands write beneath that directory for the rest of the session, and the real sandbox binds it writable
(bwrap mounts it, Landlock grants it) — after a restart too, and in a resumed session; a root that is `/`,
the home directory, or holds the project or auger's files is never offered, and an answer choosing it
anyway is refused."""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

import pytest

from auger.policy.sandbox import detect
from auger.policy.types import Classification
from auger.policy.writable_roots import offered_root, refusal
from auger.protocol import events as ev
from auger.protocol.items import WritableRoot
from auger.protocol.ops import ApprovalDecision
from tests.support.harness import run_session
from tests.support.mock_openai import Reply, ToolCall


@pytest.fixture(autouse=True)
def require_bwrap(tmp_path, monkeypatch):
    sandbox, why = detect("bwrap")
    assert sandbox is not None, f"these tests need bubblewrap (apt-get install bubblewrap): {why}"
    systmp = tmp_path / "systmp"  # commands get a temp dir of their own, as in test_sandbox_engine.py
    systmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(systmp))


@pytest.fixture
def elsewhere():
    """A directory outside the project and outside every temp dir (writes under /tmp are scratch, never
    asked about, and land in the sandbox's own fresh /tmp)."""
    path = Path("/var/tmp") / f"auger-roots-{uuid.uuid4().hex[:10]}"
    (path / "out").mkdir(parents=True)
    (path / "other").mkdir()
    yield path
    shutil.rmtree(path, ignore_errors=True)


def answering(*answers: str):
    """Answer approval requests in order (`session.decide`, whose refusal is kept); deny past the end."""
    asked: list[ev.ApprovalRequest] = []
    refused: list[str] = []
    queue = list(answers)

    def on_event(session, event):
        if isinstance(event, ev.ApprovalRequest):
            asked.append(event)
            answer = queue.pop(0) if queue else "deny"
            why = session.decide(ApprovalDecision(event.request_id, answer))
            if why is not None:
                refused.append(why)
                session.decide(ApprovalDecision(event.request_id, "deny"))

    return on_event, asked, refused


def calls(server, *commands: str) -> None:
    server.add(*[Reply(tool_calls=[ToolCall("shell", {"command": c})]) for c in commands], Reply(text="done"))


def tool_outputs(server) -> list[str]:
    return [m["content"] for m in server.chat_requests[-1].body["messages"] if m["role"] == "tool"]


@pytest.mark.parametrize("kind", ["bwrap", "landlock"])
def test_a_granted_root_is_asked_once_written_through_the_sandbox_and_kept_on_resume(project, server, elsewhere, kind):
    if detect(kind)[0] is None:
        pytest.skip(f"no {kind} sandbox here")
    out, other = elsewhere / "out", elsewhere / "other"
    calls(server, "echo in > inside.txt",  # the sandbox runs before the grant: it must start again with the root
          f"echo one > {out}/a.txt", f"echo two > {out}/b.txt", f"echo three > {other}/c.txt")
    on_event, asked, refused = answering("approve_writable_root")
    run = run_session(project, server, "go", overrides=("mode=auto", f"sandbox={kind}"), interactive=True,
                      on_event=on_event)
    assert run.of(ev.SessionConfigured)[0].sandbox == kind
    assert [a.details.subject for a in asked] == [f"echo one > {out}/a.txt", f"echo three > {other}/c.txt"]
    first = asked[0]
    assert "approve_writable_root" in first.options and first.details.writable_root == str(out)
    assert asked[1].details.writable_root == str(other)  # a sibling is not covered: asked, and denied
    assert refused == []
    assert (project / "inside.txt").read_text() == "in\n"
    assert (out / "a.txt").read_text() == "one\n" and (out / "b.txt").read_text() == "two\n"
    assert not (other / "c.txt").exists()
    assert "denied" in tool_outputs(server)[3]
    assert any(str(out) in w.message and "rest of this session" in w.message for w in run.of(ev.WarningEvent))

    calls(server, f"echo again > {out}/d.txt")
    on_event, asked, _ = answering()
    resumed = run_session(project, server, "more", overrides=("mode=auto", f"sandbox={kind}"), interactive=True,
                          on_event=on_event, resume=run.session_id)
    assert asked == []
    assert (out / "d.txt").read_text() == "again\n"
    assert any(str(out) in w.message for w in resumed.of(ev.WarningEvent))


def test_the_root_is_recorded_in_the_session(project, server, elsewhere):
    import asyncio

    from auger.store.sqlite import SqliteStore

    out = elsewhere / "out"
    calls(server, f"echo one > {out}/a.txt")
    on_event, _, _ = answering("approve_writable_root")
    run = run_session(project, server, "go", overrides=("mode=auto",), interactive=True, on_event=on_event)

    async def items():
        store = SqliteStore(project.parent / "sessions.db")
        try:
            return [stored.item for stored in await store.load_items(run.session_id)]
        finally:
            await store.aclose()

    assert [i.path for i in asyncio.run(items()) if isinstance(i, WritableRoot)] == [str(out)]


def test_root_and_home_are_never_offered_and_choosing_them_is_refused(project, server):
    home = Path(os.path.realpath(os.environ["HOME"]))
    probe = f"auger-roots-probe-{uuid.uuid4().hex[:8]}"
    calls(server, f"echo x > /{probe}", f"echo x > ~/{probe}")
    on_event, asked, refused = answering("approve_writable_root", "approve_writable_root")
    run_session(project, server, "go", overrides=("mode=auto",), interactive=True, on_event=on_event)
    assert [a.details.subject for a in asked] == [f"echo x > /{probe}", f"echo x > ~/{probe}"]
    for request in asked:
        assert "approve_writable_root" not in request.options and request.details.writable_root is None
    assert len(refused) == 2 and all("not one of" in why for why in refused)
    assert not Path("/", probe).exists() and not (home / probe).exists()


def test_refused_roots(tmp_path):
    project = tmp_path / "work" / "project"
    (project / ".git").mkdir(parents=True)
    own = tmp_path / "auger-home"
    (own / "data").mkdir(parents=True)
    ssh = tmp_path / "home" / ".ssh" / "keys"
    ssh.mkdir(parents=True)
    ok = tmp_path / "elsewhere"
    ok.mkdir()

    def why(path: Path) -> str | None:
        return refusal(path, projects=[project], homes=[tmp_path / "home"], own=[own],
                       hidden=[tmp_path / "home" / ".ssh"])

    assert why(ok) is None
    assert "whole filesystem" in why(Path("/"))
    assert "home directory" in why(tmp_path / "home") and "home directory" in why(tmp_path)
    assert "holds the project" in why(tmp_path / "work")
    assert "git directory" in why(project / ".git")
    assert "auger's own files" in why(own) and "auger's own files" in why(own / "data")
    assert "hides" in why(ssh)
    assert "kernel" in why(Path("/proc/self").resolve())
    assert "not a directory" in why(ok / "missing")
    link = tmp_path / "link"
    link.symlink_to(ok)
    assert "resolved" in why(link)


def test_the_offered_root_is_the_common_directory_of_the_resolved_paths(tmp_path):
    (tmp_path / "a" / "b").mkdir(parents=True)
    c = Classification("local_mutation", "x", outside_paths=("p", "q"),
                       outside_real=(str(tmp_path / "a" / "b" / "new.txt"), str(tmp_path / "a" / "old")))
    assert offered_root(c) == tmp_path / "a"
    unknown = Classification("local_mutation", "x", outside_paths=("~bob/x",), outside_real=("",))
    assert offered_root(unknown) is None
