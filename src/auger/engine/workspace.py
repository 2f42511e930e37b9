"""The Workspace: what every session of one project shares, and never mutates.

Project root, configuration, the tools (built-ins unless told otherwise), the custom prompts and the
plugins (tools/plugins.py), read once.
Per-conversation state (history, grants, usage, the current skills) belongs to a Session.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from auger.config import Config, home_dirs
from auger.context.prompts import CustomPrompt, discover_prompts
from auger.context.skills import SkillIndex, discover_skills
from auger.tools.plugins import Plugins, load_plugins, project_plugins_enabled
from auger.tools.toolset import Toolset, builtin_toolset


@dataclass(frozen=True)
class Workspace:
    root: Path
    config: Config
    tools: Toolset  # each session opens it through its own router
    skills: SkillIndex  # as found at start-up; sessions re-read them each user turn
    prompts: Mapping[str, CustomPrompt]
    config_dir: Path
    plugins: Plugins = field(default_factory=Plugins)  # toolsets opened per session; warnings told at open

    @classmethod
    def open(cls, root: Path | str, config: Config | None = None, tools: Toolset | None = None) -> Workspace:
        """Read the project's skills and prompts, load the plugins; refuse a root that is not a directory.

        A project's own plugins (.auger/plugins/*.py) are code, so they run only when the user's config
        says `plugins.project = true` (tools/plugins.py); trusting a project's rules never runs its code."""
        root = Path(os.path.realpath(root))
        if not root.is_dir():
            raise NotADirectoryError(f"project root {root} is not a directory")
        config = config or Config()
        config_dir = home_dirs()["config"]
        skills = discover_skills(root, config_dir)
        tools = tools or builtin_toolset(with_skills=bool(skills.skills), with_memory=config.memory,
                                         with_exec_sessions=config.exec_sessions, with_code_mode=config.code_mode)
        return cls(root, config, tools, skills, discover_prompts(root, config_dir), config_dir,
                   load_plugins(root, project=project_plugins_enabled(config.tables)))
