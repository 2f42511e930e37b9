"""The JSON Schema of the protocol, generated from the records' fields and type hints.

Nothing here is written by hand: each op, event and item class becomes a `$defs` entry (its `type`
tag as a constant, its fields as properties, the fields without a default required, nothing else
allowed), nested records and enums become their own `$defs`, and `Envelope` is one event's fields
plus the envelope's, as `auger exec --json` prints them. `auger schema` prints the document and
docs/protocol.schema.json holds a copy that a test keeps current.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from typing import Any

from auger.protocol._data import Record, field_hints, json_name
from auger.protocol.envelope import Envelope
from auger.protocol.events import PROTOCOL_VERSION, Event
from auger.protocol.items import Item
from auger.protocol.ops import Op

DRAFT = "https://json-schema.org/draft/2020-12/schema"
FAMILIES: tuple[type[Record], ...] = (Op, Event, Item)
_SCALARS = {str: "string", int: "integer", float: "number", bool: "boolean", type(None): "null"}


def def_name(family: type[Record], tag: str) -> str:
    """The `$defs` key of one record type, e.g. `Event.turn_started`."""
    return f"{family.__name__}.{tag}"


def protocol_schema() -> dict[str, Any]:
    defs: dict[str, Any] = {}
    for family in FAMILIES:
        registry = family.registry()
        for tag, cls in registry.items():
            defs[def_name(family, tag)] = _record(cls, defs, tag)
        defs[family.__name__] = {"oneOf": [_ref(def_name(family, tag)) for tag in registry]}
    envelope_fields = _fields(Envelope, defs, skip=frozenset({"event"}))
    lines = []
    for tag in Event.registry():
        event = defs[def_name(Event, tag)]
        lines.append({"type": "object", "properties": {**event["properties"], **envelope_fields["properties"]},
                      "required": list(dict.fromkeys([*event["required"], *envelope_fields["required"]])),
                      "additionalProperties": False})
    defs["Envelope"] = {"description": "One event with its envelope, as one flat object (a line of `auger exec "
                                       "--json`, a row of the events table).", "oneOf": lines}
    return {"$schema": DRAFT, "$id": "https://auger.dev/schema/protocol.json", "title": "auger protocol",
            "description": f"Ops, events (in envelopes) and items of protocol version {PROTOCOL_VERSION}.",
            "x-protocol-version": PROTOCOL_VERSION, "$defs": dict(sorted(defs.items()))}


def schema_text(schema: dict[str, Any]) -> str:
    """The schema as the file docs/protocol.schema.json holds it (stable key order, final newline)."""
    import json

    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/$defs/{name}"}


def _record(cls: type, defs: dict[str, Any], tag: str | None = None) -> dict[str, Any]:
    schema = _fields(cls, defs)
    if tag is not None:
        schema["properties"] = {"type": {"const": tag}, **schema["properties"]}
        schema["required"] = ["type", *schema["required"]]
    return _described(cls, schema)


def _described(cls: type, schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` with the class docstring as its description (not a dataclass's generated signature,
    nor the docstring an enum inherits)."""
    doc = (cls.__doc__ or "") if "__doc__" in vars(cls) else ""  # (read through: it may be written on demand)
    if not doc.strip() or doc.startswith(f"{cls.__name__}("):
        return schema
    return {"description": " ".join(doc.split()), **schema}


def _fields(cls: type, defs: dict[str, Any], skip: frozenset[str] = frozenset()) -> dict[str, Any]:
    hints = field_hints(cls)
    properties, required = {}, []
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        properties[json_name(f)] = _type(hints[f.name], defs)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            required.append(json_name(f))
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


def _type(hint: Any, defs: dict[str, Any]) -> dict[str, Any]:
    if hint is Any:
        return {}
    origin = typing.get_origin(hint)
    if origin is typing.Union or origin is types.UnionType:
        return {"anyOf": [_type(arg, defs) for arg in typing.get_args(hint)]}
    if origin is list:
        args = typing.get_args(hint)
        return {"type": "array", "items": _type(args[0], defs)} if args else {"type": "array"}
    if origin is dict:
        args = typing.get_args(hint)
        values = _type(args[1], defs) if args else {}
        # `dict[str, Any]` is a plain `dict`: an empty value schema already allows anything
        return {"type": "object", "additionalProperties": values} if values else {"type": "object"}
    if hint in (list, dict):
        return {"type": "array" if hint is list else "object"}
    if hint in _SCALARS:
        return {"type": _SCALARS[hint]}
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        defs.setdefault(hint.__name__, _described(hint, {"enum": [m.value for m in hint]}))
        return _ref(hint.__name__)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        if hint.__name__ not in defs:
            defs[hint.__name__] = {}  # claimed first: a record that contains itself refers, not recurses
            defs[hint.__name__] = _record(hint, defs)
        return _ref(hint.__name__)
    raise TypeError(f"no JSON Schema for type hint {hint!r}")
