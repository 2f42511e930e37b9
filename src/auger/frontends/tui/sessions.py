"""Opening, switching and closing the TUI's sessions. `Sessions` is what the UI needs, wherever the
sessions live; `LocalSessions` are this machine's store's — new, resumed, forked, each claimed in the
store so no other auger process runs the same session at once. (A server's are in tui/remote.py.)"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Protocol

if TYPE_CHECKING:
    from auger.config import Config
    from auger.changes.review_change import Change, ReviewTarget
    from auger.engine.session.init_doc import InitDraft
    from auger.engine.agents.review import ReviewResult
    from auger.frontends.tui.feed import Feed
    from auger.protocol.envelope import Envelope
    from auger.engine.session.sessions import SessionManager
    from auger.store.base import Store


class OpenError(Exception):
    """A one-line reason a session could not be opened."""


@dataclass(frozen=True)
class Listed:
    """A session as the picker lists it."""

    id: str
    title: str
    updated: float
    running: bool = False  # a turn runs in it now (a server's sessions say so)


class Sessions(Protocol):
    """Where the UI's sessions come from: listed, found by an id prefix, opened as a Feed."""

    config: Config
    root: str

    @property
    def where(self) -> str:
        """"" for this machine's store; the server's URL for a server's sessions."""
    async def recent(self, limit: int = 10) -> list[Listed]: ...
    async def find(self, prefix: str) -> Listed: ...
    async def open(self, *, resume: str | None = None, fork: str | None = None) -> Feed:
        """A new session, or `resume`/`fork` of a stored one (a full id); OpenError says why not."""
    async def review(self, target: ReviewTarget, instructions: str,
                     on_envelope: Callable[[Envelope], None]) -> tuple[Change, ReviewResult] | str: ...
    async def draft_agents_md(self, on_envelope: Callable[[Envelope], None]) -> InitDraft | str: ...
    async def release(self) -> None:
        """Let go of the session the last `open` gave (its lease, here)."""
    async def aclose(self) -> None: ...


class LocalSessions:
    """The sessions of this machine's store, run in this process."""

    where = ""

    def __init__(self, config: Config, root: str, db_path: str | None) -> None:
        self.config = config
        self.root = root
        self.db_path = db_path
        self._store: Store | None = None
        self._manager: SessionManager | None = None
        self.claimed: str | None = None

    async def _ensure(self) -> SessionManager:
        """The session manager, opening the store and importing the engine on first use."""
        if self._manager is None:
            import asyncio

            await asyncio.to_thread(_import_engine)  # the prompt stays responsive meanwhile

            from auger.engine.session.sessions import SessionManager
            from auger.engine.workspace import Workspace
            from auger.store.factory import open_store

            self._store = open_store(self.db_path)
            self._manager = SessionManager(Workspace.open(self.root, self.config), self._store)
        return self._manager

    def _opened_store(self) -> Store:
        assert self._store is not None, "opened by _ensure"
        return self._store

    async def recent(self, limit: int = 10) -> list[Listed]:
        """The latest sessions recorded in this project directory, newest first."""
        manager = await self._ensure()
        return [Listed(r.id, r.title, r.updated) for r in await manager.list(limit)]

    async def find(self, prefix: str) -> Listed:
        await self._ensure()
        found = await self._opened_store().find_sessions(prefix)
        if len(found) != 1:
            raise OpenError(f"no stored session matches '{prefix}'" if not found else
                            f"'{prefix}' matches {len(found)} sessions; give more of the id")
        return Listed(found[0].id, found[0].title, found[0].updated)

    async def open(self, *, resume: str | None = None, fork: str | None = None) -> Feed:
        """A new session, or `resume`/`fork` of a stored one (a full id)."""
        from auger.engine.session.resume import ResumeRefused
        from auger.engine.session.sessions import SessionNotFound
        from auger.frontends.tui.feed import LocalFeed
        from auger.models.registry import ProviderError, client_for
        from auger.store.sqlite import StoreError

        try:
            manager = await self._ensure()
            if resume:
                await self._claim(resume)
                try:
                    return LocalFeed(await manager.resume(resume, interactive=True))
                except BaseException:
                    await self.release()
                    raise
            if fork:
                session = await manager.fork(fork, interactive=True)
            else:
                session = await manager.create(client_for(self.config), interactive=True)
            await self._claim(session.id)
            return LocalFeed(session)
        except (ProviderError, ResumeRefused, SessionNotFound, StoreError, ValueError) as exc:
            raise OpenError(str(exc)) from None

    async def review(self, target: ReviewTarget, instructions: str,
                     on_envelope: Callable[[Envelope], None]) -> tuple[Change, ReviewResult] | str:
        """Review `target` in a read-only session of its own (engine/agents/review.py, as `auger review` does):
        the change and the validated findings, or one line saying why there are none."""
        from auger.changes.review_change import ReviewError, collect_change
        from auger.engine.agents.review import ReviewFailed, review_client, run_review
        from auger.models.registry import ProviderError

        try:
            change = await collect_change(Path(self.root), target)
            if change.empty:
                return f"nothing to review: no {target.describe()}"
            result = await run_review(await self._ensure(), review_client(self.config), change, instructions,
                                      on_envelope=on_envelope)
        except (ReviewError, ProviderError) as exc:
            return str(exc)
        except ReviewFailed as exc:
            return f"{exc} (session {exc.session_id[:8]})"
        return change, result

    async def draft_agents_md(self, on_envelope: Callable[[Envelope], None]) -> InitDraft | str:
        """A drafted AGENTS.md queued in a read-only session of its own (engine/session/init_doc.py, as `auger init`
        does), still open for the user's answer; or one line saying why there is none."""
        from auger.engine.session.init_doc import InitFailed, draft_agents_md
        from auger.models.registry import ProviderError, client_for

        try:
            return await draft_agents_md(await self._ensure(), client_for(self.config), on_envelope)
        except ProviderError as exc:
            return str(exc)
        except InitFailed as exc:
            return f"{exc} (session {exc.session_id[:8]})"

    async def _claim(self, session_id: str) -> None:
        holder = await self._opened_store().claim(session_id)
        if holder is not None:
            raise OpenError(f"session {session_id[:8]} is running in another auger process ({holder}); "
                            "/fork it instead")
        self.claimed = session_id

    async def release(self) -> None:
        if self.claimed is not None and self._store is not None:
            await self._store.release(self.claimed)
            self.claimed = None

    async def aclose(self) -> None:
        await self.release()
        if self._store is not None:
            await self._store.aclose()


def _import_engine() -> None:
    import auger.engine.session.sessions  # noqa: F401
    import auger.engine.workspace  # noqa: F401
    import auger.models.registry  # noqa: F401
    import auger.store.sqlite  # noqa: F401
