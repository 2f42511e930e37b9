"""Commands run with bash, the shell whose grammar the classifier parses."""

from __future__ import annotations

import subprocess

import pytest

from tests.support.redteam_sandbox import KINDS, shell

BASH_ONLY = 'arr=(x y); [[ ${arr[1]} == y ]] && echo "ran-as-bash ${BASH_VERSINFO[0]}"'


@pytest.mark.parametrize("kind", [*KINDS, "off"])
def test_a_bash_only_construct_runs_as_bash(project, server, kind):
    outs = shell(project, server, kind, BASH_ONLY)
    assert outs[0].startswith("Exit code: 0") and "ran-as-bash" in outs[0], outs[0]


def test_control_posix_sh_reads_the_same_line_differently():
    proc = subprocess.run(["/bin/sh", "-c", BASH_ONLY], capture_output=True, text=True)
    if "ran-as-bash" in proc.stdout:
        pytest.fail("/bin/sh here is bash: this control cannot show the difference (expected dash)")
    assert proc.returncode != 0
