"""The SSE response on its own, driven as an ASGI app: keep-alive pings while idle, a client that does not
drain its stream has it closed with a `closing` event (so it resumes by cursor), and a server closing
says so last."""

from __future__ import annotations

import asyncio

from auger.frontends.server.sse import SseResponse, frame


async def drive(response: SseResponse, *, hold: asyncio.Event | None = None, stop_after: float = 2.0) -> list[bytes]:
    """Run the response; `send` blocks until `hold` is set (a client that does not read)."""
    sent: list[bytes] = []
    disconnect = asyncio.Event()

    async def receive():
        await disconnect.wait()
        return {"type": "http.disconnect"}

    async def send(message):
        if message["type"] == "http.response.body":
            if hold is not None and len(sent) >= 2:
                await hold.wait()
            sent.append(message.get("body", b""))

    task = asyncio.create_task(response({"type": "http"}, receive, send))
    done, _ = await asyncio.wait({task}, timeout=stop_after)
    if not done:
        disconnect.set()
        await task
    return sent


async def counting_frames(count: int, pause: float):
    """Frames 1 to `count`, `pause` seconds apart; then the source stays open with nothing more."""
    for n in range(1, count + 1):
        yield frame({"n": n}, seq=n)
        await asyncio.sleep(pause)
    await asyncio.sleep(10)


def test_an_idle_stream_gets_pings_and_a_closing_server_says_so_last():
    async def main():
        closing = asyncio.Event()

        async def frames():
            yield frame({"n": 1}, seq=1)
            await asyncio.sleep(0.6)
            closing.set()
            await asyncio.sleep(10)
            yield frame({"n": 2}, seq=2)

        return await drive(SseResponse(frames(), closing, ping_s=0.1))

    sent = asyncio.run(main())
    assert sent[0] == b"retry: 1000\n\n" and sent[1] == b'id: 1\ndata: {"n": 1}\n\n'
    assert sent.count(b": ping\n\n") >= 2
    assert sent[-2] == b'event: closing\ndata: {"reason": "the server is shutting down"}\n\n' and sent[-1] == b""


def test_a_client_that_does_not_drain_its_stream_has_it_closed_to_resume_by_cursor():
    async def main():
        hold = asyncio.Event()
        response = SseResponse(counting_frames(49, 0), asyncio.Event(), ping_s=5, buffer=8)
        asyncio.get_running_loop().call_later(0.3, hold.set)  # the client reads again, too late
        return await drive(response, hold=hold)

    sent = asyncio.run(main())
    numbered = [f for f in b"".join(sent[:-2]).split(b"\n\n") if f.startswith(b"id: ")]  # a write may hold several
    assert numbered[0].startswith(b"id: 1\n") and len(numbered) < 49
    ids = [int(f.split(b"\n")[0][4:]) for f in numbered]
    assert ids == list(range(1, len(ids) + 1))  # what it got is contiguous: it resumes after the last id
    assert sent[-2].startswith(b"event: closing\n") and b"lagging" in sent[-2]


def test_a_source_that_fails_ends_the_stream_saying_why():
    async def main():
        async def frames():
            yield frame({"n": 1}, seq=1)
            raise OSError("disk I/O error")

        return await drive(SseResponse(frames(), asyncio.Event(), ping_s=5))

    sent = asyncio.run(main())
    assert sent[1].startswith(b"id: 1\n")
    assert sent[-2].startswith(b"event: closing\n") and b"disk I/O error" in sent[-2] and sent[-1] == b""


def test_frames_ready_together_go_out_in_one_write():
    async def main():
        async def frames():
            for n in range(1, 6):  # a committed batch: all of it there at once
                yield frame({"n": n}, seq=n)
            await asyncio.sleep(10)

        return await drive(SseResponse(frames(), asyncio.Event(), ping_s=5), stop_after=0.3)

    sent = asyncio.run(main())
    assert sent[1] == b"".join(frame({"n": n}, seq=n) for n in range(1, 6))


def test_a_frame_goes_out_in_the_turn_of_the_loop_its_source_made_it():
    """On a busy server each turn of the event loop between a commit and the client's socket costs
    milliseconds: a frame made while the writer has nothing to do is written by the reader at once, not
    handed to the writer for its next turn."""
    async def main():
        loop = asyncio.get_running_loop()
        turns = 0

        def tick():
            nonlocal turns
            turns += 1
            loop.call_soon(tick)

        tick()
        made: dict[bytes, int] = {}
        written: dict[bytes, int] = {}

        async def frames():
            for n in range(1, 4):
                await asyncio.sleep(0.05)  # the writer is idle by then
                made[b"id: %d\n" % n] = turns
                yield frame({"n": n}, seq=n)
            await asyncio.sleep(10)

        async def receive():
            await asyncio.sleep(10)
            return {"type": "http.disconnect"}

        async def send(message):
            for head in made:
                if head in message.get("body", b""):
                    written[head] = turns

        task = asyncio.create_task(SseResponse(frames(), asyncio.Event(), ping_s=5)({"type": "http"}, receive, send))
        await asyncio.sleep(0.4)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return made, written

    made, written = asyncio.run(main())
    assert len(made) == 3 and written == made


def test_a_write_the_client_is_slow_to_take_is_finished_and_nothing_is_lost_or_reordered():
    async def main():
        hold = asyncio.Event()
        asyncio.get_running_loop().call_later(0.05, hold.set)  # the client reads again, in time
        response = SseResponse(counting_frames(49, 0.002), asyncio.Event(), ping_s=5)
        return await drive(response, hold=hold, stop_after=0.5)

    sent = asyncio.run(main())
    numbered = [f for f in b"".join(sent).split(b"\n\n") if f.startswith(b"id: ")]
    assert [int(f.split(b"\n")[0][4:]) for f in numbered] == list(range(1, 50))
    assert sent[-2].startswith(b"id: ") and sent[-1] == b""  # a client gone away: no closing event is owed


def test_any_async_iterator_and_any_awaitable_send_will_do():
    """The source need not be an async generator, nor `send` a coroutine (the reader steps both when it can)."""
    class Frames:
        def __init__(self):
            self.n = 0

        def __aiter__(self):
            return self

        def __anext__(self):
            self.n += 1
            made = asyncio.get_running_loop().create_future()
            if self.n <= 3:
                asyncio.get_running_loop().call_later(0.01, made.set_result, frame({"n": self.n}, seq=self.n))
            return made  # a future: no send, no throw

    async def main():
        sent: list[bytes] = []

        async def receive():
            await asyncio.sleep(10)
            return {"type": "http.disconnect"}

        def send(message):
            sent.append(message.get("body", b""))
            done = asyncio.get_running_loop().create_future()
            done.set_result(None)
            return done

        task = asyncio.create_task(SseResponse(Frames(), asyncio.Event(), ping_s=5)({"type": "http"}, receive, send))
        await asyncio.sleep(0.2)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return sent

    sent = asyncio.run(main())
    numbered = [f for f in b"".join(sent).split(b"\n\n") if f.startswith(b"id: ")]
    assert [int(f.split(b"\n")[0][4:]) for f in numbered] == [1, 2, 3]
