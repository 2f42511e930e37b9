"""Where auger keeps its config, data and cache (a module of its own: the command line asks before any other
of auger's modules is loaded, see dataclass_methods.py)."""

from __future__ import annotations

import os
from pathlib import Path


def home_dirs() -> dict[str, Path]:
    """Where auger keeps its config, data and cache; all under AUGER_HOME when it is set."""
    home = os.environ.get("AUGER_HOME")
    if home:
        base = Path(home).expanduser()
        return {"config": base, "data": base, "cache": base / "cache"}
    import platformdirs

    return {
        "config": Path(platformdirs.user_config_dir("auger", appauthor=False)),
        "data": Path(platformdirs.user_data_dir("auger", appauthor=False)),
        "cache": Path(platformdirs.user_cache_dir("auger", appauthor=False)),
    }
