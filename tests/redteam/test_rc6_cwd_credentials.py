"""Credential paths stay hidden whatever the working directory: a project that is the home
directory or contains it, a workdir inside ~/.ssh, `..` tricks. Judged by the secret's bytes
in what the model reads."""

from __future__ import annotations

import pytest

from tests.support.redteam_sandbox import KINDS, shell

SECRET = "rc6-PRIVATE-KEY-MATERIAL"


def _home(home):
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text(SECRET + "\n")
    (home / ".aws").mkdir()
    (home / ".aws" / "credentials").write_text(SECRET + "\n")
    (home / "sub").mkdir()


CASES = {
    "project-is-home": (".", [{"command": "cat .ssh/id_rsa"}, {"command": "cat id_rsa", "workdir": ".ssh"},
                              {"command": "cat ../.aws/credentials", "workdir": "sub"},
                              {"command": "cat credentials", "workdir": "sub/../.aws"},
                              {"command": "grep -r rc6 . 2>/dev/null"}]),
    "project-contains-home": ("home", [{"command": "cat home/.ssh/id_rsa"},
                                       {"command": "cat id_rsa", "workdir": "home/.ssh"},
                                       {"command": "grep -r rc6 . 2>/dev/null"}]),
}


@pytest.mark.parametrize("kind", [*KINDS, "off"])
@pytest.mark.parametrize("case", CASES)
def test_credentials_hidden_whatever_the_working_directory(project, server, monkeypatch, kind, case):
    where, calls = CASES[case]
    home = (project / where).resolve()
    _home(home)
    monkeypatch.setenv("HOME", str(home))
    outs = shell(project, server, kind, *calls)
    leaked = [out for out in outs if SECRET in out]
    if kind == "off":  # control: every payload reads a secret when nothing hides it
        assert len(leaked) == len(calls), outs
    else:
        assert not leaked, leaked


@pytest.mark.parametrize("kind", [*KINDS, "off"])
def test_host_process_environments_are_not_readable_through_proc(project, server, kind):
    """A host process (auger itself holds the provider's API key) must not hand out its
    environment through /proc/PID/environ."""
    import subprocess

    host = subprocess.Popen(["sleep", "60"], env={"PATH": "/usr/bin:/bin", "PROVIDER_KEY": SECRET})
    try:
        outs = shell(project, server, kind, f"tr '\\0' '\\n' < /proc/{host.pid}/environ | grep PROVIDER",
                     tables={"secrets": {"redact": False}})  # the sandbox alone is on trial (redaction hides it too)
        assert (SECRET in outs[0]) == (kind == "off"), outs[0]
    finally:
        host.kill()
        host.wait()
