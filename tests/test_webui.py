"""The web UI in a real browser (headless Chromium) against the real `auger serve` process and the mock model:
pairing, a session started from the landing page, a streamed reply, an approval answered from its card and
the command run, the turn's diff undone, a connection cut mid-turn that loses and repeats nothing, hostile
model text drawn as text, a phone's screen, older pages on scroll, an edited message sent in a fork, a
regenerated answer, a sub-agent under its spawn call (its reply redrawn as it streams), pending changes, mode
and model switches, a goal run's checks and a fallback's switch in the transcript."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from tests.support import browser as chromium_support
from tests.support.browser import open_page
from tests.support.mock_openai import Fault, MockChatServer, Reply, ToolCall
from tests.support.serve import TOKEN, long_session, pairing_link, start_process, stop_process

HEADERS = {"authorization": f"Bearer {TOKEN}"}
AGENT = '[data-role="agent-message"]'


@pytest.fixture(scope="module")
def browser():
    with chromium_support.for_tests() as launched:
        yield launched


class Served:
    def __init__(self, url: str, pair: str, proc) -> None:
        self.url, self.pair, self.proc = url, pair, proc
        self.api = httpx.Client(base_url=url, headers=HEADERS, timeout=30)

    def session(self, sid: str) -> dict:
        return self.api.get(f"/api/sessions/{sid}").json()

    def wait_idle(self, sid: str) -> dict:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            snap = self.session(sid)
            if snap["state"]["running_turn"] is None:
                return snap
            time.sleep(0.1)
        raise AssertionError(f"session {sid} still runs a turn")

    def new_pairing(self) -> str:
        return self.api.post("/api/pair").json()["url"]


@pytest.fixture
def serve(project, server, isolated_home, tmp_path):
    started = []

    def start(*extra: str, db: Path | None = None) -> Served:
        proc, url, printed = start_process(project, isolated_home, server, db or tmp_path / "s.db", *extra)
        served = Served(url, pairing_link(printed), proc)
        started.append(served)
        return served

    yield start
    for served in started:
        served.api.close()
        code, stderr = stop_process(served.proc)
        assert code == 0, stderr


def session_id(page, other_than: str = "") -> str:
    """The id of the session the page shows (once its hash names one, and not `other_than`)."""
    page.wait_for_url(lambda url: "#/s/" in url and not (other_than and other_than in url))
    return page.evaluate("decodeURIComponent(location.hash.split('/')[2])")


def send(page, text: str) -> None:
    page.fill('[data-role="prompt"]', text)
    page.click('[data-role="send"]')


def agent_texts(page) -> list[str]:
    return [t.strip() for t in page.locator(f"{AGENT} .md").all_inner_texts()]


def test_a_paired_browser_starts_a_session_sees_the_reply_stream_approves_a_command_and_undoes_it(
        browser, serve, server, project):
    server.add(Reply(text="I will write **made.txt**.",
                     tool_calls=[ToolCall("shell", {"command": "echo made > made.txt"})]),
               Reply(text="The file is written."))
    served = serve()
    errors: list[str] = []
    page, landed = open_page(browser, served.pair, errors)

    assert landed.url == served.url + "/" and landed.status == 200
    policy = landed.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "unsafe" not in policy
    page.locator('[data-role="prompt"]').wait_for(state="visible")  # the landing page asks for a first prompt at once
    send(page, "make a file")
    sid = session_id(page)
    page.locator(f"{AGENT} strong", has_text="made.txt").wait_for()  # Markdown, drawn as it streamed
    assert page.locator(AGENT).count() == 1

    page.locator('[data-option="approve"]').wait_for()
    request = served.session(sid)["state"]["pending_approvals"][0]
    offered = page.locator("[data-option]").evaluate_all("buttons => buttons.map(b => b.dataset.option)")
    assert offered == request["options"] and "deny" in offered
    snap = served.session(sid)
    assert snap["cwd"] == str(project.resolve()) and snap["state"]["mode"] == "safe"  # the first root, its mode
    page.click('[data-option="approve"]')
    page.locator(AGENT, has_text="The file is written.").wait_for()
    assert (project / "made.txt").read_text() == "made\n"
    assert "done" in page.locator(".tool .tool-status").inner_text()
    resolved = page.locator("details.approval.resolved").inner_text()
    assert "Approved" in resolved and "browser" in resolved

    page.locator(".diff-card", has_text="made.txt").wait_for()
    page.click(".diff-card button:has-text('Undo')")
    page.locator(".diff-card.undone").wait_for()
    assert not (project / "made.txt").exists()
    assert errors == []


def test_each_approval_card_shows_its_answer_when_answers_come_in_a_row(browser, serve, server, project):
    """An answer racing the session's own word on it once left the card drawn as still waiting."""
    server.add(*[Reply(tool_calls=[ToolCall("write_file", {"path": f"f{n}.txt", "content": "x\n"})]) for n in range(3)],
               Reply(text="all written"))
    served = serve()
    errors: list[str] = []
    page, _ = open_page(browser, served.pair, errors)
    send(page, "write three files")
    for _ in range(3):
        card = page.locator(".approval.waiting")
        request = card.get_attribute("data-request")
        card.locator('[data-option="approve"]').click()
        page.locator(f'details.approval.resolved[data-request="{request}"]').wait_for()
    page.locator(AGENT, has_text="all written").wait_for()
    assert page.locator("details.approval.resolved", has_text="Approved").count() == 3
    assert sorted(p.name for p in project.glob("f*.txt")) == ["f0.txt", "f1.txt", "f2.txt"]
    assert errors == []


