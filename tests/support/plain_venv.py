"""A plain install of auger, as `pip install auger` leaves it: a venv with auger and its core dependencies
only, none of the extras, built without the network in well under a second.

The venv is made with `python -m venv --without-pip`; its site-packages gets a `.pth` naming the source
tree auger is imported from (the worktree's, under PYTHONPATH) and a symlink to every top-level entry
(package, module, `.dist-info`) of each distribution in the closure of pyproject.toml's core
`dependencies`, taken from this venv: each distribution's `requires` read through importlib.metadata, the
markers evaluated for this interpreter (an extra only where a requirement asked for it). `modules_missing`
says which of the extras' modules the venv still imports, so a test can check the venv is what it claims.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

import auger

SOURCE = Path(auger.__file__).resolve().parent.parent  # the `src` directory auger runs from
PYPROJECT = SOURCE.parent / "pyproject.toml"
# The top-level modules every optional extra of pyproject.toml brings (what auger imports from them).
EXTRA_MODULES = ("mcp", "acp", "starlette", "uvicorn", "websockets", "markdownify", "bs4", "pypdf", "psycopg",
                 "psycopg_pool", "pgqueuer", "opentelemetry", "tree_sitter", "tree_sitter_language_pack")


def core_requirements() -> list[Requirement]:
    with PYPROJECT.open("rb") as f:
        return [Requirement(spec) for spec in tomllib.load(f)["project"]["dependencies"]]


def closure(requirements: list[Requirement]) -> dict[str, metadata.Distribution]:
    """Every installed distribution the requirements need, by canonical name (each resolved once)."""
    found: dict[str, metadata.Distribution] = {}
    pending = list(requirements)
    asked: set[tuple[str, frozenset[str]]] = set()
    while pending:
        req = pending.pop()
        name = canonicalize_name(req.name)
        extras = frozenset(req.extras)
        if (name, extras) in asked:
            continue
        asked.add((name, extras))
        dist = found.get(name) or metadata.distribution(req.name)
        found[name] = dist
        for spec in dist.requires or ():
            needed = Requirement(spec)
            if needed.marker is None or any(needed.marker.evaluate({**default_environment(), "extra": extra})
                                            for extra in extras or {""}):
                pending.append(needed)
    return found


def top_levels(dist: metadata.Distribution) -> set[Path]:
    """The site-packages entries a distribution installed (packages, modules, its metadata directory)."""
    entries: set[Path] = set()
    for file in dist.files or ():
        parts = Path(file).parts
        if parts and parts[0] not in ("..", "__pycache__") and not parts[0].endswith(".pth"):
            entries.add(Path(str(dist.locate_file(parts[0]))))
    return entries


def build(target: Path) -> Path:
    """Make the plain venv in `target`; its python executable."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(target)], check=True, capture_output=True,
                   timeout=60)
    python = target / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                               check=True, capture_output=True, text=True, timeout=30).stdout.strip())
    (site / "auger-source.pth").write_text(f"{SOURCE}\n")
    for dist in closure(core_requirements()).values():
        for entry in top_levels(dist):
            link = site / entry.name
            if entry.exists() and not link.exists():
                link.symlink_to(entry)
    return python


def modules_missing(python: Path, modules: tuple[str, ...] = EXTRA_MODULES) -> dict[str, bool]:
    """Whether each module cannot be found by `python` (True: missing, as in a plain install)."""
    code = ("import importlib.util, json, sys\n"
            "def absent(m):\n"
            "    try:\n"
            "        return importlib.util.find_spec(m) is None\n"
            "    except ImportError:  # a dotted name whose parent is absent\n"
            "        return True\n"
            "print(json.dumps({m: absent(m) for m in sys.argv[1:]}))")
    out = subprocess.run([str(python), "-c", code, *modules], check=True, capture_output=True, text=True,
                         env=plain_env(), timeout=30).stdout
    return json.loads(out)


def plain_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """An environment for the plain venv: nothing on PYTHONPATH (the `.pth` names auger's source)."""
    return {k: v for k, v in (os.environ if env is None else env).items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}


@pytest.fixture(scope="session")
def plain_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The python of a plain install (built once per run), checked to import auger and none of the extras;
    pass it to harness.auger_cli as `python`."""
    python = build(tmp_path_factory.mktemp("plain-install") / "venv")
    present = [module for module, absent in modules_missing(python).items() if not absent]
    assert not present, f"the plain venv can import {present}: it is not a plain install"
    core = subprocess.run([str(python), "-c", "import auger.frontends.cli, auger.engine.session.session, jsonschema, rich"],
                          capture_output=True, text=True, env=plain_env(), timeout=60)
    assert core.returncode == 0, core.stderr
    return python
