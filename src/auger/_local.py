"""Sessions run by this process's engine: `auger.open`, `auger.resume`, `auger.run`, `auger.run_sync`.

The settings are the CLI's: the layered config (defaults < the user's config.toml < the project's
`.auger/config.toml` < `AUGER_*` environment variables) with the caller's arguments on top, so a script
runs with the provider, key and model the user configured unless it names others. An argument the config
cannot take is a `ConfigError`; a problem in a config file is a warning, as it is for the CLI. The store
is the user's (`sessions.db` in the user data directory, or `db` / `AUGER_DB`), never the project.

A session is held as the CLI holds it: the store's lease for its id (so `auger resume` elsewhere is
refused while it runs here), released when it closes. Without an approval callback it runs headless —
what the mode would ask is denied, or approved with `approve_all` — exactly as `auger exec` does.

The engine is imported inside the functions: `import auger` stays cheap.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, AsyncGenerator, Iterator, Mapping, Sequence

from auger._errors import ConfigError, Refused, SessionBusy, SessionClosed, SessionNotFound, StoreError
from auger._session import Opening, Session
from auger._types import Approver, Result, TurnChange

if TYPE_CHECKING:
    from auger.config import Config
    from auger.engine.session.session import Session as EngineSession
    from auger.engine.session.sessions import SessionManager
    from auger.protocol.envelope import Envelope
    from auger.protocol.ops import ApprovalDecision, Op
    from auger.store.base import SessionRecord, Store

__all__ = ["open_session", "resume_session", "run", "run_sync"]

PathLike = str | os.PathLike[str]


@dataclass(frozen=True)
class _Settings:
    """What the caller chose; None leaves the config's value."""

    model: str | None = None
    provider: str | None = None
    base_url: str | None = None
    mode: str | None = None
    approve_all: bool | None = None
    db: PathLike | None = None
    config: Mapping[str, Any] = field(default_factory=dict)

    def flags(self) -> dict[str, Any]:
        chosen: dict[str, Any] = dict(self.config)
        for key, value in (("model", self.model), ("provider", self.provider), ("base_url", self.base_url),
                           ("mode", self.mode), ("approve_all", self.approve_all),
                           ("db_path", None if self.db is None else os.fspath(self.db))):
            if value is not None:
                chosen[key] = value
        return chosen


def open_session(cwd: PathLike = ".", *, model: str | None = None, provider: str | None = None,
                 base_url: str | None = None, mode: str | None = None, approve: Approver | None = None,
                 approve_all: bool | None = None, db: PathLike | None = None,
                 config: Mapping[str, Any] | None = None) -> Opening:
    """A new session in the project `cwd`.

    `model`, `provider` and `base_url` choose the model (a base URL without a provider is an
    OpenAI-compatible server); by default the user's config and `AUGER_*` variables do. `mode` is the
    trust mode (`plan`, `safe`, `auto`). `approve` is called for each action the mode does not allow on
    its own; without it, those are denied — or approved, with `approve_all=True`. `db` is the session
    database (default: the user's). `config` sets any other config key (`{"snapshots": False}`)."""
    settings = _Settings(model, provider, base_url, mode, approve_all, db, dict(config or {}))
    return Opening(lambda: _create(os.fspath(cwd), settings, approve))


def resume_session(session_id: str, *, cwd: PathLike | None = None, model: str | None = None,
                   provider: str | None = None, base_url: str | None = None, mode: str | None = None,
                   approve: Approver | None = None, approve_all: bool | None = None,
                   db: PathLike | None = None, config: Mapping[str, Any] | None = None) -> Opening:
    """A stored session (its id, or a unique prefix), continued with its whole history in the directory it
    was recorded in (or `cwd`). It keeps its provider and model unless `provider` or `model` names
    another: the switch is then recorded. The other arguments are `open`'s."""
    settings = _Settings(model, provider, base_url, mode, approve_all, db, dict(config or {}))
    return Opening(lambda: _resume(session_id, None if cwd is None else os.fspath(cwd), settings, approve))


