"""Text from a model is data: whatever code points it holds can be stored, sent and printed.

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


def dumps(obj: Any) -> str:
    """`json.dumps` with non-ASCII kept readable, whose result always encodes as UTF-8.

    A surrogate can only occur inside a JSON string literal, where `\\uXXXX` is its exact escape."""
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", json.dumps(obj, ensure_ascii=False))


def printable(text: str) -> str:
    """`text` with lone surrogates replaced by U+FFFD, so printing it never fails."""
    return _SURROGATE.sub("\ufffd", text)
