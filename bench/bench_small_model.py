"""Small-model benchmark: tokens and cost of one scripted long session with and without `small_model`.

The same 120-step scripted session (bench/bench_context.py's: reads of large files, commands with long
output) runs twice against the mock server in a 32k window, so it compacts several times and gets a title:
once with every call on the session's model, once with `small_model` set, which takes the compaction
summaries and the title. The mock counts tokens (request bytes / 4); prices are set in the provider's model
table (USD per million tokens: a frontier-priced model and a small one, in the ratio of today's price lists).
What each call cost is read from the token_usage events (`model`, `purpose`), as `auger sessions --cost`
reads the stored usage rows. Quality is not measured here: tests/test_context_management.py runs the
held-out compaction check (instructions, corrections and the plan survive) with the small model summarising.

    python bench/bench_small_model.py
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from auger.config import load_config  # noqa: E402
from auger.engine.session.sessions import SessionManager  # noqa: E402
from auger.engine.workspace import Workspace  # noqa: E402
from auger.models.registry import client_for  # noqa: E402
from auger.protocol import events as ev  # noqa: E402
from auger.protocol.ops import Shutdown, UserTurn  # noqa: E402
from auger.store.sqlite import SqliteStore  # noqa: E402
from bench.bench_context import SUMMARY_MARK, script  # noqa: E402
from tests.support.mock_openai import MockChatServer, Reply  # noqa: E402

PRICES = {"bench": (3.0, 15.0), "bench-mini": (0.25, 2.0)}  # USD per million tokens: input, output
SUMMARY = "Summary: " + " ".join(f"module_{n} reviewed, its logs read, nothing to fix;" for n in range(10)) * 3


def run(small: str | None) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / "project"
        project.mkdir()
        os.environ["AUGER_HOME"] = str(Path(tmp) / "home")
        replies = script(project)
        steps = len(replies)

        def step(body):
            last = body["messages"][-1]
            if last["role"] == "user" and SUMMARY_MARK in str(last.get("content")):
                return Reply(text=SUMMARY)
            if body["messages"][0]["content"].startswith("You name conversations"):
                return Reply(text="Module review")
            return replies.pop(0)

        with MockChatServer([step] * (steps * 2 + 10)) as server:
            settings = ["model_context_window=32000", "provider=openai-compatible", f"base_url={server.base_url}",
                        "model=bench", "generate_titles=true", f"max_model_calls_per_turn={steps * 2}"]
            config = load_config(settings + ([f"small_model={small}"] if small else []), env={},
                                 config_file=Path("/nonexistent"))
            config.tables["providers"] = {"openai-compatible": {"models": {
                name: {"input_price": i, "output_price": o} for name, (i, o) in PRICES.items()}}}
            by: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0])

            async def main() -> float | None:
                store = SqliteStore(Path(tmp) / "s.db")
                session = await SessionManager(Workspace.open(project, config), store).create(
                    client_for(config, env={"OPENAI_API_KEY": "k"}))
                session.submit(UserTurn("Review every module and log, step by step."))
                cost: float | None = None
                ended = titled = False
                async for event in session.events():
                    if isinstance(event, ev.TokenUsage):
                        row = by[(event.model, event.purpose)]
                        row[0] += 1
                        row[1] += event.last.input_tokens
                        row[2] += event.last.output_tokens
                        cost = event.session_cost
                    ended = ended or isinstance(event, ev.TurnEnded)
                    titled = titled or isinstance(event, ev.SessionTitle)
                    if ended and titled:
                        session.submit(Shutdown())
                        ended = titled = False
                await store.aclose()
                return cost

            started = time.perf_counter()
            cost = asyncio.run(main())
    return {"by": dict(by), "cost": cost, "seconds": time.perf_counter() - started}


def _price(model: str, input_tokens: int, output_tokens: int) -> float:
    i, o = PRICES[model]
    return (input_tokens * i + output_tokens * o) / 1e6


def main() -> None:
    plain, small = run(None), run("bench-mini")
    print("One 120-step scripted session (32k window: several compactions, a title), mock-counted tokens")
    print(f"{'':<22} {'model':<11} {'purpose':<11} {'calls':>6} {'input tok':>11} {'output tok':>11} {'USD':>9}")
    for name, r in (("without small_model", plain), ("with small_model", small)):
        for (model, purpose), (calls, i, o) in sorted(r["by"].items(), key=lambda kv: (kv[0][1] != "turn", kv[0])):
            print(f"{name:<22} {model:<11} {purpose:<11} {calls:>6} {i:>11,} {o:>11,} {_price(model, i, o):>9.4f}")
        print(f"{name:<22} {'total':<11} {'':<11} {'':>6} {'':>11} {'':>11} {r['cost']:>9.4f}   "
              f"({r['seconds']:.1f}s)")
    aside = {"compaction", "title"}
    small_jobs = [sum(_price(m, i, o) for (m, p), (_, i, o) in r["by"].items() if p in aside) for r in (plain, small)]
    print(f"session cost with small_model: {small['cost'] / plain['cost']:.0%} of without "
          f"(saved {1 - small['cost'] / plain['cost']:.0%}); the small jobs (compaction, title) cost "
          f"{small_jobs[1] / small_jobs[0]:.0%} of what they cost on the session's model")


if __name__ == "__main__":
    main()
