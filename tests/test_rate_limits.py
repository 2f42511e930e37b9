"""Rate limits from the providers' response headers: read into `rate_limits` events (a 429's too), kept on
the session for a snapshot, and on a 429 the retry waits for the used-up limit to refill (within the
policy's max delay) instead of spending its attempts on short backoffs."""

from __future__ import annotations

import time

from auger.models.rate_limits import read_rate_limits
from auger.protocol import events as ev
from tests.support.harness import Run, drive, make_config, open_session
from tests.support.mock_anthropic import Fault as AnthropicFault
from tests.support.mock_anthropic import MockAnthropicServer
from tests.support.mock_anthropic import Reply as AnthropicReply
from tests.support.mock_openai import Fault, Reply

LIMITED = {"x-ratelimit-limit-requests": "100", "x-ratelimit-remaining-requests": "0",
           "x-ratelimit-reset-requests": "0.8s", "x-ratelimit-limit-tokens": "40000",
           "x-ratelimit-remaining-tokens": "39000", "x-ratelimit-reset-tokens": "6m0s"}
ROOMY = {"x-ratelimit-limit-requests": "100", "x-ratelimit-remaining-requests": "98",
         "x-ratelimit-reset-requests": "1s", "x-ratelimit-limit-tokens": "40000",
         "x-ratelimit-remaining-tokens": "38500", "x-ratelimit-reset-tokens": "20ms"}


def run_keeping_session(project, server, *overrides: str) -> tuple[Run, ev.RateLimits | None]:
    import asyncio

    async def main():
        session, store = await open_session(project, server, project.parent / "s.db", *overrides)
        try:
            run = await asyncio.wait_for(drive(session, "hi"), 60)
        finally:
            await store.aclose()
        return run, session.rate_limits

    return asyncio.run(main())


def test_a_429_naming_its_reset_is_waited_for_and_its_limits_are_reported(project, server):
    server.stream_headers = ROOMY
    server.add(Fault.status(429, headers=LIMITED), Reply(text="after the reset"))
    started = time.monotonic()
    run, kept = run_keeping_session(project, server, "model_retry_max_delay=5")
    assert time.monotonic() - started >= 0.75  # the reset, not the 0.01 s backoff of the test config
    (retry,) = run.of(ev.Retrying)
    assert retry.delay_s == 0.8 and "429" in retry.reason and "rate limit to reset in 0.8s" in retry.reason
    hit, after = run.of(ev.RateLimits)
    assert hit.status == 429 and hit.headers == LIMITED
    requests = {w.name: w for w in hit.windows}["requests"]
    assert (requests.limit, requests.remaining, requests.reset_s) == (100, 0, 0.8)
    assert {w.name: w.reset_s for w in hit.windows}["tokens"] == 360.0
    assert after.status == 200 and {w.name: w.remaining for w in after.windows} == {"requests": 98, "tokens": 38500}
    assert kept == after  # what a server's snapshot of the session reads
    assert run.ended.reason == "complete"


def test_the_wait_for_a_reset_stays_within_the_policys_max_delay(project, server):
    long = {**LIMITED, "x-ratelimit-reset-requests": "30s"}
    server.add(Fault.status(429, headers=long), Reply(text="ok"))
    run, _ = run_keeping_session(project, server, "model_retry_max_delay=0.3")
    assert run.of(ev.Retrying)[0].delay_s == 0.3


def test_retry_after_still_wins_over_a_reset(project, server):
    server.add(Fault.status(429, retry_after="0.2", headers={**LIMITED, "x-ratelimit-reset-requests": "9s"}),
               Reply(text="ok"))
    run, _ = run_keeping_session(project, server, "model_retry_max_delay=5")
    assert run.of(ev.Retrying)[0].delay_s == 0.2


def test_a_response_without_rate_limit_headers_reports_none(project, server):
    server.add(Reply(text="plain"))
    run, kept = run_keeping_session(project, server)
    assert not run.of(ev.RateLimits) and kept is None


def test_anthropic_headers_and_reset_times():
    now = 1_700_000_000.0
    reset = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now + 30))
    snapshot = read_rate_limits({"Anthropic-RateLimit-Requests-Limit": "50",
                                 "anthropic-ratelimit-requests-remaining": "0",
                                 "anthropic-ratelimit-requests-reset": reset,
                                 "anthropic-ratelimit-input-tokens-remaining": "not a number",
                                 "retry-after": "30", "content-type": "text/plain"}, 429, now=now)
    assert snapshot is not None
    windows = {w.name: w for w in snapshot.windows}
    assert (windows["requests"].limit, windows["requests"].remaining, windows["requests"].reset_s) == (50, 0, 30.0)
    assert windows["input_tokens"].remaining is None
    assert snapshot.reset_after() == 30.0 and "retry-after" not in snapshot.headers
    assert read_rate_limits({"content-type": "text/event-stream"}) is None


def test_anthropic_429_reset_is_waited_for(project):
    import asyncio

    from auger.models.anthropic import AnthropicClient
    from auger.engine.session.sessions import SessionManager
    from auger.engine.workspace import Workspace
    from auger.store.sqlite import SqliteStore

    reset = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 2))
    headers = {"anthropic-ratelimit-requests-limit": "50", "anthropic-ratelimit-requests-remaining": "0",
               "anthropic-ratelimit-requests-reset": reset}
    with MockAnthropicServer([AnthropicFault.status(429, headers=headers), AnthropicReply(text="later")],
                             api_key="k") as mock:
        config = make_config("model_retry_max_delay=5")

        async def main() -> Run:
            client = AnthropicClient(provider="anthropic", model="claude-test", base_url=mock.base_url, api_key="k",
                                     key_env="ANTHROPIC_API_KEY", idle_timeout=30)
            store = SqliteStore(project.parent / "a.db")
            try:
                session = await SessionManager(Workspace.open(project, config), store).create(client)
                return await asyncio.wait_for(drive(session, "hi"), 60)
            finally:
                await store.aclose()

        run = asyncio.run(main())
    (retry,) = run.of(ev.Retrying)
    assert 0.0 < retry.delay_s <= 2.0 and "rate limit to reset" in retry.reason  # the reset time, to the second
    assert run.of(ev.RateLimits)[0].headers["anthropic-ratelimit-requests-reset"] == reset
    assert run.ended.reason == "complete"
