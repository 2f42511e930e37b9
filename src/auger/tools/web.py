"""The web tools a session offers, from the user's settings.

    web_fetch     on unless `web_fetch = false` (tools/web_fetch.py); `web_fetch_any_url = true` drops the
                  rule that a URL must have appeared in the conversation
    web_search    `web_search_url = "https://…?q={query}&format=json"`: a search service the user runs or
                  chose (tools/web_search.py), on every wire API; else `web_search = true` asks for the
                  provider's hosted search, which the wire client adds to its requests (models/), so it is
                  not a tool here — where the wire API has none, the session says so

A project's own config cannot set any of these (config.PROJECT_KEYS): what may leave the machine is the
user's choice.

The tools' specs are all a session needs to offer them; the policy, the fetching and converting modules
are loaded when a call first needs them.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from auger.config import Config
from auger.tools.toolset import StaticToolset

if TYPE_CHECKING:
    from auger.policy.web import WebPolicy

SOURCE = "web tools"  # its name in a session's tool registry: no MCP server can be named so


def web_policy(config: Config) -> WebPolicy:
    """The session's web policy; an invalid `egress_allow` pattern is left out (the egress proxy reports it
    at session start), an invalid `egress_hosts` entry too."""
    from auger.policy.web import WebPolicy

    patterns = [p for p in config.egress_allow if _valid(p)]
    hosts = {name: address for name, address in config.egress_hosts.items() if _valid_entry(name, address)}
    return WebPolicy.build(patterns, hosts, any_url=config.web_fetch_any_url)


def web_toolset(config: Config, *, hosted_search: bool) -> tuple[StaticToolset | None, list[str]]:
    """The web tools for a session (None: none), and warnings about settings that cannot be honoured.
    `hosted_search`: the session's model client adds its provider's hosted search."""
    from auger.tools.web_fetch import web_fetch_tool

    warnings: list[str] = []
    specs = [web_fetch_tool(functools.cache(lambda: web_policy(config)))] if config.web_fetch else []
    if config.web_search_url:
        from auger.tools.web_search import web_search_tool

        try:
            specs.append(web_search_tool(config.web_search_url, config.egress_hosts))
        except ValueError as exc:
            warnings.append(f"{exc}; web_search is not offered")
    elif config.web_search and not hosted_search:
        warnings.append("web_search = true, but this model's API has no hosted web search; set web_search_url to "
                        "a search service (https://…?q={query}&format=json) to search from this session")
    return (StaticToolset(specs) if specs else None), warnings


def _valid(pattern: str) -> bool:
    from auger.policy.egress import Allowlist

    try:
        Allowlist([pattern])
    except ValueError:
        return False
    return True


def _valid_entry(name: str, address: str) -> bool:
    from auger.policy.web import WebPolicy

    try:
        WebPolicy.build((), {name: address})
    except ValueError:
        return False
    return True