def test_a_connection_cut_mid_turn_resumes_and_every_message_is_there_once(browser, serve, server):
    server.add(Reply(text="Before the cut.", tool_calls=[ToolCall("shell", {"command": "echo x > x.txt"})]),
               Reply(text="After the cut."))
    served = serve()
    errors: list[str] = []
    page, _ = open_page(browser, served.pair, errors)
    page.add_init_script(chromium_support.TRACK_EVENT_SOURCES)
    page.reload()
    send(page, "go")
    sid = session_id(page)
    page.locator('[data-option="approve"]').wait_for()
    page.locator(AGENT, has_text="Before the cut.").wait_for()

    page.context.set_offline(True)
    assert page.evaluate(chromium_support.CUT_EVENT_SOURCES) >= 1
    request = served.session(sid)["state"]["pending_approvals"][0]["request_id"]
    answer = served.api.post(f"/api/sessions/{sid}/ops", json={"submission_id": "cli-1", "op": {
        "type": "approval_decision", "request_id": request, "decision": "approve"}})
    assert answer.status_code == 202
    served.wait_idle(sid)
    page.wait_for_timeout(500)
    assert "After the cut." not in agent_texts(page)  # the page really was cut off

    page.context.set_offline(False)
    page.evaluate("document.dispatchEvent(new Event('visibilitychange'))")
    page.locator(AGENT, has_text="After the cut.").wait_for()
    page.evaluate("document.dispatchEvent(new Event('visibilitychange'))")  # a second reopen repeats nothing
    page.wait_for_timeout(1500)

    def shown() -> tuple[list[str], int, int, int]:
        return (agent_texts(page), page.locator(".msg.user").count(), page.locator(".tool").count(),
                page.locator(".approval").count())

    assert shown() == (["Before the cut.", "After the cut."], 1, 1, 1)
    page.reload()  # and drawn from the stored items, the same
    page.locator(AGENT, has_text="After the cut.").wait_for()
    assert shown()[:3] == (["Before the cut.", "After the cut."], 1, 1)
    assert errors == []


