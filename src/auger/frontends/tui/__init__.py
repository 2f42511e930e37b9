"""The interactive terminal UI (`auger`, `auger PROMPT`, `auger resume`): an inline prompt under a
transcript printed into the terminal's scrollback. See docs/tui.md."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from auger.config import Config


def run_tui(config: Config, root: str, *, prompt: str | None = None, resume: str | None = None,
            pick: bool = False) -> int:
    """Run the interactive session until the user quits; returns the exit status."""
    import asyncio

    from auger.config import home_dirs
    from auger.frontends.tui.app import Tui
    from auger.frontends.tui.sessions import LocalSessions

    tui = Tui(LocalSessions(config, root, config.db_path), prompt=prompt, resume=resume, pick=pick,
              history_path=home_dirs()["data"] / "prompt-history")
    asyncio.run(tui.run())
    return 1 if tui.failed else 0
