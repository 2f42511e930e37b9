"""The web UI's schedules, on the Tasks page, in a real browser against the real `auger serve` on the
fleet's database: a schedule added from the page's form (stored as the API would store it), its hostile
prompt drawn as text, paused, resumed and removed from its row — and a change made elsewhere shown."""

from __future__ import annotations

import httpx
import pytest

from tests.support import browser as chromium_support
from tests.support.browser import open_page
from tests.support.fleet import make_repo, task_model
from tests.support.serve import TOKEN, pairing_link, start_process, stop_process

ROW = '[data-role="schedule"]'
HOSTILE = 'nightly <img src=x onerror="window.__pwned=1"> <script>window.__pwned=2</script>'


@pytest.fixture(scope="module")
def browser():
    with chromium_support.for_tests() as launched:
        yield launched


def test_a_schedule_is_added_paused_resumed_and_removed_from_the_tasks_page(browser, postgres_url, isolated_home,
                                                                           project, tmp_path):
    repo = make_repo(tmp_path / "repo")
    with task_model() as model:
        proc, url, printed = start_process(project, isolated_home, model, postgres_url)
        api = httpx.Client(base_url=url, headers={"authorization": f"Bearer {TOKEN}"}, timeout=30)
        try:
            errors: list[str] = []
            page, _ = open_page(browser, pairing_link(printed), errors)
            page.click('[data-role="tasks-link"]')
            page.click('[data-role="new-schedule"]')
            form = page.locator('[data-role="schedule-form"]')
            form.locator('[data-field="cadence"]').fill("0 3 * * 1-5")
            form.locator('[data-field="missed"]').select_option("skip")
            form.locator('[data-field="prompt"]').fill(HOSTILE)
            form.locator('[data-field="repo"]').fill(str(repo))
            form.locator('[data-role="add-schedule"]').click()
            page.locator(ROW).wait_for()
            stored = api.get("/api/fleet/schedules").json()["schedules"]
            assert len(stored) == 1 and stored[0]["cadence"] == "0 3 * * 1-5" and stored[0]["missed"] == "skip"
            sid = stored[0]["id"]
            row = page.locator(f'{ROW}[data-schedule="{sid}"]')
            assert row.locator(".task-prompt").inner_text() == HOSTILE  # the text, as text
            assert page.locator(".schedules img, .schedules script").count() == 0
            assert page.evaluate("window.__pwned") is None
            assert "0 3 * * 1-5" in row.locator(".cadence").inner_text()

            row.locator('[data-action="pause"]').click()
            page.locator(f'{ROW}[data-schedule="{sid}"][data-paused="true"]').wait_for()
            assert api.get(f"/api/fleet/schedules/{sid}").json()["paused"] is True
            assert api.post(f"/api/fleet/schedules/{sid}/resume", json={}).status_code == 200  # from elsewhere…
            page.locator(f'{ROW}[data-schedule="{sid}"][data-paused="false"]').wait_for(timeout=10_000)  # …seen
            row.locator('[data-action="remove"]').click()
            page.locator(ROW).wait_for(state="detached")
            assert api.get("/api/fleet/schedules").json()["schedules"] == []
            assert errors == []
        finally:
            api.close()
            code, stderr = stop_process(proc)
    assert code == 0, stderr
