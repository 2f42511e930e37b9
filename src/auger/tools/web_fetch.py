"""The `web_fetch` tool: a web page as Markdown, fetched by auger itself under the session's web policy.

What may be fetched is decided in three places, in the tool runtime's order:

    gate        the URL must have reached the conversation from outside the model (tools/provenance.py),
                unless the user set `web_fetch_any_url`; a bad URL or a private address named directly
                is refused here too. A refusal is final: no mode or approval runs it.
    classify    policy/web.py: a host in the egress allowlist is a read; any other host is a remote action
                (plan refuses, safe and auto ask, a headless run is refused).
    handler     tools/web_http.py: the address the name resolves to is checked and connected to; each
                redirect is checked again.

The model sees the page cut to SHOWN_CHARS (with `prompt`, the passages matching it first); the whole
text is stored beside the call for `recall`, as a command's full output is.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Callable

from auger._version import __version__
from auger.tools.base import REMOTE_ACTION, Classification, ToolContext, ToolError, ToolResult, ToolSpec

if TYPE_CHECKING:  # the policy, provenance, HTTP and conversion modules load at a call's first need
    from auger.policy.web import WebPolicy

NAME = "web_fetch"
SHOWN_CHARS = 16_000  # of the converted text, in the tool output
KEPT_CHARS = 1_000_000  # of the converted text, stored for recall
MAX_BYTES = 5 << 20  # of the body downloaded
HEAD_CHARS = 1_500  # kept from a long page's start when passages matching `prompt` are picked
ACCEPT = "text/markdown, text/html;q=0.9, text/plain;q=0.8, application/pdf;q=0.7, */*;q=0.1"
STOPWORDS = frozenset("the and for with what does how that this from are was which about into when where who why "
                      "can you your its not but has have".split())
USER_AGENT = f"auger/{__version__} (web_fetch)"
# What `auger policy check --fetch` adds: the checks a session makes that need the conversation or DNS.
SEEN_CONDITION = ("the URL must have appeared in the conversation (the user's messages, a file read, a fetched "
                  "page, a search result)")
ADDRESS_CONDITION = "its host must not resolve to a private or local address unless listed in egress_allow"
NOT_SEEN = ("this URL did not appear in the conversation (the user's messages, a file read with read_file, a "
            "fetched page or a search result); a URL written by the model is not fetched. Fetch one that "
            "appeared, or ask the user for the URL")

DESCRIPTION = ("Fetch a URL as Markdown (PDF, text too). Only URLs that appeared in the conversation (user, files "
               "read, fetched pages, searches). Long pages are cut, `prompt` matches first; full text via `recall`.")
PARAMETERS = {
    "type": "object",
    "properties": {"url": {"type": "string"}, "prompt": {"type": "string"}},
    "required": ["url"],
}


def web_fetch_tool(policy: Callable[[], WebPolicy]) -> ToolSpec:
    """The tool, bound to the session's web policy (built by `policy` when a call first needs it)."""

    async def gate(args: dict[str, Any], ctx: ToolContext) -> str | None:
        from auger.tools.provenance import appeared

        refused = refusal(args["url"], policy())
        if refused:
            return f"{NAME}: {refused}"
        if policy().any_url or await appeared(args["url"], ctx):
            return None
        return f"{NAME}: {NOT_SEEN}"

    def classify(args: dict[str, Any], root: object) -> Classification:
        from auger.policy.web import UrlRefused

        try:
            return policy().classify(args["url"])
        except UrlRefused:  # the gate refuses it first; never run without asking meanwhile
            return Classification(REMOTE_ACTION, str(args["url"]))

    async def handler(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return await _fetch(args["url"], args.get("prompt") or "", policy(), ctx)

    return ToolSpec(NAME, DESCRIPTION, PARAMETERS, handler, REMOTE_ACTION, parallel_safe=True, classifier=classify,
                    gate=gate)


def refusal(url: str, policy: WebPolicy) -> str | None:
    """Why no fetch of `url` may run, known without the conversation or DNS (None: it may, so far)."""
    from auger.policy.web import UrlRefused, parse_url

    try:
        policy.check_literal(parse_url(url))
    except UrlRefused as exc:
        return str(exc)
    return None


async def _fetch(url: str, prompt: str, policy: WebPolicy, ctx: ToolContext) -> ToolResult:
    from auger.policy.web import UrlRefused
    from auger.tools.web_convert import convert, media_type
    from auger.tools.web_http import FetchFailed, fetch

    try:
        fetched = await fetch(url, policy, accept=ACCEPT, user_agent=USER_AGENT, max_bytes=MAX_BYTES)
    except (UrlRefused, FetchFailed) as exc:
        raise ToolError(f"{NAME}: {exc}") from None
    converted = convert(fetched.body, fetched.content_type, fetched.url)
    head = fetched.url + (f" (redirected from {fetched.redirects[0]})" if fetched.redirects else "")
    size = f"{len(fetched.body):,} bytes" + (f", cut at {MAX_BYTES >> 20} MB" if fetched.truncated else "")
    head += f"\nHTTP {fetched.status} {fetched.reason} | {media_type(fetched.content_type) or 'no type'} | {size}"
    shown, cut = excerpt(converted.text, prompt, SHOWN_CHARS)
    output = f"{head}\n\n{shown}"
    if cut:
        output += f"\n\n[{cut}; the full text is kept: recall with call_id={ctx.call_id!r}]"
    return ToolResult(output, ok=fetched.status < 400,
                      full_output=f"{head}\n\n{converted.text[:KEPT_CHARS]}" if cut else None,
                      metadata={"status": fetched.status, "url": fetched.url, "kind": converted.kind})


def excerpt(text: str, prompt: str, limit: int) -> tuple[str, str | None]:
    """At most `limit` characters of `text`, and what was left out (None: nothing). With a prompt, a long
    text keeps its start and then the paragraphs sharing the most words with the prompt, in page order."""
    if len(text) <= limit:
        return text, None
    words = set(re.findall(r"\w{3,}", prompt.lower())) - STOPWORDS
    if not words:
        return text[:limit], f"page cut at {limit:,} of {len(text):,} characters"
    blocks = text.split("\n\n")
    score = [sum(block.lower().count(w) for w in words) for block in blocks]
    chosen, used = set(), 0
    for i, block in enumerate(blocks):  # the page's start (title, summary) first
        if used + len(block) > HEAD_CHARS:
            break
        chosen.add(i)
        used += len(block) + 2
    for i in sorted(range(len(blocks)), key=lambda i: -score[i]):  # the best matches
        if score[i] and i not in chosen and used + len(blocks[i]) <= limit:
            chosen.add(i)
            used += len(blocks[i]) + 2
    for i, block in enumerate(blocks):  # then the page in order, as far as it fits
        if i in chosen:
            continue
        if used + len(block) > limit:
            break
        chosen.add(i)
        used += len(block) + 2
    parts, previous = [], -1
    for i in sorted(chosen):
        if i != previous + 1:
            parts.append("[…]")
        parts.append(blocks[i])
        previous = i
    if previous != len(blocks) - 1:
        parts.append("[…]")
    return "\n\n".join(parts)[:limit], f"passages matching the prompt first, {used:,} of {len(text):,} characters"
