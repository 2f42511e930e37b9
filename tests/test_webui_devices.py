"""The web UI on every device, in headless Chromium against the real `auger serve` process: a share link
opened on a phone shows the live session read-only (no prompt box, no approval buttons, no session list)
and ends when it is revoked from the Share action; a page that follows a session shows a browser
notification, once allowed, when the session needs an approval and when its turn ends."""

from __future__ import annotations

import time

import httpx
import pytest

from tests.support import browser as chromium_support
from tests.support.browser import PHONE, open_page
from tests.support.mock_openai import Reply, ToolCall
from tests.support.serve import TOKEN, pairing_link, start_process, stop_process

HEADERS = {"authorization": f"Bearer {TOKEN}"}
AGENT = '[data-role="agent-message"]'
# Every notification the page makes, recorded; and a page that is not looked at (the tab is in the background).
RECORD_NOTIFICATIONS = """
window.__notified = [];
window.Notification = class {
  static permission = "granted";
  static requestPermission() { return Promise.resolve("granted"); }
  constructor(title, options) { window.__notified.push({ title, body: options && options.body }); }
  close() {}
};
document.hasFocus = () => false;
"""


@pytest.fixture(scope="module")
def browser():
    with chromium_support.for_tests() as launched:
        yield launched


@pytest.fixture
def serve(project, server, isolated_home, tmp_path):
    started = []

    def start(*extra: str) -> tuple[str, str, httpx.Client]:
        proc, url, printed = start_process(project, isolated_home, server, tmp_path / "s.db", *extra)
        api = httpx.Client(base_url=url, headers=HEADERS, timeout=30)
        started.append((proc, api))
        return url, pairing_link(printed), api

    yield start
    for proc, api in started:
        api.close()
        code, stderr = stop_process(proc)
        assert code == 0, stderr


def _until(predicate, what: str, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while not (found := predicate()):
        assert time.monotonic() < deadline, f"{what} not seen within {timeout}s"
        time.sleep(0.1)
    return found


def test_a_share_link_shows_the_live_session_read_only_on_a_phone_until_it_is_revoked(browser, serve, server, project):
    server.add(Reply(text="Shared **first** answer.", tool_calls=[ToolCall("shell", {"command": "touch shared.txt"})]),
               Reply(text="After the owner approved."))
    url, pair, api = serve("--mode", "safe")
    errors: list[str] = []
    owner, _ = open_page(browser, pair, errors)
    owner.locator('[data-role="prompt"]').fill("start it")
    owner.click('[data-role="send"]')
    owner.wait_for_url(lambda u: "#/s/" in u)
    sid = owner.evaluate("decodeURIComponent(location.hash.split('/')[2])")
    owner.locator('[data-option="approve"]').wait_for()

    owner.click('[data-role="share"]')  # the Share action: a link, for a day by default
    owner.click('[data-role="share-create"]')
    link = owner.locator('[data-role="share-link"]').input_value()
    assert link.startswith(f"{url}/share?code=augs_")
    owner.click(".backdrop")  # the dialog closes

    viewer, landed = open_page(browser, link, errors, **PHONE)
    assert landed.status == 200
    viewer.wait_for_url(lambda u: f"#/s/{sid}" in u)
    viewer.locator(f"{AGENT} strong", has_text="first").wait_for()
    viewer.locator('[data-role="read-only"]').wait_for()
    viewer.locator("text=touch shared.txt").first.wait_for()  # the waiting approval, shown without its answers
    assert viewer.locator('[data-role="prompt"]').count() == 0 and viewer.locator("[data-option]").count() == 0
    assert viewer.locator(".sidebar").count() == 0 and viewer.locator('[data-role="share"]').count() == 0
    assert viewer.evaluate("document.documentElement.scrollWidth <= window.innerWidth")

    owner.click('[data-option="approve"]')  # answered elsewhere: the shared view follows live
    viewer.locator(AGENT, has_text="After the owner approved.").wait_for()
    assert (project / "shared.txt").exists()

    owner.click('[data-role="share"]')  # opened again: it lists the live links
    owner.locator('[data-role="share-revoke"]').click()
    viewer.locator('[data-role="ended"]', has_text="revoked or has expired").wait_for(timeout=10_000)
    assert api.get(f"/api/shares?session={sid}").json()["shares"][0]["live"] is False
    refused = httpx.get(link.replace("/share?code=", "/api/sessions/" + sid + "?x="), timeout=10)
    assert refused.status_code == 401
    assert errors == []


def test_a_page_following_a_session_notifies_of_an_approval_and_of_the_turns_end(browser, serve, server, tmp_path):
    server.add(Reply(tool_calls=[ToolCall("shell", {"command": "touch noticed.txt"})]), Reply(text="noticed"))
    url, pair, api = serve("--mode", "safe")
    errors: list[str] = []
    context = browser.new_context(**PHONE)
    context.add_init_script(RECORD_NOTIFICATIONS)
    page = context.new_page()
    page.set_default_timeout(20_000)
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(pair)
    page.locator('[data-role="prompt"]').fill("notice me")
    page.click('[data-role="send"]')
    page.wait_for_url(lambda u: "#/s/" in u)
    sid = page.evaluate("decodeURIComponent(location.hash.split('/')[2])")
    page.locator('[data-option="approve"]').wait_for()
    notified = _until(lambda: page.evaluate("window.__notified"), "a notification of the approval")
    assert notified[0]["title"].startswith("Approval needed") and "touch noticed.txt" in notified[0]["body"]
    api.post(f"/api/sessions/{sid}/ops", json={"submission_id": "from-elsewhere", "op": {
        "type": "approval_decision", "request_id": api.get(f"/api/sessions/{sid}").json()["state"]["pending_approvals"][0]
        ["request_id"], "decision": "approve"}})
    page.locator(AGENT, has_text="noticed").wait_for()
    notified = _until(lambda: len(page.evaluate("window.__notified")) >= 2 and page.evaluate("window.__notified"),
                      "a notification of the turn's end")
    assert notified[1]["title"].endswith("the turn finished")
    page.reload()  # what was told already is not told again when the page loads the session anew
    page.locator(AGENT, has_text="noticed").wait_for()
    time.sleep(1)
    assert page.evaluate("window.__notified") == []
    assert errors == []
    context.close()


def test_the_service_worker_and_notify_module_are_served(serve):
    url, _, api = serve()
    for path in ("/sw.js", "/js/notify.js", "/js/share.js"):
        answer = api.get(path)
        assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/javascript"), path
