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

A class given no docstring gets `Name(field: type, …)` as one, which dataclasses writes from
`inspect.signature` of the class: as much time again as the methods, for a text only `help()` reads. With
`install`, it is written when first read (a descriptor on the class, replaced by the text).

`__init__` itself is compiled once per machine: `dataclasses` writes its source and `exec`s it (0.1–0.3 ms a
class, 14 ms of the 170 classes a run with tools makes); `install` gives `dataclasses` an `exec` that looks the
source text up in a cache of code objects kept in auger's cache dir (`dataclass-init.<python>.bin`, marshal,
read once) and compiles only what it has not seen, exactly as `exec` would (no inherited `__future__` flags).
What a command that runs one session (`exec`, `resume`, `fork`, the terminal UI) compiled anew is added at its
exit (`keep`); `auger serve` reads it too, and lets it go when it starts serving (`release`). The cache dir is
hidden from the session's commands as all of auger's own files are, so no command a model runs can put code
there.

Only the command line installs it (`auger` on its way to a command; `import auger` changes nothing in a
host program), and only where `dataclasses` builds methods this way: Python 3.13 compiles a class's
methods in one go, and there `install` does nothing.
"""

from __future__ import annotations

import atexit
import dataclasses
import inspect
import marshal
import os
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from types import CodeType
from typing import Any

_EAGER = frozenset({"__init__"})  # called as the class is used, and inspected (signatures): made at once
_BUILD: Callable[..., Any] | None = getattr(dataclasses, "_create_fn", None)  # dataclasses' own (3.11, 3.12)
_PROCESS: Callable[..., Any] | None = getattr(dataclasses, "_process_class", None)
_PENDING = "(a dataclass being made)"  # a class's docstring while it is: dataclasses writes none then


CACHE_ENTRIES = 4096  # sources kept at most (a program making classes on the fly would grow it without end)


def install(cache: Path | None = None) -> None:
    """Defer the compiling of every dataclass method but `__init__` to its first call, and take `__init__`'s
    code from the compiled cache (`cache`: its file; by default in auger's cache dir), from now on, for every
    class made in this process (idempotent; a no-op where dataclasses has no `_create_fn`)."""
    if _BUILD is not None and _PROCESS is not None and sys.version_info < (3, 13):
        if "exec" not in vars(dataclasses):
            _COMPILED.load(cache if cache is not None else _default_cache())
        dataclasses._create_fn = _create_on_first_call  # type: ignore[attr-defined]
        dataclasses._process_class = _process_with_doc_on_demand  # type: ignore[attr-defined]
        dataclasses.exec = _COMPILED.exec  # type: ignore[attr-defined]  # (its globals come before builtins)


def release() -> None:
    """A server is about to serve, its start-up's classes made: let the cache's code go (what the classes made
    use stays theirs) and compile what comes later without keeping it — a long-running process would hold the
    whole cache for the few classes its sessions make later."""
    _COMPILED.code = {}
    _COMPILED.keeping = False


def keep() -> None:
    """Write what this process compiles anew into the cache at its exit (the commands that run sessions: a
    command that only edits the config leaves auger's cache dir as it was)."""
    atexit.register(_COMPILED.save)


def uninstall() -> None:
    """Give `dataclasses` its own builder back (classes already made keep their stand-ins, which work)."""
    if _BUILD is not None and _PROCESS is not None:
        dataclasses._create_fn = _BUILD  # type: ignore[attr-defined]
        dataclasses._process_class = _PROCESS  # type: ignore[attr-defined]
        vars(dataclasses).pop("exec", None)
        atexit.unregister(_COMPILED.save)
        _COMPILED.save()


def _default_cache() -> Path:
    from auger.home import home_dirs

    return home_dirs()["cache"] / f"dataclass-init.{sys.implementation.cache_tag}.bin"


class _Compiled:
    """Source text -> code, as `exec(text)` in dataclasses would compile it; read from a file once, and what
    was compiled anew written back (`save`). A file another Python wrote, or that is not what this writes,
    is not read."""

    def __init__(self) -> None:
        self.path: Path | None = None
        self.code: dict[str, CodeType] = {}
        self.new = 0
        self.keeping = True  # whether what is compiled is kept (`release` stops it)

    def load(self, path: Path) -> None:
        """Read the cache, if it is this user's own file and no one else may write it: it is code this process
        runs."""
        self.path = path
        try:
            with open(os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC), "rb") as source:
                st = os.fstat(source.fileno())
                if st.st_uid != os.getuid() or st.st_mode & 0o022:
                    return
                kept = marshal.loads(source.read())
        except (OSError, ValueError, EOFError, TypeError):
            return
        if isinstance(kept, tuple) and len(kept) == 2 and kept[0] == sys.version and isinstance(kept[1], dict):
            self.code = {k: v for k, v in kept[1].items() if isinstance(k, str) and isinstance(v, CodeType)}

    def exec(self, source: Any, globals: dict[str, Any] | None = None, locals: Any = None) -> None:
        if isinstance(source, str):
            code = self.code.get(source)
            if code is None:
                code = compile(source, "<string>", "exec", dont_inherit=True)  # as dataclasses' own exec would
                if self.keeping and len(self.code) < CACHE_ENTRIES:
                    self.code[source] = code
                    self.new += 1
            source = code
        exec(source, globals, locals)

    def save(self) -> None:
        """Write the cache back if this run compiled anything anew (at exit): whole, to a new file renamed in
        place, so a reader sees the old file or the new one; a failure only means compiling again."""
        if not (self.new and self.keeping) or self.path is None:
            return
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.unlink(tmp)  # one a killed run left (or anything planted there: never written through)
            except FileNotFoundError:
                pass
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(marshal.dumps((sys.version, self.code)))
            os.replace(tmp, self.path)
            self.new = 0
        except OSError:
            try:
                os.unlink(tmp)
            except OSError:
                pass


_COMPILED = _Compiled()


def _process_with_doc_on_demand(cls: type, *args: Any, **kwargs: Any) -> type:
    """`dataclasses._process_class`, leaving the docstring it would write from the signature to be written
    when first read."""
    process = _PROCESS
    assert process is not None  # installed only where dataclasses has it
    if getattr(cls, "__doc__", None):  # its own docstring (dataclasses' test): kept
        return process(cls, *args, **kwargs)
    cls.__doc__ = _PENDING
    try:
        made: type = process(cls, *args, **kwargs)
    except BaseException:
        cls.__doc__ = None
        raise
    made.__doc__ = _SignatureDoc()  # type: ignore[assignment]  # (a new class, for slots)
    return made


class _SignatureDoc:
    """A dataclass's docstring as dataclasses writes it, `Name(field: type, …)`, made on first reading and
    then put on the class in its place (`type.__doc__` calls a descriptor found in the class's dict)."""

    def __get__(self, instance: object, owner: type | None = None) -> str:
        klass = owner if owner is not None else type(instance)
        try:
            text = str(inspect.signature(klass)).replace(" -> None", "")
        except (TypeError, ValueError):
            text = ""
        doc = klass.__name__ + text
        if klass.__dict__.get("__doc__") is self:
            klass.__doc__ = doc
        return doc


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
