"""The terminal UI as a client of a real `auger serve` process: `auger attach` offers the server's sessions
(those running a turn first), shows the picked one's transcript again and answers its waiting approval with
one key; leaving it (Ctrl-D, /detach) leaves it running in the server; a prompt sent from another client
is shown with the reply it gets."""

from __future__ import annotations

import time

import httpx

from tests.support.mock_openai import Reply, ToolCall
from tests.support.serve import TOKEN, start_process, stop_process
from tests.tui.terminal import Terminal

HEADERS = {"authorization": f"Bearer {TOKEN}", "x-auger-client": "script"}


def _until(predicate, what: str, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while not (found := predicate()):
        assert time.monotonic() < deadline, f"{what} not seen within {timeout}s"
        time.sleep(0.05)
    return found


def test_attach_offers_running_sessions_first_and_leaving_leaves_them_running(project, server, auger_home, tmp_path):
    server.add(Reply(text="an idle answer"), Reply(tool_calls=[ToolCall("shell", {"command": "touch attached"})]),
               Reply(text="finished after the answer"), Reply(text="answered the script"))
    proc, url, _ = start_process(project, auger_home, server, tmp_path / "s.db", "--mode", "safe")
    api = httpx.Client(base_url=url, headers=HEADERS, timeout=30)
    terms: list[Terminal] = []
    try:
        idle = api.post("/api/sessions", json={"cwd": str(project)}).json()["id"]
        api.post(f"/api/sessions/{idle}/ops", json={"submission_id": "i1", "op": {"type": "user_turn", "text": "idle one"}})
        _until(lambda: api.get(f"/api/sessions/{idle}").json()["state"]["running_turn"] is None
               and api.get(f"/api/sessions/{idle}").json()["state"]["last_seq"] > 3, "the idle session's turn")
        busy = api.post("/api/sessions", json={"cwd": str(project)}).json()["id"]
        api.post(f"/api/sessions/{busy}/ops", json={"submission_id": "b1", "op": {"type": "user_turn", "text": "make it"}})
        _until(lambda: api.get(f"/api/sessions/{busy}").json()["state"]["pending_approvals"], "the approval")

        t = Terminal(project, auger_home, ["attach", "--connect", url], env={"AUGER_SERVER_TOKEN": TOKEN})
        terms.append(t)
        # the question is drawn at once, the printed rows up to 0.2 s later (prompt_toolkit's stdout proxy)
        shown = t.wait_until(lambda s: "resume which session?" in s and busy[:8] in s and idle[:8] in s,
                             "the question and both sessions")
        rows = [line for line in shown.splitlines() if line.strip()[:2] in ("1.", "2.")]
        assert busy[:8] in rows[0] and "(running)" in rows[0] and idle[:8] in rows[1], shown
        assert f"sessions in {url} (running first)" in shown
        t.submit("1")
        t.wait_until(lambda s: "› make it" in s and "$ touch attached" in s and "[y] yes, once" in s,
                     "the transcript so far, and the approval still waiting")
        t.send("y")
        t.wait_for("finished after the answer")
        assert (project / "attached").exists()
        t.idle()
        t.send("C-d")
        after = t.wait_for("AUGER-EXITED:0", whole=True)
        assert f"auger: detached; session {busy[:8]} goes on in {url}" in after
        snap = api.get(f"/api/sessions/{busy}").json()
        assert snap["state"]["open"] is True  # left running in the server
        resolved = [e for e in (api.get(f"/api/sessions/{busy}/items").json()["items"])
                    if e["item"]["type"] == "tool_output"]
        assert resolved, "the approved command ran"

        t2 = Terminal(project, auger_home, ["attach", idle[:8], "--connect", url], env={"AUGER_SERVER_TOKEN": TOKEN})
        terms.append(t2)
        t2.wait_for("an idle answer")
        t2.wait_for("› idle one")
        api.post(f"/api/sessions/{idle}/ops", json={"submission_id": "i2",
                                                    "op": {"type": "user_turn", "text": "from a script"}})
        t2.wait_for("› from a script")  # another client's prompt, shown with its reply
        t2.wait_for("answered the script")
        t2.idle()
        t2.submit("/detach")
        t2.wait_for("AUGER-EXITED:0", whole=True)
        assert api.get(f"/api/sessions/{idle}").json()["state"]["open"] is True
    finally:
        for t in terms:
            t.close()
        api.close()
        stop_process(proc)
