"""A deferred dataclass (auger/lazy_dataclass.py) is, from its first use on, exactly the dataclass
`dataclasses.dataclass` makes of the same class; before it, nothing of the dataclass has been made."""

from __future__ import annotations

import dataclasses
import inspect
import subprocess
import sys
import threading
from dataclasses import field

import pytest

from auger.lazy_dataclass import Deferred, dataclass


def _twins(**options):
    """The same class made twice: by `dataclasses.dataclass` and by the deferring decorator."""

    def body(base: tuple[type, ...]):
        class Point(*base):  # type: ignore[misc]
            x: int
            y: int = 0
            tags: list[str] = field(default_factory=list)

        return Point

    return dataclasses.dataclass(body(()), **options), dataclass(body((Deferred,)), **options)


@pytest.mark.parametrize("options", [{}, {"frozen": True}, {"eq": False}, {"kw_only": True}])
def test_the_deferred_class_behaves_as_the_dataclass(options):
    eager, lazy = _twins(**options)
    assert "__init__" not in lazy.__dict__  # nothing made yet
    make = (lambda cls: cls(x=1, y=2)) if options.get("kw_only") else (lambda cls: cls(1, 2))
    a, b = make(eager), make(lazy)
    assert repr(a) == repr(b) and (a == make(eager)) == (b == make(lazy))
    assert [f.name for f in dataclasses.fields(a)] == [f.name for f in dataclasses.fields(b)]
    assert dataclasses.asdict(a) == dataclasses.asdict(b)
    assert eager.__doc__ == lazy.__doc__ and str(inspect.signature(eager)) == str(inspect.signature(lazy))
    assert getattr(eager, "__match_args__", None) == getattr(lazy, "__match_args__", None)
    assert (eager.__hash__ is None) == (lazy.__hash__ is None)
    assert dataclasses.replace(b, y=5).y == 5
    if options.get("frozen"):
        with pytest.raises(dataclasses.FrozenInstanceError):
            b.x = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        lazy()  # a missing argument is refused as the dataclass refuses it


def test_a_look_at_the_class_makes_it_and_a_subclass_gets_its_fields():
    eager, lazy = _twins()
    assert dataclasses.is_dataclass(lazy) and "__init__" in lazy.__dict__
    _, base = _twins()

    @dataclasses.dataclass
    class Labelled(base):  # type: ignore[misc, valid-type]
        label: str = ""

    assert [f.name for f in dataclasses.fields(Labelled)] == ["x", "y", "tags", "label"]
    assert Labelled(1, label="a").label == "a"


def _first_instances_at_once(cls: type, threads: int) -> tuple[list, list]:
    """(instances, errors) of `threads` threads each making `cls(1)` at the same moment."""
    start, made, errors = threading.Barrier(threads), [], []

    def build():
        start.wait()
        try:
            made.append(cls(1))
        except BaseException as exc:  # noqa: BLE001 - any failure is the finding
            errors.append(exc)

    running = [threading.Thread(target=build) for _ in range(threads)]
    for t in running:
        t.start()
    for t in running:
        t.join()
    return made, errors


def test_threads_making_the_first_instances_at_once_all_get_whole_instances():
    for _ in range(20):
        _, lazy = _twins(frozen=True)
        made, errors = _first_instances_at_once(lazy, 8)
        assert not errors and len(made) == 8 and all(p == lazy(1) for p in made)


def test_what_cannot_be_deferred_is_made_at_once():
    @dataclass(order=True)
    class Ordered(Deferred):
        n: int

    @dataclass
    class Plain:  # not a Deferred: nothing stands in for it
        n: int

    @dataclass(slots=True)
    class Slotted(Deferred):  # made at once, and its instances have no dict (Deferred has no slots of its own)
        n: int

    assert "__init__" in Ordered.__dict__ and "__init__" in Plain.__dict__ and "__init__" in Slotted.__dict__
    assert not hasattr(Slotted(1), "__dict__")


_IMPORTED = """
from auger import protocol, models, store, tools
import auger.models.base, auger.store.base, auger.tools.base, auger.protocol.events, auger.protocol.ops
from auger.lazy_dataclass import _unfinished
print(len(_unfinished))
"""


def test_importing_the_records_makes_none_of_them():
    run = subprocess.run([sys.executable, "-c", _IMPORTED], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert int(run.stdout) > 90  # protocol records, stream events, store and tool records: all still deferred
