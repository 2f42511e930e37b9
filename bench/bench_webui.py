"""The web UI on a long session: a stored session of T turns (4 items each: 2,000 items by default) opened in
headless Chromium from the real `auger serve`. Prints, over R loads, the time from navigation to the last
message drawn (the newest page: the UI draws 80 items and fetches older pages as the reader scrolls up),
the time to draw the next older page, and the page's DOM size.

Not a test: tests/test_bench_webui.py runs the machinery small. Needs /usr/bin/chromium and playwright
(scripts/install-system-deps, the `dev` extra).

    python bench/bench_webui.py [--turns 500] [--runs 5]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.browser import chromium  # noqa: E402
from tests.support.mock_openai import MockChatServer  # noqa: E402
from tests.support.serve import long_session, pairing_link, start_process, stop_process  # noqa: E402

# Set by the page itself: the moment (ms since navigation) the last message of the session is on screen.
WATCH_LAST = """
window.__painted = null;
new MutationObserver((_, observer) => {
  const shown = [...document.querySelectorAll('[data-role="agent-message"]')];
  if (shown.some((m) => m.textContent.includes(window.__lastText))) {
    observer.disconnect();
    requestAnimationFrame(() => { window.__painted = performance.now(); });
  }
}).observe(document, { childList: true, subtree: true, characterData: true });
"""


@dataclass
class Result:
    turns: int
    first_paint_ms: list[float] = field(default_factory=list)
    older_page_ms: list[float] = field(default_factory=list)
    shown: int = 0
    dom_nodes: int = 0


def measure(turns: int, runs: int, root: Path) -> Result:
    project = root / "project"
    project.mkdir()
    db = root / "sessions.db"

    async def make() -> str:
        from auger.store.sqlite import SqliteStore

        store = SqliteStore(db)
        try:
            return await long_session(store, project, turns)
        finally:
            await store.aclose()

    with ThreadPoolExecutor(1) as pool:  # Playwright's loop will run in this thread
        session_id = pool.submit(asyncio.run, make()).result()
    result = Result(turns)
    home = root / "home"
    home.mkdir()
    with MockChatServer() as mock:
        proc, url, printed = start_process(project, home, mock, db)
        try:
            with chromium() as browser:
                context = browser.new_context(viewport={"width": 1280, "height": 900})
                context.add_init_script(f"window.__lastText = 'Module {turns - 1} defines';\n{WATCH_LAST}")
                page = context.new_page()
                page.goto(pairing_link(printed))
                for _ in range(runs):
                    page = context.new_page()
                    page.goto(f"{url}/#/s/{session_id}")
                    page.wait_for_function("() => window.__painted !== null", timeout=60_000)
                    result.first_paint_ms.append(page.evaluate("window.__painted"))
                    result.shown = page.locator('[data-role="agent-message"]').count()
                    result.dom_nodes = page.evaluate("document.getElementsByTagName('*').length")
                    result.older_page_ms.append(older_page(page, result.shown))
                    page.close()
        finally:
            stop_process(proc)
    return result


def older_page(page, shown: int) -> float:
    """Milliseconds from scrolling to the top to the next older page drawn (more messages than the `shown`
    at first paint). The scroll is repeated every 100 ms until then: on a busy machine the page's own first
    scroll to the newest message can land after this one, as a reader would simply scroll up again."""
    page.evaluate("""(shown) => {
      window.__olderAt = performance.now();
      window.__olderDone = null;
      const more = () => document.querySelectorAll('[data-role="agent-message"]').length > shown;
      const done = () => requestAnimationFrame(() => { window.__olderDone = performance.now(); });
      new MutationObserver((_, observer) => {
        if (more()) { observer.disconnect(); done(); }
      }).observe(document.querySelector('.transcript'), { childList: true });
      const scroller = document.querySelector('.scroller');
      scroller.scrollTop = 0;
      const again = setInterval(() => {
        if (window.__olderDone !== null) { clearInterval(again); } else { scroller.scrollTop = 0; }
      }, 100);
      if (more()) { done(); }
    }""", shown)
    page.wait_for_function("() => window.__olderDone !== null", timeout=60_000)
    return float(page.evaluate("window.__olderDone - window.__olderAt"))


def table(results: list[Result]) -> str:
    rows = [f"{'turns':>6} {'items':>6} {'shown':>6} {'DOM nodes':>9} {'first paint ms (median / min / max)':>36} "
            f"{'older page ms (median)':>23}"]
    for r in results:
        paint = f"{statistics.median(r.first_paint_ms):.0f} / {min(r.first_paint_ms):.0f} / {max(r.first_paint_ms):.0f}"
        rows.append(f"{r.turns:>6} {r.turns * 4:>6} {r.shown:>6} {r.dom_nodes:>9} {paint:>36} "
                    f"{statistics.median(r.older_page_ms):>23.0f}")
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=500, help="turns of the stored session (4 items each)")
    parser.add_argument("--runs", type=int, default=5, help="page loads to measure")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        result = measure(args.turns, args.runs, Path(tmp))
    print(table([result]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
