"""The web UI's tasks page in a real browser (headless Chromium, a phone's screen) against the real
`auger serve --db postgresql://…`: tasks a real `auger worker` ran against the mock model (one done, one
failed) and tasks still queued, with their states and the fleet's numbers; a queued task cancelled and a
failed one retried from the page; a change made elsewhere shown without a reload; a task's session opened
from its row; a hostile prompt drawn as text. On a SQLite store the page has no way to the tasks."""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import psycopg
import pytest

from tests.support import browser as chromium_support
from tests.support.browser import PHONE, open_page
from tests.support.fleet import make_repo, start_worker, task_model
from tests.support.serve import TOKEN, pairing_link, start_process, stop_process

TASK = '[data-role="task"]'
HOSTILE = 'task hostile <img src=x onerror="window.__pwned=1"> <script>window.__pwned=2</script>'


@pytest.fixture(scope="module")
def browser():
    with chromium_support.for_tests() as launched:
        yield launched


def submit_tasks(url: str, model, repo, *tasks: tuple[str, str, str]) -> list[str]:
    """Queue (prompt, queue, ref) tasks through the fleet's own submit, as `auger submit` does; their ids.
    On a thread of its own: Playwright's loop runs in this one."""
    from auger.fleet.submit import submit
    from auger.fleet.policy import TaskSpec
    from auger.store.postgres import PostgresStore

    async def main() -> list[str]:
        store = PostgresStore(url)
        try:
            return [(await submit(store, TaskSpec(prompt=prompt, repo=str(repo), ref=ref, model="m",
                                                  mode="auto"),
                                  queue_name=queue, max_attempts=1))[0].id
                    for prompt, queue, ref in tasks]
        finally:
            await store.aclose()

    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, main()).result()


def task_states(url: str) -> dict[str, tuple[str, int]]:
    with psycopg.connect(url, autocommit=True) as conn:
        return {row[0]: (row[1], row[2]) for row in conn.execute("SELECT id, state, retried FROM tasks")}


def wait_until(predicate, timeout: float = 30.0, what: str = "the condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_the_tasks_page_shows_the_fleet_and_cancels_and_retries_tasks(browser, postgres_url, isolated_home,
                                                                      project, tmp_path):
    repo = make_repo(tmp_path / "repo")
    with task_model() as model:
        # the worker takes queue "w" only: what goes to "default" stays queued for the page to cancel
        done, failed, hostile, queued = submit_tasks(postgres_url, model, repo, ("task one", "w", "main"),
                                                     ("task two", "w", "no-such-ref"), (HOSTILE, "default", "main"),
                                                     ("task three", "default", "main"))
        worker = start_worker(isolated_home, postgres_url, model, "--queue", "w", log=tmp_path / "worker.log")
        try:
            wait_until(lambda: task_states(postgres_url)[done][0] == "done"
                       and task_states(postgres_url)[failed][0] == "failed", what="the worker's two tasks")
        finally:
            worker.kill()
            worker.wait(10)

        proc, url, printed = start_process(project, isolated_home, model, postgres_url)
        api = httpx.Client(base_url=url, headers={"authorization": f"Bearer {TOKEN}"}, timeout=30)
        try:
            errors: list[str] = []
            page, _ = open_page(browser, pairing_link(printed), errors, **PHONE)
            page.click(".bar .menu")
            page.click('.sidebar.open [data-role="tasks-link"]')  # shown: this server's /api/fleet answers
            page.locator(TASK).nth(3).wait_for()

            def row(task_id: str):
                return page.locator(f'{TASK}[data-task="{task_id}"]')

            def stat(name: str) -> str:
                return page.locator(f'[data-stat="{name}"] .stat-value').inner_text()

            shown = page.locator(TASK).evaluate_all("rows => rows.map(r => [r.dataset.task, r.dataset.state])")
            assert shown == [[queued, "queued"], [hostile, "queued"], [failed, "failed"], [done, "done"]]  # newest first
            assert (stat("queued"), stat("running"), stat("done"), stat("failed"), stat("cancelled")) == \
                ("2", "0", "1", "1", "0")
            assert "rev-parse failed" in row(failed).locator(".task-error").inner_text()  # why it failed
            assert row(done).locator(".worker").inner_text()  # which worker ran it
            assert page.evaluate("document.documentElement.scrollWidth") <= 390

            prompt = row(hostile).locator(".task-prompt")
            assert prompt.inner_text() == HOSTILE  # the submitter's text, as text
            assert page.locator(".tasks img, .tasks script").count() == 0
            assert page.evaluate("window.__pwned") is None

            row(queued).locator('[data-action="cancel"]').click()
            page.locator(f'{TASK}[data-task="{queued}"][data-state="cancelled"]').wait_for()
            assert task_states(postgres_url)[queued][0] == "cancelled"
            page.locator('[data-stat="cancelled"] .stat-value', has_text="1").wait_for()
            assert row(done).locator('[data-action="cancel"]').count() == 0  # finished: nothing to cancel

            row(failed).locator('[data-action="retry"]').click()
            page.locator(f'{TASK}[data-task="{failed}"][data-state="queued"]').wait_for()
            assert task_states(postgres_url)[failed] == ("queued", 1)
            page.locator('[data-stat="retried"] .stat-value', has_text="1").wait_for()

            assert api.post(f"/api/fleet/tasks/{hostile}/cancel", json={}).status_code == 200  # from elsewhere…
            page.locator(f'{TASK}[data-task="{hostile}"][data-state="cancelled"]').wait_for(timeout=10_000)  # …seen

            row(done).locator("a", has_text="Session").click()
            page.locator('[data-role="agent-message"]', has_text="done one").wait_for()
            assert errors == []
        finally:
            api.close()
            code, stderr = stop_process(proc)
    assert code == 0, stderr