HOSTILE = """<img src=x onerror="window.__pwned=1"> <script>window.__pwned=2</script>

[click me](javascript:window.__pwned=3) [or me](JAVASCRIPT:window.__pwned=4) [data](data:text/html,<b>x</b>)
<a href="javascript:window.__pwned=5">raw link</a> [fine](https://example.com/ok)"""


def test_model_and_tool_text_is_drawn_as_text_never_as_html(browser, serve, server, project):
    (project / "page.html").write_text('<img src=x onerror="window.__pwned=6"><b>bold?</b>\n')
    server.add(Reply(tool_calls=[ToolCall("read_file", {"path": "page.html"})]), Reply(text=HOSTILE))
    served = serve()
    errors: list[str] = []
    page, _ = open_page(browser, served.pair, errors)
    send(page, "read it")
    page.locator(AGENT, has_text="raw link").wait_for()
    page.click(".tool summary")
    page.wait_for_timeout(300)

    transcript = page.locator(".transcript")
    assert transcript.locator("img, script, b").count() == 0
    hrefs = transcript.locator("a").evaluate_all("links => links.map(a => a.getAttribute('href'))")
    assert hrefs == ["https://example.com/ok"]
    assert '<img src=x onerror="window.__pwned=1">' in page.locator(AGENT).inner_text()
    assert '<img src=x onerror="window.__pwned=6">' in page.locator(".tool .output").inner_text()
    assert page.evaluate("window.__pwned") is None
    assert errors == []


def test_on_a_phone_nothing_scrolls_sideways_and_enter_makes_a_new_line(browser, serve, server, tmp_path):
    long_line = "x" * 300
    server.add(Reply(text=f"A long word {long_line} and code:\n\n```\n{long_line}\n```\n\nhttps://example.com/{long_line}"),
               Reply(text="second answer"))
    served = serve()
    errors: list[str] = []
    page, _ = open_page(browser, served.pair, errors, **chromium_support.PHONE)
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    page.fill('[data-role="prompt"]', "first")
    page.press('[data-role="prompt"]', "Enter")
    assert page.input_value('[data-role="prompt"]') == "first\n"  # Enter on a phone is a new line
    assert page.evaluate("location.hash") in ("", "#/")
    page.click('[data-role="send"]')
    session_id(page)
    page.locator(AGENT, has_text="A long word").wait_for()
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    shot = tmp_path / "phone.png"
    page.screenshot(path=str(shot))
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    page.click(".bar .menu")  # the session list slides in over the page
    page.locator(".sidebar.open .session").first.wait_for()
    page.click(".scrim", position={"x": 375, "y": 400})  # beside the open list (its middle is under it)
    page.locator(".sidebar.open").wait_for(state="detached")  # and out again
    assert errors == []


def test_a_long_session_draws_its_newest_page_and_one_scroll_to_the_top_loads_every_older_one(
        browser, serve, project, tmp_path):
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    from auger.store.sqlite import SqliteStore

    async def make() -> str:
        store = SqliteStore(tmp_path / "s.db")
        try:
            return await long_session(store, project, 500)  # 2,000 items: 25 pages
        finally:
            await store.aclose()

    with ThreadPoolExecutor(1) as pool:  # Playwright's loop runs in this thread
        sid = pool.submit(asyncio.run, make()).result()
    served = serve()
    errors: list[str] = []

    def opened(pairing: str, slower: int = 1, **context) -> object:
        page, _ = open_page(browser, pairing, errors, **context)
        if slower > 1:  # a busy machine: the page's CPU `slower` times slower
            page.context.new_cdp_session(page).send("Emulation.setCPUThrottlingRate", {"rate": slower})
        page.goto(f"{served.url}/#/s/{sid}")
        page.locator(AGENT, has_text="Module 499 defines").wait_for()
        assert page.locator(AGENT).count() == 20  # the newest 80 items: 20 turns
        return page

    def one_scroll_reaches_the_start(page) -> None:
        page.eval_on_selector(".scroller", "el => { el.scrollTop = 0; }")  # once: never scrolled away and back
        page.locator(".older", has_text="Start of the session").wait_for(timeout=60_000)
        assert page.locator(AGENT).count() == 500
        assert page.locator(AGENT).first.inner_text().startswith("Module 0 defines")

    page = opened(served.pair)
    # near the top, not at it: the older page comes and the reader stays on what they read
    read = page.locator(AGENT, has_text="Module 480 defines")
    seen_at = page.eval_on_selector(".scroller", """(el) => { el.scrollTop = 200;
      return [...el.querySelectorAll('[data-role="agent-message"]')][0].getBoundingClientRect().top; }""")
    page.wait_for_function(f"() => document.querySelectorAll('{AGENT}').length === 40")
    assert abs(read.bounding_box()["y"] - seen_at) < 2
    one_scroll_reaches_the_start(page)

    one_scroll_reaches_the_start(opened(served.new_pairing(), slower=4, **chromium_support.PHONE))  # a busy phone
    assert errors == []


