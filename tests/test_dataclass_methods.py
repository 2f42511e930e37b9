"""dataclass_methods: classes made while it is installed behave exactly as dataclasses made them."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from auger import dataclass_methods

deferring = sys.version_info < (3, 13)


@pytest.fixture
def installed(tmp_path) -> Iterator[None]:
    dataclass_methods.install(cache=tmp_path / "dataclass-init.bin")
    try:
        yield
    finally:
        dataclass_methods.uninstall()


def _kinds() -> dict[str, Any]:
    """The same classes, made by whichever builder is in place now."""

    @dataclasses.dataclass
    class Plain:
        a: int
        b: list[int] = dataclasses.field(default_factory=list)

    @dataclasses.dataclass(frozen=True)
    class Frozen:
        a: int
        b: str = "x"

    @dataclasses.dataclass(frozen=True, slots=True)
    class Slotted:
        a: int

    @dataclasses.dataclass(order=True)
    class Ordered:
        a: int
        b: int = 0

    @dataclasses.dataclass(frozen=True)
    class Child(Frozen):
        c: float = 1.5

    @dataclasses.dataclass(unsafe_hash=True)
    class Hashed:
        a: int

    @dataclasses.dataclass
    class Documented:
        """Its own docstring."""

        a: int

    return {"Plain": Plain, "Frozen": Frozen, "Slotted": Slotted, "Ordered": Ordered, "Child": Child,
            "Hashed": Hashed, "Documented": Documented}


def _behaviour(kinds: dict[str, Any]) -> list[Any]:
    """Everything a caller can see of the classes' generated methods."""
    seen: list[Any] = []
    plain = kinds["Plain"](1, [2])
    plain.b.append(plain)  # a recursive repr: dataclasses guards __repr__ against it
    seen += [repr(plain).replace(kinds["Plain"].__qualname__, "P"), plain == kinds["Plain"](1, [2]),
             kinds["Plain"].__hash__ is None]
    frozen = kinds["Frozen"](1)
    seen += [repr(frozen).split(".")[-1], frozen == kinds["Frozen"](1), frozen != kinds["Frozen"](2),
             hash(frozen) == hash((1, "x")), frozen == 1]
    for attempt in (lambda: setattr(frozen, "a", 3), lambda: delattr(frozen, "a")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            attempt()
    slotted = kinds["Slotted"](4)
    with pytest.raises(dataclasses.FrozenInstanceError):
        slotted.a = 5
    seen += [hash(slotted) == hash((4,)), copy.deepcopy(slotted) == slotted,
             not hasattr(slotted, "__dict__")]
    ordered = sorted([kinds["Ordered"](2), kinds["Ordered"](1, 5), kinds["Ordered"](1, 2)])
    seen += [[(o.a, o.b) for o in ordered], kinds["Ordered"](1) <= kinds["Ordered"](1)]
    child = kinds["Child"](1, "y", 2.0)
    seen += [repr(child).split(".")[-1], child == kinds["Child"](1, "y", 2.0), child == kinds["Frozen"](1, "y"),
             hash(child) == hash((1, "y", 2.0))]
    with pytest.raises(dataclasses.FrozenInstanceError):
        child.c = 0.0
    seen += [hash(kinds["Hashed"](7)) == hash((7,)), {kinds["Hashed"](7), kinds["Hashed"](7)} == {kinds["Hashed"](7)}]
    seen += [str(inspect.signature(kinds["Child"])), dataclasses.replace(child, c=3.0).c,
             dataclasses.asdict(child)]
    seen += [(kinds["Slotted"](1).__doc__, child.__doc__)]  # read through an instance first
    seen += [(name, kind.__doc__, kind.__doc__, inspect.getdoc(kind)) for name, kind in kinds.items()]
    return seen


def test_classes_made_while_installed_behave_as_dataclasses_makes_them(installed: None) -> None:
    deferred = _behaviour(_kinds())
    dataclass_methods.uninstall()
    assert deferred == _behaviour(_kinds())


@pytest.mark.skipif(not deferring, reason="Python 3.13 and later compile a class's methods at once")
def test_a_method_is_compiled_at_its_first_call_and_then_is_the_class_own(installed: None) -> None:
    @dataclasses.dataclass(frozen=True)
    class Point:
        x: int
        y: int

    assert Point.__init__.__code__.co_varnames[:3] == ("self", "x", "y")
    stand_in = Point.__dict__["__eq__"]
    assert stand_in.__code__.co_name == "stand_in"
    assert Point(1, 2) == Point(1, 2)
    method = Point.__dict__["__eq__"]
    assert method is not stand_in and method.__code__.co_name == "__eq__"
    assert method.__qualname__ == f"{Point.__qualname__}.__eq__"
    assert Point(1, 2) != Point(2, 1)  # the compiled one, from now on


@pytest.mark.skipif(not deferring, reason="Python 3.13 and later compile a class's methods at once")
def test_a_docstring_made_from_the_signature_is_written_when_first_read(installed: None) -> None:
    @dataclasses.dataclass(frozen=True, slots=True)
    class Point:
        x: int
        y: str = "a"

    assert not isinstance(Point.__dict__["__doc__"], str)
    assert Point.__doc__ == "Point(x: 'int', y: 'str' = 'a')"  # (this module's annotations are strings)
    assert Point.__dict__["__doc__"] == Point.__doc__  # written in its place

    class NotMade:
        x: int = "no default may follow"  # type: ignore[assignment]
        y: int

    with pytest.raises(TypeError):  # a class dataclasses refuses keeps no placeholder docstring
        dataclasses.dataclass(NotMade)
    assert NotMade.__doc__ is None


@pytest.mark.skipif(not deferring, reason="Python 3.13 and later compile a class's methods at once")
def test_a_subclass_that_inherits_a_stand_in_puts_the_method_on_the_class_it_came_from(installed: None) -> None:
    @dataclasses.dataclass(frozen=True)
    class Base:
        a: int

    class Sub(Base):  # not a dataclass: inherits Base's methods
        pass

    assert Sub(1) == Sub(1)
    assert Base.__dict__["__eq__"].__code__.co_name == "__eq__"
    assert "__eq__" not in Sub.__dict__


def test_the_command_line_installs_it_and_a_host_program_importing_auger_does_not() -> None:
    builder = "print(getattr(getattr(dataclasses, '_create_fn', None), '__module__', 'none'))"
    host = subprocess.run([sys.executable, "-c", f"import dataclasses, auger, auger.events; {builder}"],
                          capture_output=True, text=True, check=True)
    assert host.stdout.strip() in ("dataclasses", "none")
    command = ("import dataclasses\nfrom auger.frontends.cli import main\n"
               f"try:\n    main(['exec', '--help'])\nexcept SystemExit:\n    {builder}")
    cli = subprocess.run([sys.executable, "-c", command], capture_output=True, text=True, check=True)
    expected = "auger.dataclass_methods" if deferring else host.stdout.strip()
    assert cli.stdout.strip().splitlines()[-1] == expected


def test_auger_version_imports_neither_dataclasses_nor_asyncio() -> None:
    """`auger --version` answers before anything is installed: what it imports stays as small as it was."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-c",
                           "import sys; sys.argv = ['auger', '--version']\n"
                           "from auger.frontends.cli import main\nsys.exit(main())"],
                          capture_output=True, text=True, check=True)
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    assert "auger.frontends.cli" in imported and done.stdout.startswith("auger ")
    assert not imported & {"dataclasses", "asyncio", "auger.dataclass_methods", "auger.child_watch"}


_MAKE = """
import dataclasses, inspect, json, sys
from pathlib import Path
from auger import dataclass_methods
dataclass_methods.install(cache=Path(sys.argv[1]))
dataclass_methods.keep()

@dataclasses.dataclass
class Point:
    x: int
    y: "list[str]" = dataclasses.field(default_factory=list)
    z: float = 1.5

p = Point(1)
print(json.dumps({"new": dataclass_methods._COMPILED.new, "known": len(dataclass_methods._COMPILED.code),
                  "signature": str(inspect.signature(Point)), "annotations": repr(Point.__init__.__annotations__),
                  "file": Point.__init__.__code__.co_filename, "value": repr(p), "qualname": Point.__init__.__qualname__}))
"""


def _made(cache) -> dict:
    import json

    done = subprocess.run([sys.executable, "-c", _MAKE, str(cache)], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


@pytest.mark.skipif(not deferring, reason="Python 3.13 compiles a class's methods in one go: nothing to cache")
def test_init_is_compiled_once_a_machine_and_the_cached_code_is_what_exec_compiles(tmp_path) -> None:
    cache = tmp_path / "cache" / "dataclass-init.bin"
    first = _made(cache)
    assert first["new"] >= 1 and cache.exists()
    assert cache.stat().st_mode & 0o777 == 0o600
    again = _made(cache)
    assert again["new"] == 0 and again["known"] >= first["new"]  # every __init__ came from the cache
    assert {k: v for k, v in again.items() if k not in ("new", "known")} == \
        {k: v for k, v in first.items() if k not in ("new", "known")}
    assert "<class 'int'>" in again["annotations"]  # evaluated, as dataclasses' own exec leaves them
    assert again["file"] == "<string>" and again["value"] == "Point(x=1, y=[], z=1.5)"


@pytest.mark.skipif(not deferring, reason="Python 3.13 compiles a class's methods in one go: nothing to cache")
@pytest.mark.parametrize("content", [b"not marshal at all", b"", "foreign", "writable by others"])
def test_a_broken_or_foreign_cache_is_compiled_past_and_replaced(tmp_path, content) -> None:
    import marshal

    cache = tmp_path / "dataclass-init.bin"
    if content == "foreign":  # another Python's: its code objects are not read
        content = marshal.dumps(("2.7.18 (other)", {"def __create_fn__():\n pass": compile("1", "x", "eval")}))
    if content == "writable by others":  # code anyone could have put there is not run
        _made(cache)
        cache.chmod(0o666)
        assert _made(cache)["new"] >= 1
        return
    cache.write_bytes(content)
    made = _made(cache)
    assert made["new"] >= 1 and made["value"] == "Point(x=1, y=[], z=1.5)"
    assert _made(cache)["new"] == 0


def test_a_command_that_only_edits_the_config_writes_no_cache(tmp_path) -> None:
    home = tmp_path / "home"
    done = subprocess.run([sys.executable, "-m", "auger", "mcp", "list"], capture_output=True, text=True,
                          env={**os.environ, "AUGER_HOME": str(home)})
    assert done.returncode == 0, done.stderr
    assert not (home / "cache").exists()


@pytest.mark.skipif(not deferring, reason="Python 3.13 compiles a class's methods in one go: nothing to cache")
def test_a_server_lets_the_cache_go_once_it_serves(tmp_path) -> None:
    cache = tmp_path / "dataclass-init.bin"
    _made(cache)  # the cache holds Point's __init__
    done = subprocess.run([sys.executable, "-c", """
import dataclasses, sys
from pathlib import Path
from auger import dataclass_methods
dataclass_methods.install(cache=Path(sys.argv[1]))
dataclass_methods.keep()
assert dataclass_methods._COMPILED.code
dataclass_methods.release()

@dataclasses.dataclass
class Later:
    a: int

assert Later(1).a == 1 and not dataclass_methods._COMPILED.code
""", str(cache)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert _made(cache)["new"] == 0  # the file was left as it was, not emptied
