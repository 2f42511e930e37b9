"""Fixtures for driving the terminal UI in tmux against the mock Chat Completions server."""

from __future__ import annotations

import pytest

from tests.tui.terminal import Terminal, need_tmux


@pytest.fixture
def term(project, server, auger_home):
    """Start `auger` in tmux: term(*extra_args, width=, height=, env=) -> Terminal; killed at teardown."""
    need_tmux()
    started: list[Terminal] = []

    def start(*args: str, width: int = 100, height: int = 30, env: dict[str, str] | None = None,
              base: bool = True) -> Terminal:
        flags = ["--base-url", server.base_url, "-m", "mock-model", "-c", "model_retry_base_delay=0.01",
                 "-c", "generate_titles=false"] if base else []
        command = list(args[:1]) if args[:1] in (("resume",), ("exec",)) else []  # a subcommand goes first
        t = Terminal(project, auger_home, [*command, *flags, *args[len(command):]], width=width, height=height,
                     env=env)
        started.append(t)
        return t

    yield start
    for t in started:
        t.close()
