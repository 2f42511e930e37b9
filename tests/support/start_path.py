"""What a real `auger` process has done by the moment it sends its first model request: the modules it
imported, the classes it made dataclasses, the dataclass methods and the regular expressions it compiled.

Run as a program, it runs `auger` with the given arguments after putting an import hook in front of
everything: once `auger.models.http` has loaded, the hook wraps `SseModelClient.stream` (the one place
every wire client sends a request from), so the first call writes what was done as JSON to the file named
by START_PATH_MODULES, with how often the garbage collector had walked its youngest generation. Making a
dataclass (`dataclasses._process_class`), compiling one of its methods (`dataclasses._create_fn`) and
compiling a pattern that is not in `re`'s cache (`re._compiler.compile`) are counted by wrapping the
standard library's private functions before anything runs. Nothing of auger is imported early and nothing
in auger knows about it, so the record is exactly what `auger exec` does on its way to the first request.

    START_PATH_MODULES=out.json python -m tests.support.start_path exec --base-url URL -m m "hi"
"""

from __future__ import annotations

import gc
import importlib.abc
import importlib.machinery
import json
import os
import runpy
import sys
from typing import Any, NamedTuple

TARGET = "auger.models.http"
ENV = "START_PATH_MODULES"


class FirstRequest(NamedTuple):
    """What the process had done when its first model request left."""

    modules: list[str]  # sys.modules, sorted (not the names recorded as absent: a None is no module)
    dataclasses: int  # classes made dataclasses (auger's and the libraries')
    regexes: int  # patterns compiled (re's cache misses)
    young_collections: int  # collections of the garbage collector's youngest generation (gc.get_stats)
    methods_compiled: int  # dataclass methods compiled (dataclasses._create_fn; 0 where Python has none)


def at_first_request(args: list[str], *, env: dict[str, str], cwd: Any, timeout: float = 60) -> FirstRequest:
    """Run `auger ARGS` (its own process, `env`, `cwd`) and return what it had done when its first model
    request left; AssertionError if the run failed or never sent one."""
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "modules.json")
        path = os.pathsep.join(p for p in (env.get("PYTHONPATH"), _repo_root()) if p)
        run = subprocess.run([sys.executable, "-m", "tests.support.start_path", *args], cwd=cwd,
                             env={**env, ENV: out, "PYTHONPATH": path}, capture_output=True, text=True,
                             timeout=timeout)
        assert run.returncode == 0, run.stderr
        assert os.path.exists(out), f"no model request was sent: {run.stderr}"
        with open(out, encoding="utf-8") as f:
            return FirstRequest(**json.load(f))


def _repo_root() -> str:
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class _Patcher(importlib.abc.MetaPathFinder):
    """Finds nothing itself: it lets the real finder find `auger.models.http`, then wraps its loader."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if name != TARGET:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _Loader(spec.loader)
                return spec
        return None


class _Loader(importlib.abc.Loader):
    def __init__(self, loader: Any) -> None:
        self._loader = loader

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self._loader.exec_module(module)
        original = module.SseModelClient.stream

        async def stream(client: Any, request: Any) -> Any:
            _write_once()
            async for event in original(client, request):
                yield event

        module.SseModelClient.stream = stream


_written = False
_made = {"dataclasses": 0, "regexes": 0, "methods_compiled": 0}


def _write_once() -> None:
    global _written
    if _written:
        return
    _written = True
    with open(os.environ[ENV], "w", encoding="utf-8") as f:
        json.dump({"modules": sorted(name for name, module in sys.modules.items() if module is not None), **_made,
                   "young_collections": gc.get_stats()[0]["collections"]}, f)


def _count(module: Any, name: str, what: str) -> None:
    """Count the calls of `module.name` in `_made[what]` (until the record is written)."""
    original = getattr(module, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        if not _written:
            _made[what] += 1
        return original(*args, **kwargs)

    setattr(module, name, counted)


def main() -> None:
    import dataclasses
    import re._compiler

    _count(dataclasses, "_process_class", "dataclasses")
    _count(re._compiler, "compile", "regexes")
    if hasattr(dataclasses, "_create_fn"):  # Python 3.11, 3.12 (what auger.dataclass_methods defers)
        _count(dataclasses, "_create_fn", "methods_compiled")
    sys.meta_path.insert(0, _Patcher())
    sys.argv = ["auger", *sys.argv[1:]]
    runpy.run_module("auger", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
