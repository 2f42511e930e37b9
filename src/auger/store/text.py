"""Text from a model is data: whatever code points it holds are stored and printed, never a crash.

JSON allows a lone surrogate (`"\\ud800"`) and Python decodes it into a `str` that cannot be
encoded as UTF-8, which SQLite and a UTF-8 terminal require. These helpers keep such text intact:
JSON keeps the surrogate as its `\\uXXXX` escape (so it round-trips exactly), and a database column
holds it as UTF-8 bytes written with `surrogatepass`, decoded the same way on the way out.
"""

from __future__ import annotations

import json
import re
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")


def json_dumps(obj: Any) -> str:
    """`json.dumps` (non-ASCII kept readable) whose result is always valid UTF-8.

    A surrogate can only occur inside a JSON string literal, where `\\uXXXX` is its exact escape."""
    text = json.dumps(obj, ensure_ascii=False)
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def to_db(text: str) -> str | bytes:
    """A value SQLite can bind: the text itself, or its surrogatepass bytes when it is not valid UTF-8."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")


def from_db(value: Any) -> Any:
    """The text `to_db` was given (bytes back to str); other values unchanged."""
    return value.decode("utf-8", "surrogatepass") if isinstance(value, bytes) else value
