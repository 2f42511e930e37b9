"""One resume policy for the library and the CLI: a stored session continues on its recorded provider and
model, is refused when that provider is unusable here, and switches only when the caller asks."""

from __future__ import annotations

import asyncio

import pytest

from auger.engine.session.sessions import SessionManager
from auger.engine.workspace import Workspace
from auger.engine.session.resume import ResumeRefused
from auger.models.registry import client_for
from auger.protocol import events as ev
from auger.protocol.items import ContextMessage
from auger.store.sqlite import SqliteStore
from tests.support.harness import drive, make_config, open_session, run_session
from tests.support.mock_openai import MockChatServer, Reply


def recorded_session(project, server) -> str:
    """A stored session on provider openai-compatible, model mock-model (the conftest defaults)."""
    server.add(Reply(text="first answer"))
    return run_session(project, server, "first").session_id


def test_library_resume_without_a_client_uses_the_recorded_provider_and_model(project, server):
    session_id = recorded_session(project, server)
    server.add(Reply(text="continued"))

    async def main():
        # The agent's configuration names another provider and model; the record wins, at the address
        # the user's config gives that provider (the top-level base_url would be OpenAI's).
        config = make_config("provider=openai", "model=gpt-other")
        config.tables["providers"] = {"openai-compatible": {"base_url": server.base_url}}
        store = SqliteStore(project.parent / "sessions.db")
        try:
            session = await SessionManager(Workspace.open(project, config), store).resume(session_id)
            run = await asyncio.wait_for(drive(session, "again"), 30)
            return run, await store.get_session(session_id)
        finally:
            await store.aclose()

    run, record = asyncio.run(main())
    assert run.ended.reason == "complete" and not run.of(ev.ModelChanged)
    assert server.chat_requests[-1].body["model"] == "mock-model"
    assert (record.provider, record.model) == ("openai-compatible", "mock-model")


def test_library_resume_refuses_an_unusable_recorded_provider_with_a_clear_message(project, server):
    session_id = recorded_session(project, server)

    async def main():
        config = make_config(f"base_url={server.base_url}")
        config.tables["providers"] = {"openai-compatible": {"disabled": True}}
        store = SqliteStore(project.parent / "sessions.db")
        try:
            with pytest.raises(ResumeRefused) as refused:
                await SessionManager(Workspace.open(project, config), store).resume(session_id)
            return str(refused.value)
        finally:
            await store.aclose()

    message = asyncio.run(main())
    assert "provider 'openai-compatible'" in message and "'mock-model'" in message
    assert "--provider NAME --model NAME" in message and "auger.resume(ID, provider=NAME, model=NAME)" in message
    assert len(server.chat_requests) == 1  # nothing was sent for the refused resume


def test_library_resume_with_another_model_is_refused_unless_asked_and_then_recorded(project, server):
    session_id = recorded_session(project, server)
    db = project.parent / "sessions.db"

    async def resume(switch: bool):
        config = make_config("provider=openai-compatible", f"base_url={other.base_url}", "model=other-model")
        store = SqliteStore(db)
        try:
            client = client_for(config, env={})
            session = await SessionManager(Workspace.open(project, config), store).resume(session_id, client=client,
                                                                  switch=switch)
            run = await asyncio.wait_for(drive(session, "again"), 30)
            return run, await store.get_session(session_id), [s.item for s in await store.load_items(session_id)]
        finally:
            await store.aclose()

    with MockChatServer([Reply(text="from the other model")]) as other:
        with pytest.raises(ResumeRefused) as refused:
            asyncio.run(resume(switch=False))
        assert "not 'openai-compatible' (model 'other-model')" in str(refused.value)
        assert other.chat_requests == []
        run, record, items = asyncio.run(resume(switch=True))
    (changed,) = run.of(ev.ModelChanged)
    assert (changed.previous_model, changed.model) == ("mock-model", "other-model")
    assert other.chat_requests[0].body["model"] == "other-model"
    assert record.model == "other-model"  # the switch is recorded: the store and the environment item
    assert any(isinstance(i, ContextMessage) and "<model>other-model</model>" in i.text for i in items)


def test_fork_follows_the_same_policy(project, server):
    session_id = recorded_session(project, server)

    async def main():
        with MockChatServer() as other:
            config = make_config("provider=openai-compatible", f"base_url={other.base_url}", "model=other-model")
            store = SqliteStore(project.parent / "sessions.db")
            try:
                with pytest.raises(ResumeRefused):
                    await SessionManager(Workspace.open(project, config), store).fork(session_id,
                                                              client=client_for(config, env={}))
                return await store.list_sessions()
            finally:
                await store.aclose()

    assert [s.id for s in asyncio.run(main())] == [session_id]  # no fork was created


def test_resume_with_the_recorded_client_still_works(project, server, tmp_path):
    server.add(Reply(text="one"), Reply(text="two"))

    async def main():
        db = tmp_path / "r.db"
        session, store = await open_session(project, server, db)
        await asyncio.wait_for(drive(session, "hello"), 30)
        await store.aclose()
        resumed, store = await open_session(project, server, db, resume=session.id)
        run = await asyncio.wait_for(drive(resumed, "again"), 30)
        await store.aclose()
        return run

    assert asyncio.run(main()).ended.reason == "complete"


def test_a_session_open_in_this_process_is_not_opened_twice(project, server):
    """A second Session on one stored conversation would interleave its records with the live one's (and
    close the live one's running calls as interrupted): resume refuses until the first has shut down."""
    from auger.engine.session.session import SessionAlreadyOpen
    from auger.protocol.ops import Shutdown, UserTurn
    from tests.support.harness import Follow

    server.add(Reply(text="first"), Reply(text="still the live one"), Reply(text="after it closed"))

    async def main():
        config = make_config("provider=openai-compatible", f"base_url={server.base_url}", "model=mock-model")
        store = SqliteStore(project.parent / "sessions.db")
        try:
            manager = SessionManager(Workspace.open(project, config), store)
            live = await manager.create(client_for(config, env={"OPENAI_API_KEY": "k"}))
            follow = Follow(live)
            live.submit(UserTurn("one"))
            first = await follow.until(ev.TurnEnded)
            refused = await asyncio.gather(manager.resume(live.id), manager.resume(live.id), return_exceptions=True)
            live.submit(UserTurn("two"))  # the live one goes on, then shuts down
            second = await follow.until(ev.TurnEnded)
            live.submit(Shutdown())
            await live.wait_closed()
            again = await manager.resume(live.id)
            third = (await drive(again, "three")).ended
            items = [s.item for s in await store.load_items(live.id)]
            return first, refused, second, third, items
        finally:
            await store.aclose()

    first, refused, second, third, items = asyncio.run(asyncio.wait_for(main(), 60))
    assert all(isinstance(r, SessionAlreadyOpen) and "already open" in str(r) for r in refused), refused
    assert [e.reason for e in (first, second, third)] == ["complete"] * 3
    texts = [getattr(i, "text", None) for i in items if type(i).__name__ in ("UserMessage", "AssistantMessage")]
    assert texts == ["one", "first", "two", "still the live one", "three", "after it closed"], [
        (type(i).__name__, getattr(i, "text", None)) for i in items]