async def run(prompt: str, *, cwd: PathLike = ".", model: str | None = None, provider: str | None = None,
              base_url: str | None = None, mode: str | None = None, approve: Approver | None = None,
              approve_all: bool | None = None, output_schema: Mapping[str, Any] | None = None,
              images: Sequence[str] = (), until: str | None = None, goal: str | None = None,
              max_turns: int | None = None, db: PathLike | None = None,
              config: Mapping[str, Any] | None = None) -> Result:
    """Run one prompt in a new session and close it: the Result (final text, diff, usage, and the value
    `output_schema` asked for). A turn that does not complete raises `TurnFailed` / `TurnInterrupted`.
    The arguments are `open`'s and `Session.run`'s (`until`, `goal`, `max_turns`: a goal run)."""
    chosen = {"generate_titles": False, **(config or {})}  # one prompt keeps its first-prompt title
    async with open_session(cwd, model=model, provider=provider, base_url=base_url, mode=mode, approve=approve,
                            approve_all=approve_all, db=db, config=chosen) as session:
        return await session.run(prompt, output_schema=output_schema, images=images, until=until, goal=goal,
                                 max_turns=max_turns)


def run_sync(prompt: str, *, cwd: PathLike = ".", model: str | None = None, provider: str | None = None,
             base_url: str | None = None, mode: str | None = None, approve: Approver | None = None,
             approve_all: bool | None = None, output_schema: Mapping[str, Any] | None = None,
             images: Sequence[str] = (), until: str | None = None, goal: str | None = None,
             max_turns: int | None = None, db: PathLike | None = None,
             config: Mapping[str, Any] | None = None) -> Result:
    """`run` for code without an event loop (a script, a notebook cell that is not async)."""
    return asyncio.run(run(prompt, cwd=cwd, model=model, provider=provider, base_url=base_url, mode=mode,
                           approve=approve, approve_all=approve_all, output_schema=output_schema, images=images,
                           until=until, goal=goal, max_turns=max_turns, db=db, config=config))


# -- opening -------------------------------------------------------------------------------------
async def _create(cwd: str, settings: _Settings, approver: Approver | None) -> Session:
    from auger.engine.session.sessions import SessionManager
    from auger.engine.workspace import Workspace
    from auger.models.registry import client_for

    root = os.path.abspath(cwd)
    config = _config(root, settings)
    with engine_errors():
        workspace = Workspace.open(root, config)
        client = client_for(config)
        store = _SharedStore.open(config)
        try:
            manager = SessionManager(workspace, store.store)
            engine = await manager.create(client, interactive=approver is not None)
            await _claim(store.store, engine.id)
        except BaseException:
            await store.leave()
            raise
    return Session(_LocalLink(engine, manager, store), approver)


async def _resume(session_id: str, cwd: str | None, settings: _Settings, approver: Approver | None) -> Session:
    from auger.engine.session.resume import resume_config
    from auger.engine.session.session import SessionAlreadyOpen
    from auger.engine.session.sessions import SessionManager
    from auger.engine.workspace import Workspace
    from auger.models.registry import client_for

    with engine_errors():
        store = _SharedStore.open(_config(None if cwd is None else os.path.abspath(cwd), settings))
        try:
            record = await _find(store.store, session_id)
            root = os.path.abspath(cwd) if cwd is not None else record.cwd
            config = _config(root, settings)
            workspace = Workspace.open(root, config)
            switch = settings.model is not None or settings.provider is not None
            client = client_for(resume_config(record, config, provider=settings.provider,
                                              model=settings.model)) if switch else None
            await _claim(store.store, record.id)  # ours already when this process runs it: resume refuses then
            try:
                manager = SessionManager(workspace, store.store)
                engine = await manager.resume(record.id, client=client, switch=switch, mode=settings.mode,
                                              interactive=approver is not None)
            except SessionAlreadyOpen:  # the lease is the open session's: keep it
                raise
            except BaseException:
                await store.store.release(record.id)
                raise
        except BaseException:
            await store.leave()
            raise
    return Session(_LocalLink(engine, manager, store), approver)


def _config(project: str | None, settings: _Settings) -> Config:
    """The layered config with the caller's settings on top; ConfigError for a setting it cannot take."""
    from pathlib import Path

    from auger.config import load_config

    config = load_config(flags=settings.flags(), project_dir=Path(project) if project and os.path.isdir(project)
                         else None)
    problems = []
    for line in config.warnings:
        if line.startswith("--"):  # one of ours: load_config names a flag `--key`
            problems.append(line.partition(": ")[2].removesuffix(" (ignored)"))
        else:
            warnings.warn(f"auger: {line}", stacklevel=4)
    if problems:
        raise ConfigError("; ".join(problems))
    return config


