"""A dataclass's methods other than `__init__` are compiled when first called, not when the class is made.

Why: on Python 3.11 and 3.12 making a dataclass writes the source of each method it adds (`__init__`,
`__repr__`, `__eq__`, a frozen class's `__setattr__`, `__delattr__` and `__hash__`) and compiles each on
its own, about 0.12 ms a method. The 77 dataclasses `auger exec` makes on its way to its first model
request (its own and its libraries') spend 40–55 ms there, a sixth of the whole start, on methods most
of them never call in a short run. `install` makes `dataclasses` hand out, for every method but
`__init__`, a stand-in that compiles the very method dataclasses would have compiled, from the same
source, at its first call, puts it in the stand-in's place on the class, and calls it; from then on the
class has exactly what it would have had. `__init__` is compiled at once: it is called at once, and tools
read its signature.

Only the command line installs it (`auger` on its way to a command; `import auger` changes nothing in a
host program), and only where `dataclasses` builds methods this way: Python 3.13 compiles a class's
methods in one go, and there `install` does nothing.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Iterable
from typing import Any

_EAGER = frozenset({"__init__"})  # called as the class is used, and inspected (signatures): made at once
_BUILD: Callable[..., Any] | None = getattr(dataclasses, "_create_fn", None)  # dataclasses' own (3.11, 3.12)


def install() -> None:
    """Defer the compiling of every dataclass method but `__init__` to its first call, from now on, for
    every class made in this process (idempotent; a no-op where dataclasses has no `_create_fn`)."""
    if _BUILD is not None and sys.version_info < (3, 13):
        dataclasses._create_fn = _create_on_first_call  # type: ignore[attr-defined]


def uninstall() -> None:
    """Give `dataclasses` its own builder back (classes already made keep their stand-ins, which work)."""
    if _BUILD is not None:
        dataclasses._create_fn = _BUILD  # type: ignore[attr-defined]


def _create_on_first_call(name: str, args: Iterable[str], body: Iterable[str], *,
                          globals: dict[str, Any] | None = None, locals: dict[str, Any] | None = None,
                          return_type: Any = dataclasses.MISSING) -> Callable[..., Any]:
    """`dataclasses._create_fn` with the same arguments: the method itself for `__init__`, else a stand-in."""
    create = _BUILD
    assert create is not None  # installed only where dataclasses has it
    if name in _EAGER:
        return create(name, args, body, globals=globals, locals=locals, return_type=return_type)
    args, body = tuple(args), tuple(body)
    local_values = dict(locals) if locals else None  # dataclasses may add to the dict it passed afterwards

    made: list[Callable[..., Any]] = []  # the method, once compiled

    def stand_in(self: Any, *rest: Any) -> Any:
        if not made:
            method = create(name, args, body, globals=globals, locals=local_values, return_type=return_type)
            method.__qualname__ = stand_in.__qualname__  # the class's, as dataclasses set it on the stand-in
            made.append(method)
            for klass in type(self).__mro__:  # the class it was made for (a subclass may inherit it) gets
                if klass.__dict__.get(name) is stand_in:  # the method itself; `__repr__`'s recursion guard
                    setattr(klass, name, method)  # wraps the stand-in, which stays and calls it
                    break
        return made[0](self, *rest)

    stand_in.__name__ = stand_in.__qualname__ = name
    if globals is not None and "__name__" in globals:
        stand_in.__module__ = globals["__name__"]
    return stand_in
