"""Shared harness for the classifier red-team modules (test_rc3_*, test_rc4_*).

An attack is a command line a hostile model might send, with the files a poisoned repository would
hold for it. It is judged by its effect: the file `out` must not appear when the command goes
through the real shell tool in plan mode and in headless safe mode (which runs read-only verdicts
without asking). Its control runs the same line with plain `bash -c` in a fresh directory and must
create `out`, so an attack that no longer works cannot pass silently.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from tests.support.harness import run_session
from tests.support.mock_openai import Reply, ToolCall

HOOK = "#!/bin/sh\ntouch {out}\n"


@dataclass(frozen=True)
class Attack:
    name: str
    command: str  # `{out}` is the file the payload creates, relative to the project root
    files: dict[str, str] = field(default_factory=dict)  # fixtures; `{out}` is substituted in them too
    executable: tuple[str, ...] = ()
    setup: Callable[[Path], None] | None = None  # fixtures that need programs (git repositories)
    needs: tuple[str, ...] = ()  # programs the payload needs
    creates: str = ""  # the file the payload creates, when the program names it itself

    @property
    def out(self) -> str:
        return self.creates or f"pwned-{self.name}"

    def line(self) -> str:
        return self.command.replace("{out}", self.out)

    def missing(self) -> list[str]:
        return [p for p in self.needs if shutil.which(p) is None]

    def build(self, root: Path) -> None:
        for rel, text in self.files.items():
            path = root / rel.replace("{out}", self.out)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text.replace("{out}", self.out))
            if rel in self.executable:
                path.chmod(0o755)
        if self.setup is not None:
            self.setup(root)


def control_writes(attack: Attack, tmp: Path) -> bool:
    """Unconfined, the payload does what it claims."""
    where = tmp / f"control-{attack.name}"
    where.mkdir()
    attack.build(where)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "BASH_ENV", "ENV"))}
    subprocess.run(["bash", "-c", attack.line()], cwd=where, env=env, stdin=subprocess.DEVNULL,
                   capture_output=True, timeout=20)
    return (where / attack.out).exists()


def written_through_tool(project: Path, server, attacks: list[Attack], mode: str, sandbox: str) -> list[str]:
    """Send every attack as a shell call in one session, in that sandbox; the names of those whose
    file appeared."""
    for attack in attacks:
        attack.build(project)
    server.add(Reply(tool_calls=[ToolCall("shell", {"command": a.line()}) for a in attacks]), Reply(text="done"))
    run_session(project, server, "go", overrides=(f"mode={mode}", f"sandbox={sandbox}"))
    return [a.name for a in attacks if (project / a.out).exists()]


def git_repo(path: Path, config: str = "") -> None:
    """A committed repository at `path`, with extra lines appended to its .git/config (once)."""
    if (path / ".git").exists():
        return
    path.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}

    def run(*args: str) -> None:
        subprocess.run(["git", *args], cwd=path, env=env, check=True, capture_output=True)

    run("init", "-q")
    (path / "tracked.txt").write_text("one\n")
    run("add", "tracked.txt")
    run("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
    if config:
        with open(path / ".git" / "config", "a") as f:
            f.write(config)
