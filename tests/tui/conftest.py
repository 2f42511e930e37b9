"""Fixtures for driving the terminal UI in tmux against the mock Chat Completions server — in this process
(`local`), or as a client of a real `auger serve` process on loopback (`remote`: `auger --connect URL`).

A test runs both ways with `@both_ways`; its `way` argument says which one it is in."""

from __future__ import annotations

import pytest

from tests.support.serve import TOKEN, start_process, stop_process
from tests.tui.terminal import Terminal, need_tmux

both_ways = pytest.mark.parametrize("way", ["local", "remote"], indirect=True)


@pytest.fixture
def way(request) -> str:
    """`local` unless the test is parametrized with @both_ways."""
    return getattr(request, "param", "local")


@pytest.fixture
def term(project, server, auger_home, way, tmp_path):
    """Start `auger` in tmux: term(*extra_args, width=, height=, env=) -> Terminal; killed at teardown. Run
    `remote`, the first call starts `auger serve` (its mode from the arguments' `--mode`, else auto, as a
    terminal's own session) on the same home, and the terminal connects to it."""
    need_tmux()
    started: list[Terminal] = []
    served: list = []

    def start(*args: str, width: int = 100, height: int = 30, env: dict[str, str] | None = None,
              base: bool = True) -> Terminal:
        if way == "remote":
            return start_remote(*args, width=width, height=height, env=env)
        flags = ["--base-url", server.base_url, "-m", "mock-model", "-c", "model_retry_base_delay=0.01",
                 "-c", "generate_titles=false"] if base else []
        command = list(args[:1]) if args[:1] in (("resume",), ("exec",)) else []  # a subcommand goes first
        t = Terminal(project, auger_home, [*command, *flags, *args[len(command):]], width=width, height=height,
                     env=env)
        started.append(t)
        return t

    def start_remote(*args: str, width: int, height: int, env: dict[str, str] | None) -> Terminal:
        words = list(args)
        mode = "auto"
        if "--mode" in words:
            at = words.index("--mode")
            mode = words[at + 1]
            del words[at:at + 2]
        if not served:
            proc, url, _ = start_process(project, auger_home, server, tmp_path / "served.db", "--mode", mode,
                                         "-c", "generate_titles=false")
            served.append((proc, url))
        url = served[0][1]
        t = Terminal(project, auger_home, ["--connect", url, *words], width=width, height=height,
                     env={"AUGER_SERVER_TOKEN": TOKEN, **(env or {})})
        started.append(t)
        return t

    yield start
    for t in started:
        t.close()
    for proc, _ in served:
        code, stderr = stop_process(proc)
        assert code == 0, stderr
