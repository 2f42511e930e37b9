"""What a session tells the model about its world, recorded as items so resume replays it exactly.

A new session records its instructions (global and project AGENTS.md, the skills list)
and its environment. Later, only changes are told: a new trust mode, model or date
becomes a short `<environment_context>` with just the fields that differ.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Sequence

from auger.context.instructions import EnvironmentContext
from auger.context.project_docs import discover_project_docs, global_docs, user_instructions
from auger.context.skills import SkillIndex
from auger.protocol.items import ContextMessage, Item


def instructions_item(root: Path, config_dir: Path, skills: SkillIndex, *, fallback_names: Sequence[str],
                      max_bytes: int, warnings: list[str]) -> ContextMessage | None:
    project = discover_project_docs(root, fallback_names=fallback_names, max_bytes=max_bytes)
    personal = global_docs(config_dir, max_bytes)
    warnings.extend([*personal.warnings, *project.warnings, *skills.warnings])
    parts = [text for text in (user_instructions(personal, project), skills.render_list()) if text]
    return ContextMessage("\n\n".join(parts), "instructions") if parts else None


def environment_item(env: EnvironmentContext, previous: EnvironmentContext | None) -> ContextMessage | None:
    """The whole environment the first time, then only what changed (None when nothing did)."""
    text = env.render() if previous is None else env.render_changes(previous)
    return ContextMessage(text, "environment", dataclasses.asdict(env)) if text else None


def last_environment(items: Sequence[Item]) -> EnvironmentContext | None:
    for item in reversed(items):
        if isinstance(item, ContextMessage) and item.kind == "environment" and item.data:
            known = {f.name for f in dataclasses.fields(EnvironmentContext)}
            return EnvironmentContext(**{k: v for k, v in item.data.items() if k in known})
    return None