def test_a_reader_who_scrolled_up_is_not_pulled_back_down_by_a_change_drawn_before_the_scroll_event(
        browser, serve, server):
    """A scroll's event comes a frame after the scroll: a batch of changes drawn in between used to take the
    reader back to the bottom (the page still believed them there). Made certain here by holding the page's
    scroll events back while a new reply is drawn."""
    server.add(*[Reply(text=f"Answer number {n} " + "with some words " * 40) for n in range(8)])
    served = serve()
    errors: list[str] = []
    page, _ = open_page(browser, served.pair, errors, viewport={"width": 800, "height": 500})
    page.locator('[data-role="prompt"]').wait_for(state="visible")
    for n in range(6):  # a transcript taller than the window
        send(page, f"question {n}")
        page.locator(AGENT, has_text=f"Answer number {n}").wait_for()
    sid = session_id(page)
    served.wait_idle(sid)
    page.wait_for_timeout(200)  # the last scroll to the bottom and its event are in
    page.eval_on_selector(".scroller", """(el) => {
      el.addEventListener('scroll', (e) => e.stopImmediatePropagation(), true);  // its event never reaches the page
      el.scrollTop = 0;
    }""")
    answer = served.api.post(f"/api/sessions/{sid}/ops", json={"submission_id": "api-1", "op": {
        "type": "user_turn", "text": "one more"}})
    assert answer.status_code == 202, answer.text
    page.locator(AGENT, has_text="Answer number 6").wait_for()
    page.wait_for_timeout(200)
    assert page.eval_on_selector(".scroller", "el => el.scrollTop") < 50
    assert errors == []


def test_an_edited_message_is_sent_again_in_a_fork_and_an_answer_is_regenerated(browser, serve, server):
    server.add(Reply(text="one"), Reply(text="two"), Reply(text="an answer to the edit"), Reply(text="regenerated"))
    served = serve()
    errors: list[str] = []
    page, _ = open_page(browser, served.pair, errors)
    send(page, "first")
    original = session_id(page)
    page.locator(AGENT, has_text="one").wait_for()
    send(page, "second")
    page.locator(AGENT, has_text="two").wait_for()

    page.locator(".msg.user", has_text="second").locator("button", has_text="Edit").click()
    page.fill(".msg.user textarea.edit", "second, edited")
    page.click("button:has-text('Send in a fork')")
    session_id(page, other_than=original)
    page.locator(AGENT, has_text="an answer to the edit").wait_for()
    assert agent_texts(page) == ["one", "an answer to the edit"]
    assert [t.strip() for t in page.locator(".msg.user .text").all_inner_texts()] == ["first", "second, edited"]
    assert served.session(original)["state"]["last_seq"] > 0  # the original is still there, as it was

    page.locator(AGENT, has_text="an answer to the edit").locator("button", has_text="Regenerate").click()
    page.locator(AGENT, has_text="regenerated").wait_for()
    assert page.locator(f"{AGENT}.rolled", has_text="an answer to the edit").count() == 1
    sent = server.chat_requests[-1].body["messages"]
    assert [m["content"] for m in sent if m["role"] == "assistant"] == ["one"]  # the taken-back answer is gone
    assert errors == []


