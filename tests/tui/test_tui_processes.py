"""Interactive processes (exec_command / write_stdin) in the terminal UI, driven for real in tmux."""

from __future__ import annotations

from tests.support.typist import exec_call, typist, write_call
from tests.tui.terminal import status_line


def test_a_process_shows_its_output_under_the_call_and_is_counted_while_it_runs(term, server):
    server.add(*typist([(exec_call("python3 -q -i", tty=True), ">>> "),
                        (write_call("print(6*7)\n"), "42")], final="python is running", then=[
        *typist([(write_call("exit()\n"), "Process exited with code 0")], final="python has exited")]))
    t = term("-c", "exec_sessions=true")
    t.ready()
    t.submit("start python")
    shown = t.wait_until(lambda s: "python is running" in s and "1 process running" in status_line(s),
                         "the answer, with the live process counted on the status line")
    assert "✓ exec_command python3 -q -i" in shown
    assert "✓ write_stdin session 1: 'print(6*7)\\n'" in shown
    lines = shown.splitlines()
    typed = next(i for i, line in enumerate(lines) if "write_stdin session 1: 'print(6*7)" in line)
    assert any(line.strip() == "42" for line in lines[typed + 1:typed + 4])  # its output under the call
    t.submit("stop it")
    t.wait_until(lambda s: "python has exited" in s and "process" not in status_line(s),
                         "the answer, and no process left on the status line")
