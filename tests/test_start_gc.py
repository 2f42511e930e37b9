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