def test_a_sub_agents_work_is_shown_under_its_spawn_call(browser, serve, server):
    server.add(Reply(tool_calls=[ToolCall("spawn_agent", {"prompt": "look around", "agent": "task"})]),
               Reply(text="the child looked"), Reply(text="the parent is done"))
    served = serve()
    errors: list[str] = []
    page, _ = open_page(browser, served.pair, errors)
    send(page, "delegate")
    page.locator(AGENT, has_text="the parent is done").wait_for()
    spawn = page.locator(".tool", has_text="look around")
    spawn.locator(".tool-status", has_text="done").first.wait_for()  # the call ended: the page closed it
    if not spawn.evaluate("details => details.open"):
        spawn.locator("summary").first.click()
    assert spawn.evaluate("details => details.open"), spawn.evaluate("details => details.outerHTML")
    spawn.locator(f".children {AGENT}", has_text="the child looked").wait_for()  # drawn once opened
    assert spawn.locator(f".children {AGENT}", has_text="the child looked").count() == 1
    assert page.locator(f".transcript > {AGENT}", has_text="the child looked").count() == 0
    assert errors == []


# The page's own modules, fed a spawn call whose sub-agent streams its reply, drawn after every envelope as
# the session view draws them (one Entry per entry, memoized by `v`): the page may draw at any point of the
# stream (a busy machine draws mid-reply), and what it shows at the end is the whole reply, no longer streaming.
DRAW_A_SUB_AGENT_REPLY_MID_STREAM = """async () => {
  const { Transcript } = await import("/js/transcript.js");
  const { Entry } = await import("/js/entries.js");
  const { render } = await import("/vendor/preact.mjs");
  const { html } = await import("/js/ui.js");
  const t = new Transcript();
  const box = document.createElement("div");
  document.body.append(box);
  const draw = () => render(html`${t.entries.map((entry) => html`<${Entry} key=${entry.key} entry=${entry}
    v=${entry.v} actions=${{}} flags=${{}} />`)}`, box);
  let seq = 0;
  const child = { turn_id: "t1", parent_call_id: "call_1" };
  for (const e of [
    { type: "tool_call_started", turn_id: "t1", call_id: "call_1", name: "spawn_agent",
      arguments: { prompt: "look around", agent: "task" } },
    { ...child, type: "item_started", kind: "message", item_id: "m1" },
    { ...child, type: "message_delta", item_id: "m1", delta: "the child " },
    { ...child, type: "message_delta", item_id: "m1", delta: "looked" },
    { ...child, type: "item_ended", item_id: "m1" },
    { ...child, type: "agent_message", item_id: "m1", text: "the child looked" },
  ]) {
    t.apply({ ...e, seq: ++seq });
    draw();
  }
  const shown = box.querySelector('.children [data-role="agent-message"]');
  const drawn = { text: shown.textContent, streaming: shown.dataset.streaming };
  box.remove();
  return drawn;
}"""


def test_a_sub_agents_reply_drawn_mid_stream_is_drawn_whole_once_it_ends(browser, serve):
    served = serve()
    errors: list[str] = []
    page, _ = open_page(browser, served.pair, errors)
    assert page.evaluate(DRAW_A_SUB_AGENT_REPLY_MID_STREAM) == {"text": "the child looked", "streaming": "false"}
    assert errors == []


