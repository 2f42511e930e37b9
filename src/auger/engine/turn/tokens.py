"""Token estimates for text the provider has not counted yet.

Providers report exact usage for what they saw; between calls (new tool outputs,
a compaction's result) the engine needs an estimate. A byte-based one (UTF-8 bytes
/ 4, rounded up) is used: tokenizers differ per provider, and tiktoken's encodings
are downloaded at run time, which an offline engine cannot rely on.
"""

from __future__ import annotations

import json
from typing import Iterable

from auger.models.base import ToolSchema
from auger.protocol.items import Item


def estimate_text(text: str) -> int:
    return (len(text.encode("utf-8", "surrogatepass")) + 3) // 4


def estimate_items(items: Iterable[Item]) -> int:
    return sum(estimate_text(json.dumps(item.to_json(), ensure_ascii=False)) for item in items)


def estimate_request(instructions: str, items: Iterable[Item], tools: Iterable[ToolSchema]) -> int:
    tool_text = json.dumps([[t.name, t.description, t.parameters] for t in tools])
    return estimate_text(instructions) + estimate_text(tool_text) + estimate_items(items)
