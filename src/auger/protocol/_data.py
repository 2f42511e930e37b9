"""Tagged plain-data records with a JSON form.

Ops, events and items all share this: a dataclass with a `type` tag, `to_json()`
giving a dict with that tag first, and `from_json()` rebuilding the right class
(nested records included). No I/O, no third-party imports: every layer and every
front end imports this.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any, ClassVar, TypeVar

T = TypeVar("T", bound="Record")


class Record:
    """Base of every tagged record; subclasses are dataclasses registered by `tag`."""

    TYPE: ClassVar[str] = ""
    _registry: ClassVar[dict[str, type[Record]]]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.TYPE}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            out[f.name] = _dump(getattr(self, f.name))
        return out

    @classmethod
    def from_json(cls: type[T], data: dict[str, Any]) -> T:
        """Rebuild a record of this family from its JSON form; unknown keys are ignored."""
        tag = data.get("type")
        target = cls._registry.get(tag) if isinstance(tag, str) else None
        if target is None or not issubclass(target, cls):
            raise ValueError(f"unknown {cls.__name__} type: {tag!r}")
        return _load(target, data)  # type: ignore[return-value]


def family(base: type[T]) -> type[T]:
    """Give a Record subclass its own tag registry (ops, events, items)."""
    base._registry = {}
    return base


def tag(name: str):
    """Class decorator: make a dataclass and register it under `name` in its family."""

    def wrap(cls: type[T]) -> type[T]:
        cls = dataclasses.dataclass(cls)
        cls.TYPE = name
        registry = cls._registry
        if name in registry:
            raise TypeError(f"duplicate record tag {name!r}")
        registry[name] = cls
        return cls

    return wrap


def _dump(value: Any) -> Any:
    if isinstance(value, Record):
        return value.to_json()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _dump(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [_dump(v) for v in value]
    if isinstance(value, dict):
        return {k: _dump(v) for k, v in value.items()}
    return value


_hints_cache: dict[type, dict[str, Any]] = {}


def _load(cls: type, data: dict[str, Any]) -> Any:
    hints = _hints_cache.get(cls)
    if hints is None:
        hints = _hints_cache[cls] = typing.get_type_hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name not in data:
            continue
        value = data[f.name]
        hint = hints.get(f.name)
        if isinstance(value, dict) and isinstance(hint, type) and dataclasses.is_dataclass(hint):
            value = _load(hint, value)
        kwargs[f.name] = value
    return cls(**kwargs)
