"""The interactive terminal UI (`auger`, `auger PROMPT`, `auger resume`): an inline prompt under a
transcript printed into the terminal's scrollback — of a session in this process, or of one in an
`auger serve` (`auger --connect URL`, `auger attach`). See docs/tui.md."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from auger._remote import Client
    from auger.config import Config


def run_tui(config: Config, root: str, *, prompt: str | None = None, resume: str | None = None,
            pick: bool = False, server: Client | None = None) -> int:
    """Run the interactive session until the user quits; returns the exit status. With `server`, the
    sessions are that server's (tui/remote.py), and leaving one leaves it running there."""
    import asyncio

    from auger.config import home_dirs
    from auger.frontends.tui.app import Tui
    from auger.frontends.tui.sessions import LocalSessions, Sessions

    sessions: Sessions
    if server is None:
        sessions = LocalSessions(config, root, config.db_path)
    else:
        from auger.frontends.tui.remote import RemoteSessions

        sessions = remote = RemoteSessions(config, root, server)
    tui = Tui(sessions, prompt=prompt, resume=resume, pick=pick, history_path=home_dirs()["data"] / "prompt-history")
    if server is not None:
        remote.report = lambda text: tui.say(text, "yellow")
    asyncio.run(tui.run())
    return 1 if tui.failed else 0
