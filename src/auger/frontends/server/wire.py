"""What a client sends, checked before anything acts on it: bodies read within a limit, JSON objects with
known fields of the right types, query parameters a route declares, numbers in digits, and ops exactly as
the protocol defines them (protocol/ops.py; docs/protocol.schema.json).

Unknown fields and parameters are refused on every route, never ignored: a client cannot slip in a
`base_url` or an `api_key` that some later layer might honour. Limits come before work: a body that
declares more than `MAX_BODY` is refused before a byte of it is read, one that does not declare its length
is read only up to `MAX_UNDECLARED_BODY`, and a number is at most 19 ASCII digits before it is converted.
Everything a client can get wrong is a `Refused` (400, or 413 for a body too large), never a traceback.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import re
import types
import typing
from typing import TYPE_CHECKING, AbstractSet, Any

from auger.frontends.server.sessions import Refused
from auger.protocol._data import field_hints
from auger.protocol.ops import Op, UserTurn

if TYPE_CHECKING:
    from starlette.requests import Request

MAX_BODY = 64 * 1024 * 1024  # one request may carry images
MAX_UNDECLARED_BODY = 1024 * 1024  # a body without Content-Length (chunked): a larger one must declare its length
MAX_DEPTH = 64  # arrays and objects nested in a body
MAX_INT = 2**63 - 1  # the largest number a query, header or op may carry (the stores' integers)
_DIGITS = re.compile(r"[0-9]{1,19}")  # ASCII only: int() would also take '²', '٣' or 5,000 digits
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


async def read_body(request: Request) -> bytes:
    """The request's body, read only within the limits: a declared `Content-Length` over MAX_BODY is 413
    before anything is read; a body without one is read up to MAX_UNDECLARED_BODY and then refused (413),
    so no client makes the server hold more than it allows."""
    declared = request.headers.get("content-length")
    if declared is not None:
        length = number(declared.strip(), "Content-Length", high=MAX_INT)
        if length > MAX_BODY:
            raise Refused(413, f"request body of {length} bytes is over the limit of {MAX_BODY}")
        limit = MAX_BODY
    else:
        limit = MAX_UNDECLARED_BODY
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            if declared is None:
                raise Refused(413, f"request body without Content-Length is over {limit} bytes: send its length "
                                   f"(at most {MAX_BODY} bytes)")
            raise Refused(413, f"request body over the limit of {limit} bytes")
    return bytes(body)


def parse_body(raw: bytes, allowed: AbstractSet[str], required: AbstractSet[str] = frozenset()) -> dict[str, Any]:
    """A JSON object with only `allowed` fields and every `required` one (400 otherwise): UTF-8, each
    field once, no NaN or Infinity, no lone surrogate in a string, nested at most MAX_DEPTH deep."""
    if len(raw) > MAX_BODY:
        raise Refused(413, f"request body over the limit of {MAX_BODY} bytes")
    try:
        text = raw.decode("utf-8")
        data = json.loads(text, object_pairs_hook=_object, parse_constant=_constant,
                          parse_float=_float) if text.strip() else {}
    except (ValueError, RecursionError) as exc:
        raise Refused(400, f"request body is not JSON: {_short(str(exc))}") from None
    if not isinstance(data, dict):
        raise Refused(400, "request body must be a JSON object")
    _check_nesting(data)
    unknown = set(data) - allowed
    if unknown:
        raise Refused(400, f"unknown field(s) {_names(unknown)}; allowed: {', '.join(sorted(allowed)) or 'none'}")
    missing = required - set(data)
    if missing:
        raise Refused(400, f"missing field(s) {', '.join(sorted(missing))}")
    return data


def parse_query(pairs: list[tuple[str, str]], allowed: AbstractSet[str]) -> dict[str, str]:
    """A route's query parameters: only those it declares (`allowed`), each at most once (400 otherwise)."""
    query: dict[str, str] = {}
    for name, value in pairs:
        if name not in allowed:
            unknown = {n for n, _ in pairs if n not in allowed}
            raise Refused(400, f"unknown query parameter(s) {_names(unknown)}; "
                               f"allowed: {', '.join(sorted(allowed)) or 'none'}")
        if name in query:
            raise Refused(400, f"query parameter {name} is given more than once")
        query[name] = value
    return query


