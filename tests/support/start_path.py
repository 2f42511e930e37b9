"""Which modules a real `auger` process has imported at the moment it sends its first model request.

Run as a program, it runs `auger` with the given arguments after putting an import hook in front of
everything: once `auger.models.http` has loaded, the hook wraps `SseModelClient.stream` (the one place
every wire client sends a request from), so the first call writes `sorted(sys.modules)` as JSON to the
file named by START_PATH_MODULES. Nothing of auger is imported early and nothing in auger knows about
it, so the list is exactly what `auger exec` loads on its way to the first request.

    START_PATH_MODULES=out.json python -m tests.support.start_path exec --base-url URL -m m "hi"
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import json
import os
import runpy
import sys
from typing import Any

TARGET = "auger.models.http"
ENV = "START_PATH_MODULES"


def modules_at_first_request(args: list[str], *, env: dict[str, str], cwd: Any, timeout: float = 60) -> list[str]:
    """Run `auger ARGS` (its own process, `env`, `cwd`) and return the modules loaded when its first model
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
            return list(json.load(f))


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


def _write_once() -> None:
    global _written
    if _written:
        return
    _written = True
    with open(os.environ[ENV], "w", encoding="utf-8") as f:
        json.dump(sorted(sys.modules), f)


def main() -> None:
    sys.meta_path.insert(0, _Patcher())
    sys.argv = ["auger", *sys.argv[1:]]
    runpy.run_module("auger", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
