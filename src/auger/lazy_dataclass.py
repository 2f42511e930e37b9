"""`@dataclass` for a class that becomes a dataclass at its first use, not when its module is imported.

Why: making a dataclass generates the source of its methods (`__init__`, `__repr__`, `__eq__`, a frozen
class's `__setattr__`, ...) and compiles it, about a millisecond a class, and `auger exec` imports well
over a hundred of them on its way to the first model request while using less than half there (most
protocol records, the reply's stream events, a store's team records come later or never). Deferring
the work to the first use takes it off that path and costs nothing afterwards.

A class that derives from `Deferred` and is decorated with this module's `dataclass` is registered as it
is defined and made a dataclass — exactly what `dataclasses.dataclass(cls, **options)` makes of it — at
its first use: its first instance (`Deferred.__init__` stands in until the class has its own), or the
first look at what only a dataclass has (`__dataclass_fields__`, `__dataclass_params__`,
`__match_args__`: `dataclasses.fields`, `is_dataclass`, `asdict`, a dataclass deriving from it), which
stand-in descriptors answer by making the class first. The stand-in `__init__` lives on the base, so a
thread that makes an instance while another makes the class waits for it (on the lock) instead of seeing
half a class. What the stand-ins cannot cover is made at once: a class not deriving from `Deferred`, one
with `slots` (a new class would replace the one already bound), `order` (a decorator above may look for
the comparisons), `init=False`, or its own `__init__` or `__match_args__`; and a `field(default=...)` read
from the class before its first use is the Field, not the value (a plain default is the value).

For type checkers `dataclass` is `dataclasses.dataclass` itself. Standard library only.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import TYPE_CHECKING, Any

__all__ = ["Deferred", "dataclass"]

_ASKED = ("__dataclass_fields__", "__dataclass_params__", "__match_args__")
_unfinished: dict[type, dict[str, Any]] = {}  # class -> its dataclass options, until it is made
_lock = threading.RLock()  # one thread makes a class; its bases are made (re-entrantly) first


class Deferred:
    """Base of the classes this module's `dataclass` makes dataclasses at their first use."""

    __slots__ = ()  # a subclass with slots (made at once) keeps them: no instance dict comes from here

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """Stands in for the dataclass's `__init__` until its class is made (see the module docstring)."""
        cls = type(self)
        _finish(cls)
        if cls.__init__ is Deferred.__init__:  # not a class this module defers: as if Deferred were not there
            super().__init__(*args, **kwargs)
        else:
            cls.__init__(self, *args, **kwargs)


def _finish(cls: type) -> None:
    """Make the deferred classes among `cls` and its bases dataclasses, bases first; a class another thread
    is making is waited for."""
    with _lock:
        for klass in reversed(cls.__mro__):
            options = _unfinished.pop(klass, None)
            if options is None:
                continue
            if isinstance(klass.__dict__.get("__match_args__"), _Asked):
                del klass.__match_args__  # type: ignore[attr-defined]  # a dataclass sets only what is missing
            dataclasses.dataclass(klass, **options)


class _Asked:
    """Stands for a dataclass attribute of a deferred class: reading it makes the class, then reads it."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        cls = owner if owner is not None else type(instance)
        _finish(cls)
        return getattr(cls if instance is None else instance, self._name)


def _deferrable(cls: type, options: dict[str, Any]) -> bool:
    if options.get("slots") or options.get("order") or options.get("init") is False:
        return False
    return issubclass(cls, Deferred) and "__init__" not in cls.__dict__ and "__match_args__" not in cls.__dict__


def _defer(cls: type, options: dict[str, Any]) -> type:
    if not _deferrable(cls, options):
        return dataclasses.dataclass(cls, **options)
    with _lock:
        for name in _ASKED:
            setattr(cls, name, _Asked(name))
        _unfinished[cls] = options
    return cls


if TYPE_CHECKING:
    from dataclasses import dataclass as dataclass
else:
    def dataclass(cls=None, /, **options):
        """`dataclasses.dataclass(cls, **options)`, done at the class's first use (see the module docstring)."""
        if cls is None:
            return lambda klass: _defer(klass, options)
        return _defer(cls, options)
