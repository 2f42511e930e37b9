"""Real language servers for the code-intelligence tests: basedpyright and `ruff server` from the dev extra
(beside the venv's python, where auger finds them), and typescript-language-server with typescript — and
pyright, for a machine without basedpyright — from npm, installed once into the user's cache dir (.ci/run
fetches them beforehand; a test fetches them again when they are missing, and is skipped, saying why, only
when npm is missing or the registry cannot be reached). `servers_path` is a PATH with their programs first.

`fake_server` writes a language server of a few lines for the tests of what auger does with one that is
dead, slow, or misbehaves (tests/support/fake_lsp.py).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.downloads import cached

NPM_PACKAGES = ("pyright@1.1.414", "typescript-language-server@5.3.0", "typescript@5.9.3")
FAKE = Path(__file__).with_name("fake_lsp.py")


def npm_prefix() -> Path:
    return cached("lsp-servers-1")


def npm_bin() -> Path:
    """The directory holding pyright-langserver and typescript-language-server (installed if missing)."""
    prefix = npm_prefix()
    binary = prefix / "node_modules" / ".bin"
    if all((binary / name).exists() for name in ("pyright-langserver", "typescript-language-server", "tsserver")):
        return binary
    if shutil.which("npm") is None:
        pytest.skip("npm is not installed (scripts/install-system-deps installs it), so the language servers "
                    "cannot be fetched")
    try:
        done = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--prefix", str(prefix),
                               *NPM_PACKAGES], capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        pytest.skip("the npm registry did not answer within 10 minutes; the language servers cannot be fetched")
    if done.returncode != 0:
        if any(word in done.stderr for word in ("ENOTFOUND", "ECONNREFUSED", "ETIMEDOUT", "EAI_AGAIN", "network")):
            pytest.skip(f"the npm registry cannot be reached: {done.stderr.strip().splitlines()[-1:]}")
        pytest.fail(f"installing {' '.join(NPM_PACKAGES)} failed: {done.stderr[-2000:]}")
    return binary


def servers_path() -> str:
    """PATH with the npm servers and this interpreter's scripts (ruff) first."""
    return os.pathsep.join([str(npm_bin()), str(Path(sys.executable).parent), os.environ.get("PATH", "")])


def lsp_table(**servers: dict) -> dict:
    """A config's tables with `[lsp.NAME]` entries (names with dashes given with underscores)."""
    return {"lsp": {name.replace("_", "-"): table for name, table in servers.items()}}


def fake_server(behaviour: str, marker: str = "") -> dict:
    """A `[lsp.NAME]` table for tests/support/fake_lsp.py behaving as `behaviour` (see that module)."""
    return {"command": fake_command(behaviour, *([marker] if marker else [])), "languages": ["python"]}


def fake_command(*args: str) -> list[str]:
    """The command running tests/support/fake_lsp.py with `args`: its text, not its path, since the server runs
    in the session's sandbox, which need not show this checkout."""
    return [sys.executable, "-c", FAKE.read_text(), *args]
