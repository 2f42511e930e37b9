"""Take the web UI's screenshots in docs/ (webui-desktop.png, webui-phone.png) from a real `auger serve` and a
scripted model: a finished session that edited a file and ran the tests (desktop) and one waiting for an
approval (phone). Needs /usr/bin/chromium and playwright (scripts/install-system-deps, the `dev` extra).

    python scripts/webui_screenshots.py [--out docs] [--scheme light|dark]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.browser import PHONE, chromium  # noqa: E402
from tests.support.mock_openai import MockChatServer, Reply, ToolCall  # noqa: E402
from tests.support.serve import pairing_link, start_process, stop_process  # noqa: E402

CLI = '''import argparse


def main(argv=None):
    parser = argparse.ArgumentParser(prog="greet")
    parser.add_argument("name")
    args = parser.parse_args(argv)
    print(f"Hello, {args.name}!")
'''
TEST = '''from cli import main


def test_greets(capsys):
    main(["Ada"])
    assert capsys.readouterr().out == "Hello, Ada!\\n"
'''
SUMMARY = """Added a `--verbose` flag to **cli.py**:

- `-v` / `--verbose` prints what the command is about to do before greeting
- the default output is unchanged, so the existing test still passes

```python
parser.add_argument("-v", "--verbose", action="store_true", help="say what happens")
```

The test suite passes (`1 passed`). Want me to add a test for the verbose output too?"""

STEPS = [
    # the finished session
    Reply(text="Let me look at the CLI first.", tool_calls=[ToolCall("read_file", {"path": "cli.py"})]),
    Reply(text="I'll add the flag next to `name`.", tool_calls=[ToolCall("edit_file", {
        "path": "cli.py", "old_string": '    parser.add_argument("name")\n',
        "new_string": '    parser.add_argument("name")\n    parser.add_argument("-v", "--verbose", '
                      'action="store_true", help="say what happens")\n'})]),
    Reply(tool_calls=[ToolCall("shell", {"command": "python -m pytest -q"})]),
    Reply(text=SUMMARY),
    # a quick question
    Reply(text="Retries back off exponentially with jitter, and honour `Retry-After` when a server sends one."),
    # the session waiting for an approval
    Reply(text="I'll remove the build artefacts first.",
          tool_calls=[ToolCall("shell", {"command": "rm -rf build dist"})]),
]


def project(root: Path) -> Path:
    path = root / "src" / "greet"
    path.mkdir(parents=True)
    (path / "cli.py").write_text(CLI)
    (path / "test_cli.py").write_text(TEST)
    (path / ".gitignore").write_text("__pycache__/\n.pytest_cache/\n")
    for args in (["init", "-q"], ["add", "."], ["-c", "user.name=x", "-c", "user.email=x@x", "commit", "-qm", "start"]):
        subprocess.run(["git", *args], cwd=path, check=True)
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent.parent / "docs"))
    parser.add_argument("--scheme", default="light", choices=("light", "dark"))
    args = parser.parse_args()
    out = Path(args.out)
    with tempfile.TemporaryDirectory() as tmp, MockChatServer(list(STEPS)) as mock:
        root = Path(tmp)
        home = root / "home"
        home.mkdir()
        proc, url, printed = start_process(project(root), home, mock, root / "sessions.db")
        try:
            with chromium() as browser:
                desktop = browser.new_context(viewport={"width": 1280, "height": 800}, color_scheme=args.scheme)
                page = desktop.new_page()
                page.set_default_timeout(30_000)
                page.goto(pairing_link(printed))
                ask(page, "Add a --verbose flag to the CLI and run the tests")
                for _ in range(2):  # the edit, then the test run
                    card = page.locator(".approval.waiting")
                    request = card.get_attribute("data-request")
                    card.locator('[data-option="approve"]').click()
                    page.locator(f'details.approval.resolved[data-request="{request}"]').wait_for()
                page.locator('[data-role="agent-message"]', has_text="Want me to add a test").wait_for()
                first = page.url
                page.goto(url + "/#/")
                ask(page, "How do the model retries work?")
                page.locator('[data-role="agent-message"]', has_text="Retry-After").wait_for()
                page.goto(url + "/#/")
                ask(page, "Clean the build output")
                page.locator('[data-option="approve"]').wait_for()
                waiting = page.url
                page.goto(first)
                page.locator('[data-role="agent-message"]', has_text="Want me to add a test").wait_for()
                page.locator(".diff-card details.file").first.locator("summary").click()
                page.eval_on_selector(".scroller", "el => { el.scrollTop = el.scrollHeight; }")
                page.wait_for_timeout(500)
                page.screenshot(path=str(out / "webui-desktop.png"))

                phone = browser.new_context(color_scheme=args.scheme, **PHONE)
                page = phone.new_page()
                page.set_default_timeout(30_000)
                page.goto(desktop.request.post(url + "/api/pair", headers={"origin": url}).json()["url"])
                page.goto(waiting)
                page.locator('[data-option="approve"]').wait_for()
                page.wait_for_timeout(500)
                page.screenshot(path=str(out / "webui-phone.png"))
        finally:
            stop_process(proc)
    print(f"wrote {out / 'webui-desktop.png'} and {out / 'webui-phone.png'}")
    return 0


def ask(page, text: str) -> None:
    page.fill('[data-role="prompt"]', text)
    page.click('[data-role="send"]')
    page.wait_for_url(lambda u: "#/s/" in u)


if __name__ == "__main__":
    sys.exit(main())