def test_pending_changes_are_applied_from_the_page_and_mode_and_model_switch(browser, serve, server, project):
    server.add(Reply(tool_calls=[ToolCall("write_file", {"path": "queued.txt", "content": "q\n"})]),
               Reply(text="queued it"))
    served = serve("-c", "pending=true")
    errors: list[str] = []
    page, _ = open_page(browser, served.pair, errors)
    send(page, "write")
    sid = session_id(page)
    page.click('[data-option="approve"]')
    page.locator(AGENT, has_text="queued it").wait_for()
    pending = page.locator(".pending")
    pending.locator("summary").click()
    pending.locator("li", has_text="queued.txt").wait_for()
    assert not (project / "queued.txt").exists()
    pending.locator("button", has_text="Apply all").click()
    pending.wait_for(state="detached")
    assert (project / "queued.txt").read_text() == "q\n"

    page.click("button[aria-label='Session settings']")
    page.select_option(".popover select >> nth=0", "plan")
    page.locator(".notice", has_text="Mode: plan").wait_for()
    assert served.session(sid)["state"]["mode"] == "plan"
    choices = page.locator(".popover select >> nth=1").locator("option").evaluate_all("o => o.map(x => x.value)")
    assert "model:openai-compatible:mock-model" in choices
    assert not any(c.startswith("model:anthropic:") for c in choices)  # no key: not offered
    page.select_option(".popover select >> nth=1", "model:openai:gpt-5")
    page.locator(".notice", has_text="Model: gpt-5").wait_for()
    assert served.session(sid)["state"]["model"] == "gpt-5"
    assert errors == []


def test_the_settings_page_lists_providers_and_disables_one(browser, serve, isolated_home):
    served = serve()
    errors: list[str] = []
    page, _ = open_page(browser, served.pair, errors)
    page.goto(served.url + "/#/settings")
    row = page.locator(".provider", has_text="ollama")
    row.locator(".pill").wait_for()
    row.locator("button", has_text="Disable").click()
    row.locator(".pill", has_text="disabled").wait_for()
    assert "disabled = true" in (isolated_home / "config.toml").read_text()
    assert page.locator(".provider", has_text="anthropic").locator(".pill").inner_text() == "key missing"
    assert errors == []


def test_a_goal_runs_checks_and_a_fallbacks_switch_are_lines_in_the_transcript(browser, serve, server, project,
                                                                                isolated_home):
    (project / "check_calc.py").write_text("from calc import add\nassert add(2, 3) == 5\n")

    def write(body: str) -> Reply:
        return Reply(tool_calls=[ToolCall("write_file", {"path": "calc.py",
                                                         "content": f"def add(a, b):\n    {body}\n"})])

    with MockChatServer() as second:
        (isolated_home / "config.toml").write_text(
            f'[providers.second]\nwire = "openai_chat"\nbase_url = "{second.base_url}"\nkey_env = "OPENAI_API_KEY"\n')
        server.add(Fault.status(529))  # the first model is overloaded: the turn goes on with the second
        second.add(write("return 0"), Reply(text="Written."), write("return a + b"), Reply(text="Now it adds."))
        served = serve("--mode", "auto", "-c", "fallback=second:second-model")
        sid = served.api.post("/api/sessions", json={"cwd": str(project)}).json()["id"]
        errors: list[str] = []
        page, _ = open_page(browser, served.pair, errors)
        page.goto(f"{served.url}/#/s/{sid}")
        page.locator('[data-role="prompt"]').wait_for(state="visible")
        served.api.post(f"/api/sessions/{sid}/ops", json={"submission_id": "goal-1", "op": {
            "type": "user_turn", "text": "make add work", "until": "python3 -B check_calc.py"}})
        page.locator(".notice", has_text="goal met after 2 turns").wait_for()
        notices = [t.strip() for t in page.locator(".notice").all_inner_texts()]
        assert any("Now on second:second-model (was openai-compatible:mock-model: overloaded" in n for n in notices)
        checks = [n for n in notices if n.startswith("Goal check")]
        assert checks == ["Goal check 1/10 not met (exit 1)", "Goal check 2/10 passed"], notices
        assert len(second.chat_requests) == 4 and errors == []
