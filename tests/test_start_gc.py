"""The garbage collector held back while a command starts (src/auger/start_gc.py): held, it collects the
young generation far less often; the first model request that goes out gives it its thresholds back and
freezes what start-up made; a server's commands never hold it."""

from __future__ import annotations

import asyncio
import gc
import subprocess
import sys
import textwrap

import pytest

from auger import start_gc
from auger.models.base import ModelError, ModelRequest
from auger.models.openai_chat import OpenAIChatClient
from auger.protocol.items import UserMessage
from tests.support.harness import cli_env
from tests.support.mock_openai import Fault, MockChatServer, Reply


@pytest.fixture
def collector():
    """The test process's collector as it was, whatever a test did to it."""
    thresholds, frozen = gc.get_threshold(), gc.get_freeze_count()
    yield thresholds
    start_gc.release()
    if gc.get_freeze_count() != frozen:
        gc.unfreeze()
    gc.set_threshold(*thresholds)


def _one_request(server: MockChatServer) -> list:
    client = OpenAIChatClient(provider="openai-compatible", model="m", base_url=server.base_url, api_key="sk-test")

    async def main() -> list:
        try:
            return [event async for event in client.stream(ModelRequest("s", [UserMessage("hi")]))]
        finally:
            await client.aclose()

    return asyncio.run(main())


def test_hold_raises_the_young_threshold_and_release_restores_it_and_freezes(collector):
    start_gc.hold()
    assert start_gc.held() and gc.get_threshold() == start_gc.HELD
    start_gc.hold()  # a second hold keeps the first one's saved thresholds
    start_gc.release()
    assert not start_gc.held() and gc.get_threshold() == collector
    assert gc.get_freeze_count() > 0  # what existed at release is out of later collections' way
    frozen = gc.get_freeze_count()
    start_gc.release()  # idempotent: nothing frozen again
    assert gc.get_freeze_count() == frozen and gc.get_threshold() == collector
    assert gc.isenabled()  # held back, never turned off


def test_a_process_running_sessions_collects_its_young_generation_less_often(collector, tmp_path):
    from auger.config import load_config
    from auger.engine.session.sessions import SessionManager
    from auger.engine.workspace import Workspace
    from auger.store.sqlite import SqliteStore

    gc.set_threshold(700, 10, 10)  # CPython's default
    SessionManager(Workspace.open(tmp_path, load_config([], {})), SqliteStore(tmp_path / "s.db"))
    assert gc.get_threshold() == (start_gc.YOUNG, 10, 10)
    gc.set_threshold(700, 10, 10)
    start_gc.hold()
    start_gc.running_sessions()
    assert gc.get_threshold() == start_gc.HELD  # still held: the first request gives it YOUNG
    start_gc.release()
    assert gc.get_threshold() == (start_gc.YOUNG, 10, 10)
    gc.set_threshold(5000, 20, 30)  # a host that chose its own
    start_gc.running_sessions()
    assert gc.get_threshold() == (5000, 20, 30)


def test_the_first_request_that_goes_out_releases_it(collector):
    with MockChatServer([Fault.status(503), Reply(text="ok")]) as server:
        start_gc.hold()
        with pytest.raises(ModelError):
            _one_request(server)  # refused: the request went out, so start-up is over all the same
        assert not start_gc.held() and gc.get_threshold() == collector
        start_gc.hold()
        events = _one_request(server)
    assert not start_gc.held() and gc.get_threshold() == collector
    assert any(getattr(event, "text", None) == "ok" for event in events)


@pytest.mark.parametrize("argv, holds", [(["exec", "--help"], True), (["serve", "--help"], False),
                                         (["sessions", "--help"], False)])
def test_only_the_commands_that_run_one_session_hold_it(argv, holds):
    program = textwrap.dedent(f"""
        import gc, sys
        from auger import start_gc
        from auger.frontends.cli import main
        try:
            main({argv!r})
        except SystemExit:
            pass
        print(start_gc.held(), gc.get_threshold()[0])
    """)
    run = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
    held, threshold = run.stdout.split()[-2:]
    assert held == str(holds), run.stderr
    assert (int(threshold) == start_gc.HELD[0]) == holds


def test_a_server_freezes_what_it_made_before_serving(tmp_path):
    """`auger serve` holds nothing back (see start_gc), but what exists when it starts serving lives as long
    as it does: frozen, no full collection walks it again, so the pauses every event stream waits out are
    shorter. Watched from a thread of the server's own process."""
    program = textwrap.dedent("""
        import gc, os, signal, sys, threading, time
        from auger.frontends.cli import main

        def watch():
            for _ in range(600):
                if gc.get_freeze_count():
                    print("frozen", gc.get_freeze_count(), gc.get_threshold()[0], flush=True)
                    break
                time.sleep(0.05)
            os.kill(os.getpid(), signal.SIGTERM)

        threading.Thread(target=watch, daemon=True).start()
        main(["serve", "--port", "0", "-c", "sandbox=off"])
    """)
    run = subprocess.run([sys.executable, "-c", program], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                         env=cli_env(tmp_path / "home", {"AUGER_SERVER_TOKEN": "t" * 32}))
    frozen = [line.split() for line in run.stdout.splitlines() if line.startswith("frozen")]
    assert frozen, run.stdout + run.stderr
    assert int(frozen[0][1]) > 10_000  # the server's modules and app, not a handful
    assert int(frozen[0][2]) != start_gc.HELD[0]  # nothing held back in a server
