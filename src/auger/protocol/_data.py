"""Tagged plain-data records with a JSON form.

Ops, events and items all share this: a dataclass with a `type` tag, `to_json()`
giving a dict with that tag first, and `from_json()` rebuilding the right class
(nested records, lists of records and enums included, guided by the field type hints).
No I/O, no third-party imports: every layer and every front end imports this.

A record is made a dataclass at its first use, not when its module is imported (lazy_dataclass.py):
a process uses a few of the eighty, and making them all was most of what importing the protocol cost.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from typing import Any, Callable, ClassVar, TypeVar, cast

from auger.lazy_dataclass import Deferred, dataclass

T = TypeVar("T", bound="Record")


class Record(Deferred):
    """Base of every tagged record; subclasses are dataclasses registered by `tag`."""

    TYPE: ClassVar[str] = ""
    _registry: ClassVar[dict[str, type[Record]]]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": self.TYPE}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]  # every tagged subclass is a dataclass
            out[json_name(f)] = _dump(getattr(self, f.name))
        return out

    @classmethod
    def from_json(cls: type[T], data: dict[str, Any]) -> T:
        """Rebuild a record of this family from its JSON form; unknown keys are ignored, a value that
        is not one of an enum's members is a ValueError."""
        tag = data.get("type")
        target = cls._registry.get(tag) if isinstance(tag, str) else None
        if target is None or not issubclass(target, cls):
            raise ValueError(f"unknown {cls.__name__} type: {tag!r}")
        return cast(T, load(target, data))  # issubclass(target, cls) was checked just above

    @classmethod
    def registry(cls) -> dict[str, type[Record]]:
        """Every record class of this family by tag (the schema generator walks it)."""
        return dict(cls._registry)


def family(base: type[T]) -> type[T]:
    """Give a Record subclass its own tag registry (ops, events, items)."""
    base._registry = {}
    return base


@typing.dataclass_transform(field_specifiers=(dataclasses.field, dataclasses.Field))
def tag(name: str) -> Callable[[type[T]], type[T]]:
    """Class decorator: make a dataclass (at its first use) and register it under `name` in its family.

    `dataclass_transform` tells type checkers the decorated class is a dataclass, so they check
    constructor calls against its fields."""

    def wrap(cls: type[T]) -> type[T]:
        cls = dataclass(cls)
        cls.TYPE = name
        registry = cls._registry
        if name in registry:
            raise TypeError(f"duplicate record tag {name!r}")
        registry[name] = cls
        return cls

    return wrap


def json_name(f: dataclasses.Field[Any]) -> str:
    """A field's key in the JSON form: its name, or the one its metadata gives (`field(metadata={"json":
    "from"})`) where the JSON word is a Python keyword."""
    return str(f.metadata.get("json", f.name))


def _dump(value: Any) -> Any:
    if isinstance(value, Record):
        return value.to_json()
    if isinstance(value, enum.Enum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {json_name(f): _dump(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [_dump(v) for v in value]
    if isinstance(value, dict):
        return {k: _dump(v) for k, v in value.items()}
    return value


_hints_cache: dict[type, dict[str, Any]] = {}


def field_hints(cls: type) -> dict[str, Any]:
    """The resolved type hints of a dataclass's fields (cached: resolving them is slow)."""
    hints = _hints_cache.get(cls)
    if hints is None:
        hints = _hints_cache[cls] = typing.get_type_hints(cls)
    return hints


def load(cls: type, data: dict[str, Any]) -> Any:
    """Build dataclass `cls` from a JSON object, converting each field by its type hint."""
    hints = field_hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        key = json_name(f)
        if key in data:
            kwargs[f.name] = _coerce(hints.get(f.name, Any), data[key])
    return cls(**kwargs)


def _coerce(hint: Any, value: Any) -> Any:
    """`value` (parsed JSON) as the type `hint` names: enums, nested dataclasses, lists and dicts of
    them; anything else is passed through as it is."""
    if value is None or hint is Any:
        return value
    origin = typing.get_origin(hint)
    if origin is typing.Union or origin is types.UnionType:
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        return _coerce(options[0], value) if len(options) == 1 else value
    if origin is list and isinstance(value, list):
        (item,) = typing.get_args(hint) or (Any,)
        return [_coerce(item, v) for v in value]
    if origin is dict and isinstance(value, dict):
        _, item = typing.get_args(hint) or (str, Any)
        return {k: _coerce(item, v) for k, v in value.items()}
    if isinstance(hint, type):
        if issubclass(hint, enum.Enum):
            return hint(value)
        if dataclasses.is_dataclass(hint) and isinstance(value, dict):
            return load(hint, value)
    return value
