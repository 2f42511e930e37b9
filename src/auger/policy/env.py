"""The environment a model-run command sees: the user's, minus anything that looks like a secret.

A command the model chose should not be able to read API keys it does not need;
names matching *KEY*, *SECRET*, *TOKEN*, *PASSWORD* (any case) are dropped unless
the user keeps them with `shell_env_include`. `shell_env_exclude` drops more,
`shell_env_set` sets values.
"""

from __future__ import annotations

import fnmatch
from typing import Iterable, Mapping

SECRET_PATTERNS = ("*KEY*", "*SECRET*", "*TOKEN*", "*PASSWORD*", "*PASSWD*", "*CREDENTIAL*")


def command_env(base: Mapping[str, str], *, include: Iterable[str] = (), exclude: Iterable[str] = (),
                set_values: Mapping[str, str] | None = None) -> dict[str, str]:
    keep = [p.upper() for p in include]
    drop = [p.upper() for p in (*SECRET_PATTERNS, *exclude)]
    env = {}
    for name, value in base.items():
        upper = name.upper()
        if _matches(upper, drop) and not _matches(upper, keep):
            continue
        env[name] = value
    env.update(set_values or {})
    return env


def _matches(name: str, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)
