"""Context-management benchmark: prompt tokens over a long session, and resume time of a large one.

1. The same 120-step scripted session (reads of large files, commands with long output) runs twice
   against the mock server: with auger's context management (window 32k: output caps and automatic
   compaction) and without it (a window so large nothing is capped or compacted). Prompt tokens are
   the mock's count of what it received (request bytes / 4, like the engine's estimate).
2. A small window: 24 reads of a large file in an 8k window. Compaction should come every few reads,
   not before each one (each compaction costs a full-context summary request).
3. A stored session of 10,000 items is resumed: load, rebuild the prompt view, first request ready.

    python bench/bench_context.py
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from auger.config import load_config  # noqa: E402
from auger.engine.session.sessions import SessionManager  # noqa: E402
from auger.engine.workspace import Workspace  # noqa: E402
from auger.models.registry import client_for  # noqa: E402
from auger.protocol import events as ev  # noqa: E402
from auger.protocol.items import AssistantMessage, ToolCall, ToolOutput, UserMessage  # noqa: E402
from auger.protocol.ops import Shutdown, UserTurn  # noqa: E402
from auger.store.sqlite import SqliteStore  # noqa: E402
from tests.support.mock_openai import MockChatServer, Reply, ToolCall as MockCall  # noqa: E402

STEPS = 120
READS = 24
SUMMARY_MARK = "The conversation is about to be compacted"


def script(project: Path) -> list:
    for n in range(10):
        (project / f"module_{n}.py").write_text("".join(f"def f_{n}_{i}(x):\n    return x * {i}  # {'-' * 40}\n"
                                                        for i in range(400)))
    replies = []
    for step in range(STEPS):
        if step % 3 == 0:
            call = MockCall("read_file", {"path": f"module_{step % 10}.py", "offset": 1 + step})
        elif step % 3 == 1:
            call = MockCall("shell", {"command": f"seq 1 {2000 + step} | sed 's/$/ log line of step {step}/'"})
        else:
            call = MockCall("grep", {"pattern": f"f_{step % 10}_1", "path": "."})
        replies.append(Reply(tool_calls=[call]))
    replies.append(Reply(text="done"))
    return replies


def reads_script(project: Path) -> list:
    """READS reads of one large file (about 180 KB), each from another offset."""
    (project / "big.py").write_text("".join(f"value_{i} = {i}  # {'=' * 50}\n" for i in range(3000)))
    return [Reply(tool_calls=[MockCall("read_file", {"path": "big.py", "offset": 1 + n})]) for n in range(READS)] + [
        Reply(text="done")]


def run_session(window: int, build=script) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / "project"
        project.mkdir()
        os.environ["AUGER_HOME"] = str(Path(tmp) / "home")
        replies = build(project)
        steps = len(replies)

        def step(body):
            last = body["messages"][-1]
            if last["role"] == "user" and SUMMARY_MARK in str(last.get("content")):
                return Reply(text="Summary: reading modules and logs step by step; keep going.")
            return replies.pop(0)

        with MockChatServer([step] * (steps * 2)) as server:
            config = load_config([f"model_context_window={window}", "provider=openai-compatible",
                                  f"base_url={server.base_url}", "model=bench", "generate_titles=false",
                                  f"max_model_calls_per_turn={steps * 2}"], env={}, config_file=Path("/nonexistent"))

            async def main():
                store = SqliteStore(Path(tmp) / "s.db")
                session = await SessionManager(Workspace.open(project, config), store).create(
                    client_for(config, env={"OPENAI_API_KEY": "k"}))
                session.submit(UserTurn("Review every module and log, step by step."))
                compactions = calls = 0
                async for event in session.events():
                    if isinstance(event, ev.ContextCompacted):
                        compactions += 1
                    elif isinstance(event, ev.ToolCallEnded):
                        calls += 1
                    elif isinstance(event, ev.TurnEnded):
                        session.submit(Shutdown())
                await store.aclose()
                return compactions, calls

            started = time.perf_counter()
            compactions, calls = asyncio.run(main())
            elapsed = time.perf_counter() - started
            sizes = [len(r.raw) // 4 for r in server.chat_requests]
    return {"requests": len(sizes), "total": sum(sizes), "largest": max(sizes), "compactions": compactions,
            "seconds": elapsed, "calls": calls, "scripted": steps - 1, "left": len(replies)}


def resume_benchmark(items: int = 10_000) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "big.db"
        project = Path(tmp) / "project"
        project.mkdir()
        os.environ["AUGER_HOME"] = str(Path(tmp) / "home")
        store = SqliteStore(db)
        asyncio.run(store.list_sessions())  # creates the schema
        asyncio.run(store.aclose())
        session_id = str(uuid.uuid4())
        conn = sqlite3.connect(db)
        now = time.time()
        conn.execute("INSERT INTO sessions VALUES (?,?,?,?,?,?,?,?)",
                     (session_id, now, now, str(project), "openai-compatible", "bench", "auto", "big"))
        rows, outputs, seq = [], [], 0
        while seq < items:
            n = seq
            for item in (UserMessage(f"request {n}"), AssistantMessage(f"answer {n} " + "z" * 200),
                         ToolCall(f"c{n}", "shell", json.dumps({"command": f"echo {n}"})),
                         ToolOutput(f"c{n}", f"Exit code: 0 | stdout: 1 lines | stderr: 0 lines\n{n}")):
                seq += 1
                rows.append((session_id, seq, "t", item.TYPE, json.dumps(item.to_json()), now))
                if isinstance(item, ToolOutput):
                    outputs.append((session_id, item.call_id, seq, "shell", "{}", item.output))
        conn.executemany("INSERT INTO items VALUES (?,?,?,?,?,?)", rows)
        conn.executemany("INSERT INTO tool_outputs VALUES (?,?,?,?,?,?)", outputs)
        conn.commit()
        conn.close()
        config = load_config(["provider=openai-compatible", "base_url=http://127.0.0.1:9/v1", "model=bench",
                              "model_context_window=100000000"], env={}, config_file=Path("/nonexistent"))

        async def main():
            store = SqliteStore(db)
            started = time.perf_counter()
            session = await SessionManager(Workspace.open(project, config), store).resume(
                session_id, client=client_for(config, env={"OPENAI_API_KEY": "k"}))
            loaded = time.perf_counter()
            prompt = session.history.for_prompt(session.limits.output_cap_chars)
            built = time.perf_counter()
            session.submit(Shutdown())
            await session.wait_closed()
            await store.aclose()
            return loaded - started, built - loaded, len(prompt)

        load_s, build_s, prompt_items = asyncio.run(main())
    return {"items": seq, "load": load_s, "build": build_s, "prompt_items": prompt_items}


def main() -> None:
    managed = run_session(32_000)
    unmanaged = run_session(100_000_000)
    print(f"Prompt tokens over a {STEPS}-step scripted session (mock-counted, bytes/4)")
    print(f"{'':<34} {'requests':>9} {'total tokens':>13} {'largest':>9} {'compactions':>12} {'wall s':>7}")
    for name, r in (("with context management (32k)", managed), ("without (no caps, no compaction)", unmanaged)):
        print(f"{name:<34} {r['requests']:>9} {r['total']:>13,} {r['largest']:>9,} {r['compactions']:>12} "
              f"{r['seconds']:>7.2f}")
    print(f"saved: {1 - managed['total'] / unmanaged['total']:.0%} of prompt tokens; largest request "
          f"{managed['largest'] / unmanaged['largest']:.0%} of unmanaged")
    print()
    small = run_session(8_000, reads_script)
    print(f"{READS} reads of a large file in an 8k window")
    print(f"{'':<34} {'requests':>9} {'total tokens':>13} {'largest':>9} {'compactions':>12} {'calls run':>10}")
    print(f"{'with context management (8k)':<34} {small['requests']:>9} {small['total']:>13,} {small['largest']:>9,} "
          f"{small['compactions']:>12} {small['calls']:>6}/{small['scripted']}")
    print()
    r = resume_benchmark()
    print(f"Resume of a stored session of {r['items']:,} items")
    print(f"{'load + prepare (s)':<24} {'build prompt view (s)':<24} {'prompt items':>12}")
    print(f"{r['load']:<24.3f} {r['build']:<24.3f} {r['prompt_items']:>12,}")


if __name__ == "__main__":
    main()
