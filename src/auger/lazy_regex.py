"""Regular expressions compiled when first used, not when their module is imported.

Why: a module-level `re.compile` runs at import, and `auger exec` imports a few hundred patterns' worth of
modules before its first model request while using only some of those patterns there (a sandbox's error
messages, a skill file's front matter, a rate-limit header). `lazy_compile` gives an object that stands for
the compiled pattern: its first use compiles it, and from then on its methods are the pattern's own bound
methods (kept on the instance), so a hot loop pays what it would with `re.compile`. Standard library only.
"""

from __future__ import annotations

import re
from typing import Any, cast

_METHODS = ("search", "match", "fullmatch", "finditer", "findall", "sub", "subn", "split", "scanner")


class _LazyPattern:
    """`re.compile(pattern, flags)` at the first attribute asked for."""

    def __init__(self, pattern: str, flags: int) -> None:
        self._source = (pattern, flags)
        self.pattern = pattern  # what a compiled pattern says, known without compiling (patterns join others)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):  # copy, pickle and friends ask for dunders: not a use
            raise AttributeError(name)
        compiled = re.compile(*self._source)
        for method in _METHODS:
            setattr(self, method, getattr(compiled, method))
        self.flags, self.groups, self.groupindex = compiled.flags, compiled.groups, compiled.groupindex
        return getattr(compiled, name)

    def __repr__(self) -> str:
        return repr(re.compile(*self._source))


def lazy_compile(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """A pattern that compiles at its first use; typed as the compiled pattern it behaves as."""
    return cast("re.Pattern[str]", _LazyPattern(pattern, flags))