def test_on_a_sqlite_store_the_page_offers_no_tasks_and_never_asks_for_them(browser, server, isolated_home, project, tmp_path):
    proc, url, printed = start_process(project, isolated_home, server, tmp_path / "s.db")
    try:
        errors: list[str] = []
        failed: list[str] = []
        asked: list[str] = []
        page = browser.new_context().new_page()
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.on("console", lambda message: failed.append(message.text) if message.type == "error" else None)
        page.on("request", lambda request: asked.append(request.url))
        with page.expect_response(lambda r: "/api/server" in r.url) as server_info:
            page.goto(pairing_link(printed))
        assert server_info.value.json()["fleet"] is False
        page.locator(".foot a", has_text="Settings").wait_for()
        page.wait_for_timeout(300)
        assert page.locator('[data-role="tasks-link"]').count() == 0
        assert not [url for url in asked if "/api/fleet" in url]  # never asked, so no 404 in the console
        assert errors == [] and failed == []
    finally:
        code, stderr = stop_process(proc)
    assert code == 0, stderr


def test_a_task_queued_from_the_page_parks_is_answered_there_and_another_worker_finishes_it(
        browser, postgres_url, isolated_home, project, tmp_path):
    """A task waiting for a person holds no worker: queued from the page's form, parked at its approval, the
    worker that started it gone, answered from the page — and finished once, by another worker."""
    repo = make_repo(tmp_path / "repo")
    with task_model() as model:
        proc, url, printed = start_process(project, isolated_home, model, postgres_url)
        first = start_worker(isolated_home, postgres_url, model, log=tmp_path / "a.log")
        second = None
        try:
            errors: list[str] = []
            page, _ = open_page(browser, pairing_link(printed), errors)
            page.click('[data-role="tasks-link"]')
            page.click('[data-role="new-task"]')
            form = page.locator('[data-role="task-form"]')
            form.locator('[data-field="prompt"]').fill("task parked")
            form.locator('[data-field="repo"]').fill(str(repo))
            form.locator('[data-field="mode"]').select_option("safe")
            form.locator('[data-field="approval_timeout"]').fill("1")
            form.locator('[data-role="submit-task"]').click()
            first_holder = _first_worker(postgres_url)
            waiting = page.locator(f'{TASK}[data-state="waiting"]')
            waiting.wait_for(timeout=40_000)
            task_id = waiting.get_attribute("data-task")
            first.kill()  # the worker that started it is gone: it held the task no longer anyway
            first.wait(10)
            card = waiting.locator('[data-role="task-approval"]')
            assert "parked.txt" in card.inner_text()
            card.locator('[data-option="approve"]').click()
            page.locator(f'{TASK}[data-task="{task_id}"][data-state="queued"]').wait_for()
            second = start_worker(isolated_home, postgres_url, model, log=tmp_path / "b.log")
            page.locator(f'{TASK}[data-task="{task_id}"][data-state="done"]').wait_for(timeout=40_000)
            assert errors == []
        finally:
            for worker in (first, second):
                if worker is not None and worker.poll() is None:
                    worker.kill()
                    worker.wait(10)
            code, stderr = stop_process(proc)
    assert code == 0, stderr
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        holder, submitted_by, session_id = conn.execute(
            "SELECT worker, submitted_by, session_id FROM tasks WHERE id = %s", (task_id,)).fetchone()
        diff = bytes(conn.execute("SELECT diff FROM task_results WHERE task_id = %s", (task_id,)).fetchone()[0])
        outputs = conn.execute("SELECT data FROM items WHERE session_id = %s AND type = 'tool_output'",
                               (session_id,)).fetchall()
        by = conn.execute("SELECT data FROM events WHERE session_id = %s AND type = 'approval_resolved'",
                          (session_id,)).fetchall()
    assert holder != first_holder and submitted_by == "owner"
    assert b"parked.txt" in diff and len(outputs) == 1 and "interrupted" not in outputs[0][0]  # it ran, once
    assert len(by) == 1 and '"owner' in by[0][0]


def _first_worker(url: str) -> str:
    """The worker that took the one task, read while it runs (a parked task names no worker)."""
    found: list[str] = []

    def taken() -> bool:
        with psycopg.connect(url, autocommit=True) as conn:
            row = conn.execute("SELECT worker FROM tasks WHERE worker IS NOT NULL").fetchone()
        if row:
            found.append(row[0])
        return bool(row)

    wait_until(taken, what="a worker to take the task")
    return found[0]
