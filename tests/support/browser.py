"""Headless Chromium for the web UI's tests and benchmark: Debian's `chromium` (scripts/install-system-deps
installs it) driven by Playwright with `executable_path` — Playwright's own browser download is never used.

The background-networking flags matter here: without them Chromium opens connections of its own (updates,
sync) that this machine's closed network refuses, and that slows or stalls it."""

from __future__ import annotations

import contextlib
import shutil
from typing import Any, Iterator

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]
PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True, "device_scale_factor": 2}

# Every EventSource the page opens, so a test can cut its connections as a network drop would.
TRACK_EVENT_SOURCES = """
window.__sources = [];
const NativeEventSource = window.EventSource;
window.EventSource = class extends NativeEventSource {
  constructor(url, init) { super(url, init); window.__sources.push(this); }
};
"""
CUT_EVENT_SOURCES = """() => {
  let cut = 0;
  for (const source of window.__sources) {
    if (source.readyState !== 2) { source.close(); source.dispatchEvent(new Event("error")); cut++; }
  }
  return cut;
}"""


def missing() -> str | None:
    """Why the browser tests cannot run here, or None."""
    if shutil.which(CHROMIUM) is None:
        return f"{CHROMIUM} is missing: scripts/install-system-deps installs Debian's chromium"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return ("playwright is missing: pip install -e '.[dev]' (never `playwright install`: the system chromium "
                "is used)")
    return None


@contextlib.contextmanager
def for_tests() -> Iterator[Any]:
    """The browser for a test module (its fixture's body); the module is skipped, saying why, without one."""
    reason = missing()
    if reason:
        import pytest

        pytest.skip(reason)
    with chromium() as launched:
        yield launched


def open_page(browser: Any, link: str, errors: list[str], wait_ms: int = 20_000, **context: Any) -> tuple[Any, Any]:
    """A new page in a context of its own (`context`: a phone's viewport…) at `link`; the page's uncaught
    errors go to `errors`. The page and the navigation's response."""
    page = browser.new_context(**context).new_page()
    page.set_default_timeout(wait_ms)
    page.on("pageerror", lambda error: errors.append(str(error)))
    return page, page.goto(link)


@contextlib.contextmanager
def chromium() -> Iterator[Any]:
    """A headless Chromium browser, closed at the end."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield browser
        finally:
            browser.close()
