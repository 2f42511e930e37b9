"""Text from a model is data: whatever code points or nesting it holds can be stored, sent, printed
and parsed without crashing.

JSON allows a lone surrogate (`"\\ud800"`) and Python decodes it into a `str` that cannot be
encoded as UTF-8, which SQLite, HTTP bodies and terminals need. `dumps` keeps such a surrogate as
its `\\uXXXX` escape, so the JSON text is valid UTF-8 and `json.loads` gives back exactly the same
string; `printable` is for people, and shows it as U+FFFD.
"""

from __future__ import annotations

import json
import re
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")


def dumps(obj: Any, *, compact: bool = False) -> str:
    """`json.dumps` with non-ASCII kept readable, whose result always encodes as UTF-8; `compact` leaves
    out the spaces after separators.

    A surrogate can only occur inside a JSON string literal, where `\\uXXXX` is its exact escape."""
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":") if compact else None)
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def printable(text: str) -> str:
    """`text` with lone surrogates replaced by U+FFFD, so printing it never fails."""
    return _SURROGATE.sub("\ufffd", text)


MAX_DEPTH = 64  # far deeper than any tool's schema; shallow enough for every recursive walk after parsing


def loads(text: str, max_depth: int = MAX_DEPTH) -> Any:
    """`json.loads` for text a model wrote: nesting deeper than `max_depth` is a ValueError, like any
    other malformed JSON, instead of a RecursionError here or in whatever walks the value later."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise ValueError(f"nested deeper than {max_depth} levels") from None
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, (dict, list)):
            if depth > max_depth:
                raise ValueError(f"nested deeper than {max_depth} levels")
            children = node.values() if isinstance(node, dict) else node
            stack.extend((child, depth + 1) for child in children)
    return value
