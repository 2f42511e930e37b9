"""The real `auger serve` command as a subprocess for tests: started on a free port against the mock model
server (its URL read from what it prints), and stopped with SIGTERM as a user would."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from tests.support.harness import FAST
from tests.support.serve import TOKEN


def start(project: Path, home: Path, mock, db: Path, *extra: str) -> tuple[subprocess.Popen, str, list[str]]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AUGER_", "OPENAI_"))}
    env.update({"AUGER_HOME": str(home), "OPENAI_API_KEY": "sk-test", "AUGER_SERVER_TOKEN": TOKEN})
    overrides = [arg for o in FAST for arg in ("-c", o)]
    proc = subprocess.Popen([sys.executable, "-m", "auger", "serve", "--port", "0", "--base-url", mock.base_url,
                             "--model", "mock-model", "--db", str(db), *overrides, *extra], cwd=project, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = []
    while True:
        line = proc.stdout.readline()
        assert line, f"auger serve exited: {proc.stderr.read()}"
        lines.append(line)
        if "Authorization" in line:
            break
    url = re.search(r"listening on (https?://\S+)/", lines[0]).group(1)
    return proc, url, lines


def stop(proc: subprocess.Popen) -> tuple[int, str]:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    return proc.returncode, proc.stderr.read()
