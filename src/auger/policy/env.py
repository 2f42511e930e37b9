"""The environment a model-run command sees: an allow-list of the user's, never their secrets.

A deny-list of secret-looking names always misses some (MYSQL_PWD, DATABASE_URL, GITHUB_PAT,
a vendor's FOO_CREDENTIAL), so commands get only what a build or a test run plausibly needs:

- the path and the locale: PATH, LANG, LANGUAGE, LC_*, TZ;
- who and where: HOME, USER, LOGNAME, SHELL, PWD, TMPDIR;
- the terminal: TERM, COLORTERM, NO_COLOR (the shell tool sets TERM=dumb, PAGER=cat itself);
- the active Python environment (VIRTUAL_ENV, which PATH already points into);
- where the system's TLS roots are (SSL_CERT_FILE, SSL_CERT_DIR, REQUESTS_CA_BUNDLE,
  NODE_EXTRA_CA_CERTS): file paths, not secrets, and package installs fail without them on
  machines with a private CA.

Left out on purpose: EDITOR/VISUAL/PAGER (programs that would block a command that has no
terminal; the shell tool sets its own pager), SSH_AUTH_SOCK and SSH_TTY (an agent socket is a
credential; the tty says nothing useful), DISPLAY/XDG_RUNTIME_DIR (doors to host sockets),
and any proxy settings (the session's egress proxy sets its own).

The user widens it with `shell_env_include`: an exact name is kept whatever it is called (the
user asked for that variable), but a glob (`AWS_*`) never brings in a name that looks like a
secret. `shell_env_exclude` drops names even from the allow-list; `shell_env_set` sets values.
"""

from __future__ import annotations

import fnmatch
from typing import Iterable, Mapping

BASE_NAMES = frozenset("""
    PATH HOME USER LOGNAME SHELL PWD TMPDIR TZ LANG LANGUAGE TERM COLORTERM NO_COLOR VIRTUAL_ENV
    SSL_CERT_FILE SSL_CERT_DIR REQUESTS_CA_BUNDLE NODE_EXTRA_CA_CERTS
""".split())
BASE_PATTERNS = ("LC_*",)

# Names a glob include never matches: they look like credentials or carry them (a URL with a password).
SECRET_PATTERNS = ("*KEY*", "*SECRET*", "*TOKEN*", "*PASSWORD*", "*PASSWD*", "*PWD*", "*PASS", "*PASSPHRASE*",
                   "*CREDENTIAL*", "*AUTH*", "*COOKIE*", "*SESSION*", "*PRIVATE*", "*_PAT", "*_PAT_*", "*DSN*",
                   "*_URL", "*_URI", "*CONN*", "*CERT*", "*SIGNING*", "*OTP*")


def command_env(base: Mapping[str, str], *, include: Iterable[str] = (), exclude: Iterable[str] = (),
                set_values: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables of `base` a command may see, then `set_values` on top."""
    exact = {p.upper() for p in include if not _is_glob(p)}
    globs = [p.upper() for p in include if _is_glob(p)]
    drop = [p.upper() for p in exclude]
    env = {}
    for name, value in base.items():
        upper = name.upper()
        if _matches(upper, drop):
            continue
        if (name in BASE_NAMES or _matches(name, BASE_PATTERNS) or upper in exact
                or (_matches(upper, globs) and not _matches(upper, SECRET_PATTERNS))):
            env[name] = value
    env.update(set_values or {})
    return env


def _is_glob(pattern: str) -> bool:
    return any(ch in pattern for ch in "*?[")


def _matches(name: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)
