"""Where the suite keeps what it fetched once and reuses on every later run (npm packages the tests run):
outside the checkout and any test's temporary directory, as `.ci/run` fills it before the suite starts."""

from __future__ import annotations

import os
from pathlib import Path


def cached(name: str) -> Path:
    """`name`'s directory under the user's cache dir (`XDG_CACHE_HOME`, else ~/.cache) /auger-tests."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "auger-tests" / name
