"""What a session tells the model about its world, recorded as items so resume replays it exactly.

A new session records its instructions (the user's developer instructions, global and
project AGENTS.md with their imports, the project's memory file, the skills list) and its
environment. Both are read again at each user turn (and on resume), and only
changes are told: edited instructions become one item that replaces the earlier ones;
a new trust mode, model, date or branch becomes a short `<environment_context>` with
just the fields that differ. What was recorded is never rewritten, so a resumed session
still rebuilds the prompt it sent, and then records what changed since.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Sequence

from auger.config import Config
from auger.context.instructions import EnvironmentContext
from auger.context.project_docs import ProjectDocs, discover_project_docs, global_docs, user_instructions
from auger.context.skills import SkillIndex
from auger.protocol.items import ContextMessage, Item
from auger.secrets.settings import secrets_settings


INSTRUCTIONS_CHANGED = ("<instructions_changed>The instructions were edited during this session; these replace "
                        "the earlier ones.</instructions_changed>\n{text}")
INSTRUCTIONS_REMOVED = ("<instructions_changed>The instructions given earlier in this session were removed; they no "
                        "longer apply.</instructions_changed>")


def read_instructions(root: Path, config_dir: Path, skills: SkillIndex, config: Config, *, warnings: list[str],
                      cwd: Path | None = None) -> str:
    """The instructions as the config and the files say now: developer instructions, the global and
    project AGENTS.md (those from the root down to `cwd`, default the root), the memory file when
    `memory` is on, the skills list; "" for none."""
    max_bytes = config.project_doc_max_bytes
    project = discover_project_docs(cwd or root, fallback_names=config.project_doc_fallback_filenames,
                                    max_bytes=max_bytes, project=root, secrets=secrets_settings(config)) \
        if config.project_docs else ProjectDocs()
    personal = global_docs(config_dir, max_bytes)
    memory = None
    if config.memory:  # the memory file's module only where the user turned it on
        from auger.context.memory import memory_docs

        memory = memory_docs(root, max_bytes)
    warnings.extend([*personal.warnings, *project.warnings, *(memory.warnings if memory else ()), *skills.warnings])
    docs = user_instructions(personal, project, *((memory,) if memory else ()))
    parts = [text for text in (developer_instructions(config), docs, skills.render_list()) if text]
    return "\n\n".join(parts)


def developer_instructions(config: Config) -> str | None:
    """The user's `developer_instructions`, then a trusted project's (config.py), in one tagged block."""
    parts = [text.strip() for text in (config.developer_instructions,) if text and text.strip()]
    project = (config.project_developer_instructions or "").strip()
    if project:
        parts.append(f"<!-- from the project's .auger/config.toml -->\n{project}")
    if not parts:
        return None
    return "<developer_instructions>\n" + "\n\n".join(parts) + "\n</developer_instructions>"


def instructions_item(current: str, items: Sequence[Item]) -> ContextMessage | None:
    """The first instructions as they are; later, a replacement when they changed (None when they did not).
    A replacement keeps the plain instructions in `data`, to compare with next time."""
    previous = last_instructions(items)
    if previous is None:
        return ContextMessage(current, "instructions") if current else None
    if current == previous:
        return None
    text = INSTRUCTIONS_CHANGED.format(text=current) if current else INSTRUCTIONS_REMOVED
    return ContextMessage(text, "instructions", {"instructions": current})


def last_instructions(items: Sequence[Item]) -> str | None:
    """The instructions in force after `items` (None when none were ever recorded)."""
    for item in reversed(items):
        if isinstance(item, ContextMessage) and item.kind == "instructions":
            return item.data["instructions"] if item.data and "instructions" in item.data else item.text
    return None


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
