"""The real `auger` program in a real terminal: a tmux server of its own (unique socket), driven with
send-keys and read with capture-pane, polled with generous timeouts for a loaded machine."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

TIMEOUT = 30.0


def need_tmux() -> str:
    path = shutil.which("tmux")
    if path is None:
        pytest.skip("tmux is not installed: the terminal UI tests drive the program through tmux "
                    "(.ci/run installs it)")
    return path


def status_line(screen: str) -> str:
    """The status line: drawn just above the input line (the last line starting with the prompt mark)."""
    lines = screen.rstrip("\n").splitlines()
    prompts = [i for i, line in enumerate(lines) if line.startswith("›")]
    return lines[prompts[-1] - 1] if prompts and prompts[-1] > 0 else ""


class Terminal:
    def __init__(self, cwd: Path, home: Path, args: list[str], *, width: int = 100, height: int = 30,
                 env: dict[str, str] | None = None) -> None:
        self.tmux = need_tmux()
        self.socket = f"auger-test-{uuid.uuid4().hex[:10]}"
        values = {"AUGER_HOME": str(home), "OPENAI_API_KEY": "sk-test", "TERM": "xterm-256color",
                  "PYTHONPATH": os.environ.get("PYTHONPATH", ""), "PATH": os.environ.get("PATH", ""),
                  "HOME": str(home), "EDITOR": "true", **(env or {})}
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in values.items())
        program = " ".join(shlex.quote(a) for a in [sys.executable, "-m", "auger", *args])
        # the pane outlives the program, so the scrollback it leaves can be read
        script = f"export {exports}; {program}; echo AUGER-EXITED:$?; sleep 600"
        self.started = time.monotonic()
        self._tmux("new-session", "-d", "-x", str(width), "-y", str(height), "-c", str(cwd), "sh", "-c", script)

    def _tmux(self, *args: str) -> str:
        result = subprocess.run([self.tmux, "-L", self.socket, "-f", "/dev/null", *args], capture_output=True,
                                text=True, timeout=20)
        assert result.returncode == 0, f"tmux {args[0]} failed: {result.stderr}"
        return result.stdout

    def send(self, *keys: str) -> None:
        self._tmux("send-keys", "-t", "0", *keys)

    def type(self, text: str) -> None:
        self._tmux("send-keys", "-t", "0", "-l", text)

    def submit(self, text: str) -> None:
        """Type a line and press Enter once it is echoed, as a person would."""
        self.type(text)
        def echoed(screen: str) -> bool:
            prompts = [line for line in screen.splitlines() if line.startswith("›")]
            return bool(prompts) and prompts[-1].rstrip() == f"› {text}".rstrip()

        self.wait_until(echoed, f"{text!r} echoed at the prompt")
        self.send("Enter")

    def screen(self, ansi: bool = False) -> str:
        return self._tmux("capture-pane", "-p", "-t", "0", *(["-e"] if ansi else []))

    def history(self) -> str:
        """The whole pane including what scrolled off: the transcript a user scrolls back through."""
        return self._tmux("capture-pane", "-p", "-t", "0", "-S", "-2000")

    def wait_for(self, text: str, timeout: float = TIMEOUT, *, whole: bool = False) -> str:
        deadline = time.monotonic() + timeout
        while True:
            shown = self.history() if whole else self.screen()
            if text in shown:
                return shown
            if time.monotonic() > deadline:
                raise AssertionError(f"{text!r} did not appear within {timeout}s; the pane shows:\n{shown}")
            time.sleep(0.05)

    def wait_until(self, predicate, what: str, timeout: float = TIMEOUT, *, ansi: bool = False) -> str:
        deadline = time.monotonic() + timeout
        while not predicate(shown := self.screen(ansi=ansi)):
            if time.monotonic() > deadline:
                raise AssertionError(f"{what} not seen within {timeout}s:\n{shown}")
            time.sleep(0.05)
        return shown

    def wait_gone(self, text: str, timeout: float = TIMEOUT) -> str:
        deadline = time.monotonic() + timeout
        while text in (shown := self.screen()):
            if time.monotonic() > deadline:
                raise AssertionError(f"{text!r} still shown after {timeout}s:\n{shown}")
            time.sleep(0.05)
        return shown

    def ready(self) -> str:
        """Wait for the session to be open (its header) and the prompt to be drawn."""
        return self.wait_for("auger · ")

    def idle(self) -> str:
        """Wait until no turn runs (the status line offers /help instead of esc): commands such as /undo
        are refused while a turn is still ending, even after its last words are on screen."""
        return self.wait_until(lambda s: "/help" in status_line(s), "the status line between turns")

    def resize(self, width: int, height: int) -> None:
        self._tmux("resize-window", "-t", "0", "-x", str(width), "-y", str(height))

    def close(self) -> None:
        subprocess.run([self.tmux, "-L", self.socket, "kill-server"], capture_output=True, timeout=20)
