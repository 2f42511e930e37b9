"""Desktop notifications from the terminal UI: when a turn ends or an approval waits while you are looking
elsewhere, the terminal is asked to show a notification.

Which escape: terminals agree on none. OSC 9 (`ESC ] 9 ; text BEL`) is shown by iTerm2, WezTerm, Ghostty,
Windows Terminal and ConEmu; OSC 777 (`ESC ] 777 ; notify ; title ; body BEL`) by foot, urxvt and VTE-based
terminals (GNOME Terminal, Tilix); kitty has its own OSC 99. The choice is made from $TERM_PROGRAM, $TERM and
the variables terminals set (VTE_VERSION, KITTY_WINDOW_ID, WT_SESSION); Apple's Terminal shows none, so it
gets none. Inside tmux the escape is wrapped for passthrough (shown when tmux has `allow-passthrough on`).
The text never starts with a digit, so OSC 9's numbered subcommands (progress, working directory) cannot
be triggered by it, and control characters are removed.

When: the UI turns on focus reporting (`ESC [ ? 1004 h`); a terminal that supports it says when it gains
(`ESC [ I`) and loses (`ESC [ O`) focus, and a notification is sent only while it is not focused. A
terminal that never reports focus gets one when the turn has run at least NOTIFY_AFTER seconds, long
enough that you have probably looked away. `tui_notifications = false` turns them off.
"""

from __future__ import annotations

import re
from typing import Callable, Mapping

NOTIFY_AFTER = 10.0  # seconds a turn must have run to notify when the terminal never reports focus
FOCUS_ON, FOCUS_OFF = "\x1b[?1004h", "\x1b[?1004l"
FOCUS_IN, FOCUS_OUT = "\x1b[I", "\x1b[O"
TITLE = "auger"
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]+")


def _osc9(text: str) -> str:
    return f"\x1b]9;{TITLE}: {text}\x07"


def _osc777(text: str) -> str:
    return f"\x1b]777;notify;{TITLE};{text}\x07"


def _osc99(text: str) -> str:
    return f"\x1b]99;;{TITLE}: {text}\x1b\\"


def escape_for(env: Mapping[str, str]) -> Callable[[str], str] | None:
    """How this terminal is asked for a notification (text → escape sequence), or None when it has no way."""
    program = env.get("TERM_PROGRAM", "")
    term = env.get("TERM", "")
    inner = _flavour(program if program != "tmux" else env.get("LC_TERMINAL", ""), term, env)
    if env.get("TMUX") or program == "tmux":  # passthrough: every ESC inside doubled
        flavour = inner or _osc9
        return lambda text: "\x1bPtmux;" + flavour(text).replace("\x1b", "\x1b\x1b") + "\x1b\\"
    return inner


def _flavour(program: str, term: str, env: Mapping[str, str]) -> Callable[[str], str] | None:
    if program == "Apple_Terminal":
        return None
    if term == "xterm-kitty" or env.get("KITTY_WINDOW_ID"):
        return _osc99
    if program in ("iTerm.app", "iTerm2", "WezTerm", "ghostty", "vscode") or env.get("WT_SESSION"):
        return _osc9
    if term.startswith(("foot", "rxvt")) or env.get("VTE_VERSION"):
        return _osc777
    return _osc9


def notification_text(text: str, limit: int = 160) -> str:
    """One line, no control characters, at most `limit` characters."""
    line = _CONTROL.sub(" ", text).strip()
    return line if len(line) <= limit else line[:limit - 1] + "…"


class Attention:
    """Whether the person at the terminal is likely looking elsewhere, from focus reports or a turn's length."""

    def __init__(self, after: float = NOTIFY_AFTER) -> None:
        self.focused: bool | None = None  # None: the terminal has not reported focus
        self.after = after

    def report(self, data: str) -> None:
        if data == FOCUS_IN:
            self.focused = True
        elif data == FOCUS_OUT:
            self.focused = False

    def away(self, elapsed: float) -> bool:
        """Notify now? Known focus decides; unknown focus: only once the turn has run `after` seconds."""
        return not self.focused if self.focused is not None else elapsed >= self.after