async def _find(store: Store, session_id: str) -> SessionRecord:
    found = await store.find_sessions(session_id)
    if len(found) == 1:
        return found[0]
    if not found:
        raise SessionNotFound(f"no stored session matches {session_id!r}")
    raise SessionNotFound(f"session id prefix {session_id!r} matches {len(found)} sessions; give more of the id")


async def _claim(store: Store, session_id: str) -> None:
    holder = await store.claim(session_id)
    if holder is not None:
        raise SessionBusy(f"session {session_id[:8]} is running in another auger process ({holder})")


@contextlib.contextmanager
def engine_errors() -> Iterator[None]:
    """The engine's exceptions as the public API's (auger/_errors.py)."""
    from auger.engine.session.session import SessionAlreadyOpen
    from auger.engine.session.sessions import SessionNotFound as NoSuchSession
    from auger.extras import MissingExtra
    from auger.models.registry import ProviderError
    from auger.store.base import StoreError as StoreFailed

    try:
        yield
    except ProviderError as exc:  # the resume policy's refusals too: their message says how to switch
        raise ConfigError(str(exc)) from None
    except SessionAlreadyOpen as exc:
        raise SessionBusy(str(exc)) from None
    except NoSuchSession as exc:
        raise SessionNotFound(str(exc)) from None
    except StoreFailed as exc:
        raise StoreError(str(exc)) from None
    except (NotADirectoryError, MissingExtra) as exc:
        raise ConfigError(str(exc)) from None


class _SharedStore:
    """One store for a session and its forks: closed when the last of them closes."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._users = 1

    @classmethod
    def open(cls, config: Config) -> _SharedStore:
        from auger.store.factory import open_store  # a SQLite file, or a postgresql:// URL

        return cls(open_store(config.db_path))

    def join(self) -> _SharedStore:
        self._users += 1
        return self

    async def leave(self) -> None:
        self._users -= 1
        if self._users == 0:
            await self.store.aclose()


class _LocalLink:
    """A session of this process's engine, as `auger/_session.py` drives it."""

    def __init__(self, engine: EngineSession, manager: SessionManager, store: _SharedStore) -> None:
        self._engine = engine
        self._manager = manager
        self._store = store
        self._closed = False

    @property
    def session_id(self) -> str:
        return self._engine.id

    @property
    def cwd(self) -> str:
        return str(self._engine.workspace.root)

    async def cursor(self) -> int:
        return self._engine.emitted_seq

    async def submit(self, op: Op, submission_id: str) -> None:
        try:
            self._engine.submit(op, submission_id)
        except RuntimeError:  # shut down
            raise SessionClosed(f"session {self.session_id[:8]} is shut down") from None

    async def answer(self, decision: ApprovalDecision, submission_id: str) -> None:
        self._engine.decide(decision, submission_id)  # a refusal means someone answered first

    async def envelopes(self, after: int) -> AsyncGenerator[Envelope, None]:
        with engine_errors():
            async for envelope in self._engine.subscribe(after_seq=after):
                yield envelope

    async def changes(self, turn: str | None) -> list[TurnChange]:
        from auger.engine.turn.changes import numbered_turns

        with engine_errors():
            items = [stored.item for stored in await self._store.store.load_items(self.session_id)]
        try:
            found = numbered_turns(items, turn)
        except LookupError as exc:
            raise Refused(str(exc)) from None
        return [TurnChange(n, t.turn_id, list(t.files), t.diff, bool(t.after)) for n, t in found]

    async def fork(self, before: int | None, mode: str | None, approver: Approver | None) -> Session:
        with engine_errors():
            try:
                engine = await self._manager.fork(self.session_id, before_user_message=before, mode=mode,
                                                  interactive=approver is not None)
            except ValueError as exc:  # a cut the history does not have
                raise Refused(str(exc)) from None
            await _claim(self._store.store, engine.id)
        return Session(_LocalLink(engine, self._manager, self._store.join()), approver)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        from auger.protocol.ops import Shutdown

        try:
            with engine_errors():
                if self._engine.accepts_ops:
                    self._engine.submit(Shutdown())
                await self._engine.wait_closed()
                await self._store.store.release(self.session_id)
        finally:
            await self._store.leave()

