"""The README's library example runs as written (a real Python process, the mock model behind the
`AUGER_BASE_URL` / `AUGER_MODEL` a user may set), and the public API type-checks under `mypy --strict`
for a program that imports only `auger` — the README's example included — while a misuse is an error."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.support.harness import cli_env
from tests.support.mock_openai import Reply, ToolCall

ROOT = Path(__file__).resolve().parents[1]


def library_example() -> str:
    """The python block of the README's "Library use" section."""
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Library use"):]
    section = section[:section.index("\n## ", 1)]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_readme_library_example_runs_as_written(project, server, isolated_home, tmp_path):
    (project / "app.py").write_text("# TODO: one\nprint('hi')  # TODO: two\n")
    (isolated_home / "config.toml").write_text("generate_titles = false\nmodel_retry_base_delay = 0.01\n")
    server.add(Reply(text='{"count": 2}', usage={"prompt_tokens": 900, "completion_tokens": 6}),
               Reply(tool_calls=[ToolCall("write_file", {"path": "CHANGELOG.md", "content": "# Changelog\n\n"
                                                                                           "## Unreleased\n"}),
                                 ToolCall("shell", {"command": "git add CHANGELOG.md"})]),
               Reply(text="Added CHANGELOG.md with an Unreleased section."))
    script = tmp_path / "example.py"  # beside the project, not in it
    script.write_text(library_example())
    env = cli_env(isolated_home, {"AUGER_BASE_URL": server.base_url, "AUGER_MODEL": "mock-model"})
    out = subprocess.run([sys.executable, str(script)], cwd=project, env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("TODOs: 2 | tokens: ") and int(lines[0].rsplit(" ", 1)[1]) >= 906
    asked = [line for line in lines if line.startswith("? ")]
    assert len(asked) == 2 and "CHANGELOG.md" in asked[0] and "git add" in asked[1]
    assert "-> write_file" in lines and "-> shell" in lines
    assert "Added CHANGELOG.md with an Unreleased section." in lines
    assert "+## Unreleased" in lines  # the session's diff
    assert not (project / "CHANGELOG.md").exists()  # undone
    denied = [m["content"] for m in server.chat_requests[-1].body["messages"] if m["role"] == "tool"]
    assert "no commands this time" in denied[-1]
    assert sorted(p.name for p in project.iterdir()) == ["app.py"]  # no sessions.db in the project
    assert (isolated_home / "sessions.db").exists()


DOWNSTREAM = '''\
import auger


async def main(url: str) -> None:
    result: auger.Result = await auger.run("hi", cwd=".", model="m", output_schema={"type": "object"})
    text: str = result.text
    tokens: int = result.usage.total_tokens
    cost: float | None = result.cost
    async with auger.open(cwd=".", approve=lambda request: request.kind != "tool") as session:
        run: auger.Run = session.run("go")
        async for event in run:
            if isinstance(event, auger.events.ToolCallEnded) and event.denied is not None:
                print(event.name, event.output)
        async for envelope in session.run("again").envelopes():
            seq: int = envelope.seq
        diff: auger.Diff = await session.diff(1)
        paths: list[str] = diff.files
        undone: auger.events.TurnUndone = await session.undo()
        async with session.fork(before=1) as fork:
            await fork.interrupt()
    try:
        auger.run_sync("x")
    except auger.TurnError as exc:
        partial: auger.Result = exc.result
    except auger.AugerError:
        pass
    async with auger.connect(url, token="t") as client:
        remote: auger.Session = await client.open("/srv/project", mode="safe")
        await remote.close()
        await client.run("hi", cwd="/srv/project")
    print(text, tokens, cost, seq, paths, undone.files, partial, auger.__version__)
'''

MISUSE = '''\
import auger


async def main() -> None:
    result = await auger.run("hi", cwd=".")
    print(result.txt)
    await auger.run(42)
    async with auger.open(mode=3):
        pass
    auger.no_such_name
'''


def test_a_program_importing_only_auger_type_checks_strictly_and_misuse_is_caught(tmp_path):
    (tmp_path / "readme_example.py").write_text(library_example())
    (tmp_path / "downstream.py").write_text(DOWNSTREAM)
    (tmp_path / "misuse.py").write_text(MISUSE)
    out = subprocess.run([sys.executable, "-m", "mypy", "--strict", "--python-version", "3.11", "--no-incremental",
                          "--hide-error-context", "--no-error-summary", "readme_example.py", "downstream.py",
                          "misuse.py"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    errors = [line for line in out.stdout.splitlines() if ": error:" in line]
    assert all(line.startswith("misuse.py:") for line in errors), out.stdout + out.stderr
    lines = sorted({int(line.split(":")[1]) for line in errors})
    assert lines == [6, 7, 8, 10], out.stdout  # .txt, an int prompt, an int mode, an unknown name
