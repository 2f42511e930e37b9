"""The Agent: what every session of one project shares, and never mutates."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

from auger.config import Config
from auger.engine.history import INTERRUPTED_OUTPUT, History, latest_plan
from auger.engine.session import Session
from auger.models.base import ModelClient
from auger.protocol.events import ModelChanged
from auger.protocol.items import ToolOutput, UserMessage
from auger.store.base import SessionRecord, Store
from auger.tools.registry import ToolRegistry, default_registry


class SessionNotFound(LookupError):
    pass


class Agent:
    """Project root, tool catalog and configuration, shared read-only by many concurrent sessions."""

    __slots__ = ("root", "config", "tools", "skills", "prompts", "config_dir")

    def __init__(self, root: Path | str, config: Config | None = None, tools: ToolRegistry | None = None) -> None:
        from auger.config import home_dirs
        from auger.context.prompts import discover_prompts
        from auger.context.skills import discover_skills

        root = Path(os.path.realpath(root))
        if not root.is_dir():
            raise NotADirectoryError(f"project root {root} is not a directory")
        config_dir = home_dirs()["config"]
        skills = discover_skills(root, config_dir)
        if tools is None:
            from auger.tools.skills import skill_tool

            tools = default_registry(extra=[skill_tool(skills)] if skills.skills else [])
        for name, value in (("root", root), ("config", config or Config()), ("tools", tools), ("skills", skills),
                            ("prompts", discover_prompts(root, config_dir)), ("config_dir", config_dir)):
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Agent is immutable; per-conversation state belongs to a Session")

    async def start_session(self, *, store: Store, client: ModelClient, mode: str | None = None,
                            interactive: bool = False) -> Session:
        now = time.time()
        record = SessionRecord(id=str(uuid.uuid4()), created=now, updated=now, cwd=str(self.root),
                               provider=client.provider, model=client.model, mode=mode or self.config.mode)
        await store.create_session(record)
        session = Session(self, store=store, client=client, meta=record, history=History(),
                          interactive=interactive)
        await session.prepare()
        await session.start(resumed=False)
        return session

    async def fork_session(self, source_id: str, *, store: Store, client: ModelClient | None = None,
                           switch: bool = False, before_user_message: int | None = None, mode: str | None = None,
                           interactive: bool = False) -> Session:
        """A new session starting from a copy of another's history, optionally cut just before its
        Nth user message (1-based). The source is left untouched. The model follows the resume policy
        (see resume_session): the source's, unless `switch` accepts another client's."""
        from auger.engine.resume import check_client, resume_client, resume_config

        source = await store.get_session(source_id)
        if source is None:
            raise SessionNotFound(f"no stored session matches '{source_id}'; list them with `auger sessions`")
        if client is None:
            client = resume_client(source, resume_config(source, self.config))
        check_client(source, client, switch=switch)
        cut = None
        if before_user_message is not None:
            seqs = [s.seq for s in await store.load_items(source.id) if isinstance(s.item, UserMessage)]
            if not 1 <= before_user_message <= len(seqs):
                raise ValueError(f"session {source.id[:8]} has {len(seqs)} user messages; "
                                 f"cannot cut before message {before_user_message}")
            cut = seqs[before_user_message - 1]
        now = time.time()
        record = SessionRecord(id=str(uuid.uuid4()), created=now, updated=now, cwd=source.cwd,
                               provider=client.provider, model=client.model, mode=mode or source.mode,
                               title=f"fork of {source.title or source.id[:8]}"[:80])
        await store.create_session(record)
        await store.copy_items(source.id, record.id, cut)
        return await self.resume_session(record.id, store=store, client=client, mode=mode, interactive=interactive)

    async def resume_session(self, session_id: str, *, store: Store, client: ModelClient | None = None,
                             switch: bool = False, mode: str | None = None, interactive: bool = False) -> Session:
        """Continue a stored session with its full history.

        The model is the one the session was recorded with (engine.resume): with no `client`, it is built
        from the record, and resuming is refused (ResumeRefused) if that provider cannot be used here. A
        `client` for another provider or model is accepted only with `switch=True`; the switch is then
        recorded. Calls that never got an output (the process died mid-call) are closed with an
        "interrupted" output, recorded, so the model knows and the API accepts it.
        """
        from auger.engine.resume import check_client, resume_client, resume_config

        record = await store.get_session(session_id)
        if record is None:
            raise SessionNotFound(f"no stored session matches '{session_id}'; list them with `auger sessions`")
        if client is None:
            client = resume_client(record, resume_config(record, self.config))
        previous = (record.provider, record.model)
        switched = check_client(record, client, switch=switch)
        stored = await store.load_items(record.id)
        history = History(s.item for s in stored)
        last_turn = stored[-1].turn_id if stored else "resume"
        for call in history.unanswered_calls():
            output = ToolOutput(call.call_id, INTERRUPTED_OUTPUT, ok=False)
            await store.append(record.id, last_turn, output, tool_name=call.name, arguments=call.arguments)
            history.append(output)
        if mode:
            record.mode = mode
        if switched or mode:
            record.provider, record.model = client.provider, client.model
            await store.update_session(record.id, provider=record.provider, model=record.model, mode=record.mode)
        session = Session(self, store=store, client=client, meta=record, history=history,
                          interactive=interactive, usage=await store.usage_total(record.id))
        session.tool_state.plan = latest_plan(history.items)
        from auger.models.registry import stored_cost

        session.cost = await stored_cost(store, record.id, self.config)
        await session.prepare()  # a new model is told to the model as an environment change, recorded
        await session.start(resumed=True)
        if switched:
            session.emit(ModelChanged(client.provider, client.model, *previous))
        return session
