"""What a client sends, checked before anything acts on it: JSON objects with known fields of the right
types, and ops exactly as the protocol defines them (protocol/ops.py; docs/protocol.schema.json).

Unknown fields are refused on every route, never ignored: a client cannot slip in a `base_url` or an
`api_key` that some later layer might honour.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import types
import typing
from typing import AbstractSet, Any

from auger.frontends.server.sessions import Refused
from auger.protocol._data import field_hints
from auger.protocol.ops import Op

MAX_BODY = 64 * 1024 * 1024  # one request may carry images


def parse_body(raw: bytes, allowed: AbstractSet[str], required: AbstractSet[str] = frozenset()) -> dict[str, Any]:
    """A JSON object with only `allowed` fields and every `required` one (400 otherwise)."""
    if len(raw) > MAX_BODY:
        raise Refused(413, f"request body over {MAX_BODY} bytes")
    try:
        data = json.loads(raw) if raw.strip() else {}
    except (ValueError, RecursionError) as exc:
        raise Refused(400, f"request body is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise Refused(400, "request body must be a JSON object")
    unknown = set(data) - allowed
    if unknown:
        raise Refused(400, f"unknown field(s) {', '.join(sorted(unknown))}; allowed: {', '.join(sorted(allowed))}")
    missing = required - set(data)
    if missing:
        raise Refused(400, f"missing field(s) {', '.join(sorted(missing))}")
    return data


def parse_op(data: Any) -> Op:
    """A protocol op from its JSON form, refusing unknown types and fields and ill-typed values."""
    if not isinstance(data, dict) or not isinstance(data.get("type"), str):
        raise Refused(400, "op must be a JSON object with a 'type'")
    cls = Op.registry().get(data["type"])
    if cls is None:
        raise Refused(400, f"unknown op type {data['type']!r}; known: {', '.join(Op.registry())}")
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]  # every op is a dataclass
    unknown = set(data) - set(fields) - {"type"}
    if unknown:
        raise Refused(400, f"unknown field(s) {', '.join(sorted(unknown))} in op {data['type']!r}")
    hints = field_hints(cls)
    for name, f in fields.items():
        if name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise Refused(400, f"op {data['type']!r} needs {name!r}")
            continue
        if not _fits(hints[name], data[name]):
            raise Refused(400, f"op {data['type']!r}: {name!r} has the wrong type or value: {data[name]!r}")
    return Op.from_json(data)


def _fits(hint: Any, value: Any) -> bool:
    if hint is Any:
        return True
    origin = typing.get_origin(hint)
    if origin is typing.Union or origin is types.UnionType:
        return any(_fits(arg, value) for arg in typing.get_args(hint))
    if origin is list:
        (item,) = typing.get_args(hint) or (Any,)
        return isinstance(value, list) and all(_fits(item, v) for v in value)
    if origin is dict or hint is dict:
        return isinstance(value, dict)
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return value in {m.value for m in hint}
    return False
