"""The program-handler registry: every handler table is reachable from every place a program is named."""

from __future__ import annotations

from pathlib import Path

import pytest

from auger.policy.effects import analyze_command
from auger.policy.shell.builtins import HANDLERS as BUILTIN_HANDLERS
from auger.policy.shell.files import HANDLERS as FILE_HANDLERS
from auger.policy.shell.git import HANDLERS as GIT_HANDLERS
from auger.policy.shell.registry import HANDLERS

ROOT = Path("/auger-registry-test/project")


def test_registry_holds_every_table() -> None:
    for table in (FILE_HANDLERS, BUILTIN_HANDLERS, GIT_HANDLERS):
        for name in table:
            assert name in HANDLERS, name


@pytest.mark.parametrize(("command", "effect"), [
    # `python -m NAME` is judged as NAME, whichever handler table NAME's handler lives in
    ("python -m rm -rf /", "destructive"),  # files
    ("python -m tar -tf x.tar", "read_only"),  # files
    ("python -m git status", "read_only"),  # git
    ("python -m git push", "remote_action"),  # git
])
def test_python_m_reaches_handlers_in_every_table(command: str, effect: str) -> None:
    assert analyze_command(command, ROOT).effect == effect
