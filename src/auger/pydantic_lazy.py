"""Import a pydantic-built protocol SDK without paying at import for what auger never uses.

The ACP SDK declares 280 pydantic models; importing it costs a second of CPU, which every `auger acp`
an editor starts and every agent backend auger talks to pays before its first message. Two things
pydantic does as each class is made account for most of it and are not needed by auger:

- the fields' docstrings, read back from the module's source (`use_attribute_docstrings`): on Python
  before 3.13 pydantic finds each class's source by walking the stack and reading the file again, for
  every class. They only become `description`s in a JSON schema, which auger never asks the SDK for.
- each model's validator and serializer, built eagerly; a session uses a few dozen of the models.
  With `defer_build` pydantic builds a model's at its first use instead: the same code, later.

`imported(module)` imports a module with both switched off for the classes made meanwhile, then puts
pydantic back as it was. It relies on two of pydantic's internal names; where they are not what this
expects (another pydantic), the module is imported as usual — slower, never different.
"""

from __future__ import annotations

import importlib
import sys
import threading
from types import ModuleType
from typing import Any

_lock = threading.Lock()


def imported(name: str) -> ModuleType:
    """`importlib.import_module(name)`, its pydantic models made without docstrings and built at first use."""
    module = sys.modules.get(name)
    if module is not None:
        return module
    with _lock:
        patches = _patches()
        if patches is None:
            return importlib.import_module(name)
        originals = [(owner, attr, getattr(owner, attr)) for owner, attr, _ in patches]
        for owner, attr, replacement in patches:
            setattr(owner, attr, replacement)
        try:
            return importlib.import_module(name)
        finally:
            for owner, attr, original in originals:
                setattr(owner, attr, original)


def _patches() -> list[tuple[Any, str, Any]] | None:
    """(owner, attribute, replacement) for pydantic's docstring reader and model config, or None."""
    try:
        from pydantic._internal import _config, _fields
    except ImportError:
        return None
    wrapper = getattr(_config, "ConfigWrapper", None)
    for_model = getattr(getattr(wrapper, "for_model", None), "__func__", None)
    if for_model is None or not callable(getattr(_fields, "extract_docstrings_from_cls", None)):
        return None

    def no_docstrings(cls: type, use_inspect: bool = False) -> dict[str, str]:
        return {}

    def deferred(cls: type, *args: Any, **kwargs: Any) -> Any:
        config = for_model(cls, *args, **kwargs)
        config.config_dict.setdefault("defer_build", True)
        return config

    return [(_fields, "extract_docstrings_from_cls", no_docstrings), (wrapper, "for_model", classmethod(deferred))]
