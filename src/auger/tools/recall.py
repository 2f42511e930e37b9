"""The `recall` tool: fetch or search the full stored outputs of this session's earlier tool calls.

History keeps outputs short; the store keeps them whole. This is the bridge, so
truncating what the model sees never loses what a command printed.
"""

from __future__ import annotations

import json
from typing import Any

from auger.tools.base import READ_ONLY, ToolContext, ToolError, ToolResult, ToolSpec

SHOW_CAP = 30_000
MAX_MATCHES = 50


async def _recall(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
    call_id, query = args.get("call_id"), args.get("query")
    if call_id:
        found = await ctx.archive.get_output(call_id)
        if found is None:
            raise ToolError(f"recall: no stored output for call_id {call_id!r}; call recall with no arguments "
                            "to list the stored calls")
        tool, arguments, full = found
        if query:
            return ToolResult(_search([(call_id, tool, arguments, full)], query))
        text = full if len(full) <= SHOW_CAP else (
            full[:SHOW_CAP] + f"\n[... {len(full) - SHOW_CAP} more chars; narrow down with `query`]")
        return ToolResult(f"{tool} {_summary(arguments)} [{call_id}]\n{text}")
    outputs = await ctx.archive.list_outputs()
    if query:
        hits = _search(outputs, query)
        messages = _search_messages(await ctx.archive.search_messages(query), query)
        return ToolResult(hits if not messages else f"{hits}\n\nIn conversation messages:\n{messages}")
    if not outputs:
        return ToolResult("No tool outputs are stored in this session yet.")
    rows = [f"{cid}: {tool} {_summary(arguments)} ({len(full)} chars)" for cid, tool, arguments, full in outputs[-50:]]
    return ToolResult("Stored tool outputs (oldest first):\n" + "\n".join(rows))


def _search(outputs: list[tuple[str, str, str, str]], query: str) -> str:
    needle = query.lower()
    hits: list[str] = []
    total = 0
    for call_id, tool, arguments, full in outputs:
        for number, line in enumerate(full.splitlines(), 1):
            if needle in line.lower():
                total += 1
                if len(hits) < MAX_MATCHES:
                    hits.append(f"{call_id} ({tool} {_summary(arguments)}) line {number}: {line[:300]}")
    if not hits:
        return f"No stored output contains {query!r}."
    more = f"\n[... {total - len(hits)} more matches]" if total > len(hits) else ""
    return "\n".join(hits) + more


def _search_messages(found: list[tuple[str, str]], query: str) -> str:
    needle = query.lower()
    hits = []
    for label, text in found:
        for line in text.splitlines():
            if needle in line.lower():
                hits.append(f"{label}: {line[:300]}")
    return "\n".join(hits[:MAX_MATCHES])


def _summary(arguments: str) -> str:
    try:
        data = json.loads(arguments)
    except ValueError:
        return arguments[:80]
    if isinstance(data, dict):
        for key in ("command", "path", "pattern"):
            if isinstance(data.get(key), str):
                return data[key][:80]
    return arguments[:80]


RECALL = ToolSpec(
    name="recall",
    description=(
        "Fetch the full output of an earlier tool call (call_id), or search every stored output and message, "
        "compacted ones included, for a text (query, case-insensitive). With neither, lists the stored calls."
    ),
    parameters={
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "Text to find in stored outputs."},
            "call_id": {"type": "string", "description": "The id of an earlier tool call."},
        },
    },
    handler=_recall,
    effect=READ_ONLY,
    parallel_safe=True,
    starts_early=True,
)

TOOLS = [RECALL]
