"""`auger agents`: the sub-agent definitions a session in this project would offer, and where each comes from.

The same discovery the engine runs (context/agents.py), so what is listed is what `spawn_agent` offers;
problems with a definition file are printed as warnings naming the file.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Callable


def add_commands(sub: Any, store_opts: Callable[[argparse.ArgumentParser], None]) -> dict[str, argparse.ArgumentParser]:
    p_agents = sub.add_parser("agents", help="list the sub-agents the model can start, with their source")
    p_agents.add_argument("-C", "--cd", dest="cwd", help="project directory (default: current directory)")
    p_agents.add_argument("--json", action="store_true", help="print JSON lines")
    store_opts(p_agents)
    p_agents.set_defaults(run=_cmd_agents)
    return {"agents": p_agents}


def _cmd_agents(args: argparse.Namespace) -> int:
    import json
    import os
    from pathlib import Path

    from auger.config import home_dirs
    from auger.context.agents import discover_agents
    from auger.frontends.cli_support import CliError, load_cli_config
    from auger.protocol.jsontext import printable

    config = load_cli_config(args)
    root = Path(args.cwd or os.getcwd())
    if not root.is_dir():
        raise CliError(f"project directory {root} is not a directory")
    index = discover_agents(root, home_dirs()["config"], base_mode=config.mode)
    for warning in index.warnings:
        print(printable(f"auger: warning: {warning}"), file=sys.stderr)
    for agent in index.agents.values():
        source = agent.source if agent.path is None else f"{agent.source}: {agent.path}"
        if args.json:
            print(json.dumps({"name": agent.name, "description": agent.description, "source": agent.source,
                              "path": str(agent.path) if agent.path else None, "mode": agent.mode,
                              "tools": list(agent.tools) if agent.tools is not None else None,
                              "model": agent.model, "provider": agent.provider,
                              "max_model_calls": agent.max_model_calls}))
        else:
            print(printable(f"{agent.name:<14} {agent.description[:70]:<70}  ({source})"))
    return 0


# -- `auger sessions --tree` -----------------------------------------------------------
Tree = dict  # parent session id -> [(LinkRecord, SessionRecord)] of its sub-agents, oldest first


async def sub_agent_tree(store: Any) -> Tree:
    """Every stored sub-agent session under its parent (the links table; a child whose session row is gone is
    left out)."""
    tree: Tree = {}
    for link in await store.list_links():
        record = await store.get_session(link.child_id)
        if record is not None:
            tree.setdefault(link.parent_id, []).append((link, record))
    return tree


def tree_lines(tree: Tree, parent_id: str, depth: int = 1) -> list[str]:
    """Indented rows for a session's sub-agents, and theirs below them."""
    lines = []
    for link, record in tree.get(parent_id, []):
        title = (record.title or "").replace("\n", " ")
        lines.append(f"{'  ' * depth}└ {record.id[:8]:<10} {link.agent:<10} {link.status:<11} {title[:60]}")
        lines.extend(tree_lines(tree, record.id, depth + 1))
    return lines


def tree_json(tree: Tree, parent_id: str) -> list[dict]:
    return [{"id": record.id, "agent": link.agent, "status": link.status, "title": record.title,
             "parent_call_id": link.parent_call_id, "children": tree_json(tree, record.id)}
            for link, record in tree.get(parent_id, [])]
