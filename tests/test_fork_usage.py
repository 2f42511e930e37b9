"""A fork carries what its history cost: shown apart from its own usage, and counted by its budgets."""

from __future__ import annotations

import asyncio
import json
import sqlite3

import pytest

from auger.protocol.events import Usage
from auger.store.sqlite import SqliteStore
from tests.support.harness import auger_cli, json_events
from tests.support.mock_openai import Reply

PRICED = '[providers.priced]\nextends = "openai-compatible"\n[providers.priced.models.m]\ninput_price = 2.0\n' \
         'output_price = 10.0\n'
CALL = {"prompt_tokens": 1000, "completion_tokens": 100}  # 1,100 tokens, $0.003 at the prices above


def test_a_fork_inherits_its_historys_usage_up_to_the_fork_point_and_its_budgets_count_it(project, server,
                                                                                         auger_home):
    (auger_home / "config.toml").write_text(PRICED)
    server.add(*[Reply(text=f"answer {n}", usage=CALL) for n in range(3)])

    def run(*args: str):
        result = auger_cli(*args, "--json", "-p", "priced", "--base-url", server.base_url, "-m", "m",
                           "-c", "session_token_budget=2000", home=auger_home, cwd=project)
        return result, json_events(result.stdout)

    one, events = run("exec", "one")
    source = events[0]["session_id"]
    two, _ = run("resume", source, "two")  # the source has used 2,200 tokens ($0.006): over the budget now
    assert one.returncode == two.returncode == 0, (one.stderr, two.stderr)

    whole, events = run("fork", source, "three")
    ended = [e for e in events if e["type"] == "turn_ended"][0]
    assert whole.returncode == 1 and ended["reason"] == "error", whole.stderr
    assert ended["message"] == "session token budget reached: 2,200 of 2,000 tokens used (2,200 of them before " \
                               "the fork)"
    assert len(server.chat_requests) == 2  # the fork never called the model
    whole_id = events[0]["session_id"]

    cut, events = run("fork", source, "--before", "2", "three")  # only the first exchange: 1,100 tokens
    assert cut.returncode == 0, cut.stderr
    (usage,) = [e for e in events if e["type"] == "token_usage"]
    assert usage["session"]["input_tokens"] == 1000 and usage["session_cost"] == pytest.approx(0.003)
    assert usage["inherited"]["input_tokens"] == 1000 and usage["inherited"]["output_tokens"] == 100
    assert usage["inherited_cost"] == pytest.approx(0.003)
    cut_id = events[0]["session_id"]

    listing = auger_cli("sessions", "--json", home=auger_home)
    rows = {row["id"]: row for row in map(json.loads, listing.stdout.splitlines())}
    costs = {name: (pytest.approx(rows[i]["cost_usd"]), pytest.approx(rows[i]["inherited_cost_usd"]))
             for name, i in (("source", source), ("whole", whole_id), ("cut", cut_id))}
    assert costs == {"source": (0.006, 0.0), "whole": (0.0, 0.006), "cut": (0.003, 0.003)}
    table = auger_cli("sessions", home=auger_home).stdout.splitlines()
    assert table[0].split()[:6] == ["ID", "UPDATED", "MODEL", "COST", "INHERITED", "TITLE"]
    shown = {line.split()[0]: line.split()[4:6] for line in table[1:]}  # COST, INHERITED
    assert shown[cut_id[:8]] == ["$0.0030", "$0.0030"] and shown[source[:8]] == ["$0.0060", "-"]


def test_a_database_from_before_inherited_usage_is_upgraded_in_place(tmp_path):
    db = tmp_path / "old.db"
    with sqlite3.connect(db) as conn:  # the usage table as schema 6 had it, with one row
        conn.execute("CREATE TABLE usage (session_id TEXT NOT NULL, turn_id TEXT NOT NULL, model TEXT NOT NULL, "
                     "input INTEGER NOT NULL, cached INTEGER NOT NULL, output INTEGER NOT NULL, "
                     "reasoning INTEGER NOT NULL, created REAL NOT NULL)")
        conn.execute("INSERT INTO usage VALUES ('s', 't', 'm', 10, 0, 1, 0, 1.0)")
        conn.execute("PRAGMA user_version = 6")

    async def main():
        store = SqliteStore(db)
        try:
            await store.record_usage("s", "t2", "m", Usage(5, 0, 2, 0))
            return await store.usage_total("s"), await store.usage_total("s", inherited=True)
        finally:
            await store.aclose()

    assert asyncio.run(main()) == (Usage(15, 0, 3, 0), Usage())
