"""Goal runs from every front end of the public API: `auger.run_sync(until=…)`, a `user_turn` op with `until`
posted to `auger serve` (its checks and its end on the SSE stream), and `auger.connect(…).run(until=…)` — the
same run, the same events, wherever it was started."""

from __future__ import annotations

import asyncio

import auger
from tests.support.mock_openai import Reply, ToolCall
from tests.support.serve import TOKEN, served

TIMEOUT = 90
CHECK = "python3 -B check_calc.py"
TEST = "from calc import add\nassert add(2, 3) == 5, f'add(2, 3) is {add(2, 3)}, not 5'\nprint('ok')\n"


def _write(body: str) -> Reply:
    return Reply(tool_calls=[ToolCall("write_file", {"path": "calc.py", "content": f"def add(a, b):\n    {body}\n"})])


def _two_turns(server) -> None:
    """A goal that fails after the first turn and passes after the second."""
    server.add(_write("return 0"), Reply(text="Written."), _write("return a + b"), Reply(text="Now it adds."))


def test_run_sync_takes_a_goal_and_runs_until_it_passes(project, server):
    (project / "check_calc.py").write_text(TEST)
    _two_turns(server)
    result = auger.run_sync("make add work", cwd=project, base_url=server.base_url, model="m", mode="auto",
                            until=CHECK, max_turns=3,
                            config={"model_retry_base_delay": 0.01, "generate_titles": False})
    assert result.goal is not None and (result.goal.reason, result.goal.attempts) == ("passed", 2)
    assert result.text == "Now it adds." and len(server.chat_requests) == 4


def test_a_goal_run_over_http_streams_its_checks_and_the_remote_client_runs_one(project, server, tmp_path):
    (project / "check_calc.py").write_text(TEST)
    _two_turns(server)
    server.add(_write("return 1"), Reply(text="Tried once."))

    async def main():
        async with served(project, server, tmp_path / "s.db", mode="auto") as srv:
            created = await srv.client.post("/api/sessions", json={"cwd": str(project)})
            sid = created.json()["id"]
            seen: list[dict] = []
            async with srv.events(sid) as stream:
                posted = await srv.client.post(f"/api/sessions/{sid}/ops", json={"submission_id": "goal-1", "op": {
                    "type": "user_turn", "text": "make add work", "until": CHECK, "max_turns": 3}})
                assert posted.status_code == 202, posted.text
                async for event in stream:
                    if "id" in event:
                        seen.append(event["data"])
                        if event["data"]["type"] == "goal_ended":
                            break
            async with auger.connect(srv.url, token=TOKEN) as client:
                remote = await client.run("make add work again", cwd=str(project), until=CHECK, max_turns=1)
            return seen, remote

    seen, remote = asyncio.run(asyncio.wait_for(main(), TIMEOUT))
    checks = [(e["attempt"], e["passed"], e["exit_code"]) for e in seen if e["type"] == "goal_checked"]
    assert checks == [(1, False, 1), (2, True, 0)]
    assert [e["type"] for e in seen].count("turn_started") == 2
    ended = [e for e in seen if e["type"] == "goal_ended"]
    assert [(e["reason"], e["attempts"]) for e in ended] == [("passed", 2)]
    assert all(e["submission_id"] == "goal-1" for e in seen if e["type"] in ("goal_checked", "goal_ended"))
    # the remote client's goal run: one turn, then max_turns ends it, and its Result says so
    assert remote.goal is not None and (remote.goal.reason, remote.goal.attempts) == ("max_turns", 1)
    assert remote.text == "Tried once." and len(server.chat_requests) == 6
