"""What the `/` commands (tui/commands.py) and a handoff (tui/handoff.py) may use of the terminal UI: a
protocol that app.Tui is, named apart from the app so that neither has to import it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Protocol

if TYPE_CHECKING:
    from auger.frontends.tui.feed import Feed
    from auger.frontends.tui.relay import StoreRelay
    from auger.frontends.tui.render import Renderer
    from auger.frontends.tui.sessions import Sessions


class Tui(Protocol):
    """What a command or a handoff may use of the terminal UI (app.Tui; named apart so they need not import
    the app)."""

    feed: Feed | None
    sessions: Sessions
    renderer: Renderer
    busy: bool
    after_turn: list[tuple[str, Callable[[], None]]]
    branch: str
    root: Path
    picking: list | None
    done: bool
    ps: Any
    seen_seq: int
    relay: StoreRelay | None
    handing: Any

    def say(self, text: str, style: str = "cyan") -> None: ...

    def out(self, text: str) -> None: ...

    def redraw(self) -> None: ...

    async def switch(self, *, resume: str | None = None, fork: str | None = None) -> bool: ...

    async def send_initial(self) -> None: ...

    async def choose(self, question: str, options: list[tuple[str, str]]) -> str | None: ...

    async def edit(self, path: Path) -> int: ...

    async def stop_following(self) -> None: ...

    def continue_with(self, feed: Feed, sessions: Sessions) -> None: ...
