"""The `web_search` tool backed by a search service the user configured (`web_search_url`).

Used where the model's wire API has no hosted search (Chat Completions servers), or wherever the user
names a backend. The URL is a template, `https://searx.example/search?q={query}&format=json`: the query
is URL-encoded into it and the JSON answer's results (SearXNG's `results`, or Brave's `web.results`) are
listed with title, URL and snippet. The user chose the service, so its host needs no allowlist entry and
may be a private address; the request goes through the same pinned-address fetch as `web_fetch`.

A search is a read: it runs in every mode. The query does leave the machine, to the service the user
configured; its results are a source `web_fetch` may fetch from (tools/provenance.py).
"""

from __future__ import annotations

import json
from typing import Any, Mapping
from urllib.parse import quote_plus

from auger.policy.web import UrlRefused, WebPolicy, parse_url
from auger.tools.base import READ_ONLY, ToolContext, ToolError, ToolResult, ToolSpec
from auger.tools.web_fetch import USER_AGENT
from auger.tools.web_http import FetchFailed, fetch

NAME = "web_search"
PLACEHOLDER = "{query}"
MAX_RESULTS = 8
MAX_BYTES = 2 << 20
SNIPPET_CHARS = 300


def web_search_tool(template: str, hosts: Mapping[str, str] | None = None) -> ToolSpec:
    """The tool for the template in `web_search_url`; ValueError saying what is wrong with it. `hosts` are
    the user's `egress_hosts`."""
    if PLACEHOLDER not in template:
        raise ValueError(f"web_search_url must contain {PLACEHOLDER} where the query goes, got {template!r}")
    try:
        host = parse_url(template.replace(PLACEHOLDER, "q")).host
        policy = WebPolicy.build([host], hosts)  # the user named this service: its host, whatever its address
    except ValueError as exc:
        raise ValueError(f"web_search_url {template!r}: {exc}") from None

    async def handler(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        query = args["query"].strip()
        if not query:
            raise ToolError(f"{NAME}: 'query' is empty")
        url = template.replace(PLACEHOLDER, quote_plus(query))
        try:
            fetched = await fetch(url, policy, accept="application/json", user_agent=USER_AGENT,
                                  max_bytes=MAX_BYTES)
        except (UrlRefused, FetchFailed) as exc:
            raise ToolError(f"{NAME}: the search service failed: {exc}") from None
        if fetched.status >= 400:
            raise ToolError(f"{NAME}: the search service answered HTTP {fetched.status} {fetched.reason}")
        try:
            results = _results(json.loads(fetched.body))
        except ValueError:
            raise ToolError(f"{NAME}: the search service did not answer JSON (is format=json in "
                            "web_search_url?)") from None
        if not results:
            return ToolResult(f"No results for {query!r}.")
        lines = [f"{n}. {title}\n   {link}" + (f"\n   {snippet}" if snippet else "")
                 for n, (title, link, snippet) in enumerate(results[:MAX_RESULTS], 1)]
        return ToolResult("\n".join(lines), metadata={"results": len(results)})

    return ToolSpec(NAME, "Search the web; returns titles, URLs and snippets.",
                    {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
                    handler, READ_ONLY, parallel_safe=True, starts_early=True)


def _results(data: Any) -> list[tuple[str, str, str]]:
    """(title, url, snippet) of each result with a URL; ValueError for an answer of another shape."""
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    found = data.get("results")
    if found is None and isinstance(data.get("web"), dict):
        found = data["web"].get("results")
    if not isinstance(found, list):
        raise ValueError("no result list")
    results = []
    for entry in found:
        if isinstance(entry, dict) and isinstance(entry.get("url"), str):
            snippet = str(entry.get("content") or entry.get("description") or entry.get("snippet") or "")
            snippet = " ".join(snippet.split())
            results.append((" ".join(str(entry.get("title") or entry["url"]).split()), entry["url"],
                            snippet[:SNIPPET_CHARS]))
    return results