def number(value: str, name: str, *, low: int = 0, high: int = MAX_INT) -> int:
    """A whole number a client wrote in a query or a header: ASCII digits only, from `low` to `high`."""
    if not _DIGITS.fullmatch(value) or not low <= int(value) <= high:
        raise Refused(400, f"{name} must be a whole number from {low} to {high}, not {_short(repr(value))}")
    return int(value)


def parse_op(data: Any) -> Op:
    """A protocol op from its JSON form, refusing unknown types and fields and ill-typed values; a
    `user_turn`'s images must be data URLs of images (a server reads no file a client names)."""
    if not isinstance(data, dict) or not isinstance(data.get("type"), str):
        raise Refused(400, "op must be a JSON object with a 'type'")
    cls = Op.registry().get(data["type"])
    if cls is None:
        raise Refused(400, f"unknown op type {_short(repr(data['type']))}; known: {', '.join(Op.registry())}")
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]  # every op is a dataclass
    unknown = set(data) - set(fields) - {"type"}
    if unknown:
        raise Refused(400, f"unknown field(s) {_names(unknown)} in op {data['type']!r}")
    hints = field_hints(cls)
    for name, f in fields.items():
        if name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise Refused(400, f"op {data['type']!r} needs {name!r}")
            continue
        if not _fits(hints[name], data[name]):
            raise Refused(400, f"op {data['type']!r}: {name!r} has the wrong type or value: "
                               f"{_short(repr(data[name]))}")
    op = Op.from_json(data)
    if isinstance(op, UserTurn):
        op.images = [_image(n, ref) for n, ref in enumerate(op.images, 1)]
    return op


def _image(n: int, ref: str) -> str:
    from auger.models.images import ImageError, checked_data_url

    if not ref.startswith("data:"):
        raise Refused(400, f"image {n} is not a data URL: send the image itself (data:image/png;base64,...); "
                           "this server reads no file a client names")
    try:
        return checked_data_url(ref)
    except ImageError as exc:
        raise Refused(400, f"image {n}: {exc}") from None


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
        return isinstance(value, int) and not isinstance(value, bool) and -MAX_INT - 1 <= value <= MAX_INT
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return value in {m.value for m in hint}
    return False


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose every field is given once: two values for one name would let two readers of
    the same body see two different requests."""
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            raise ValueError(f"field {_short(repr(key))} is given more than once")
        seen.add(key)
    return dict(pairs)


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise ValueError(f"{_short(text)} is out of range")
    return value


def _check_nesting(data: Any) -> None:
    """Refuse arrays and objects nested deeper than MAX_DEPTH, and strings holding a lone surrogate (no
    file name, store or provider takes one)."""
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, str):
            if _LONE_SURROGATE.search(value):
                raise Refused(400, "request body holds a lone UTF-16 surrogate (\\ud800-\\udfff): not text")
            continue
        if not isinstance(value, (dict, list)):
            continue
        if depth > MAX_DEPTH:
            raise Refused(400, f"request body is nested more than {MAX_DEPTH} deep")
        children = list(value.items()) if isinstance(value, dict) else [(None, v) for v in value]
        for key, child in children:
            if key is not None:
                stack.append((key, depth))
            stack.append((child, depth + 1))


def _names(names: set[str]) -> str:
    return ", ".join(_short(repr(n)) for n in sorted(names)[:10]) + (" …" if len(names) > 10 else "")


def _short(text: str, limit: int = 80) -> str:
    """A client's value as an error message quotes it: whole when short, else its start."""
    return text if len(text) <= limit else text[:limit] + "…"
