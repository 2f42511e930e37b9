"""What an agent's permission request means to auger's policy: a Classification like a native call's.

An ACP tool call says what kind of thing it does (read, edit, delete, move, search, execute, think,
fetch, other) and often its raw input. A command (`execute` with a command line in its input) is
classified by the same shell analyser as auger's own `shell` tool, so rules and grants match it the
same way; other kinds map to an effect. Paths it names outside the project are noted, which makes
every mode ask (or refuse) as for a native call.

The agent runs its commands itself, outside auger's sandbox, so those are judged as unsandboxed:
in `auto` mode they ask as `safe` does. File edits are judged with the session's sandbox setting,
because their writes come back through fs/write_text_file and auger's path guard.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from auger.policy.types import Classification, Effect

_EFFECTS = {
    "read": Effect.READ_ONLY, "search": Effect.READ_ONLY, "think": Effect.READ_ONLY,
    "edit": Effect.LOCAL_MUTATION, "move": Effect.LOCAL_MUTATION, "switch_mode": Effect.LOCAL_MUTATION,
    "other": Effect.LOCAL_MUTATION, "execute": Effect.LOCAL_MUTATION,
    "delete": Effect.DESTRUCTIVE, "fetch": Effect.REMOTE_ACTION,
}
_PATH_KEYS = ("path", "file_path", "filePath", "filepath", "file", "target", "destination", "source")
GUARDED_KINDS = ("edit",)  # changes that reach the project through fs/write_text_file only


def tool_name(kind: str) -> str:
    """The name grants and approvals use for an agent's calls of this kind."""
    return f"agent_{kind if kind in _EFFECTS else 'other'}"


def command_of(arguments: dict[str, Any]) -> str | None:
    """The command line an `execute` call runs, when its input says (`command` as text or argv)."""
    import shlex

    command = arguments.get("command") or arguments.get("cmd")
    if isinstance(command, list) and command and all(isinstance(word, str) for word in command):
        return shlex.join(command)
    if isinstance(command, str) and command.strip():
        args = arguments.get("args")
        if isinstance(args, list) and all(isinstance(word, str) for word in args):
            return shlex.join([command, *args])
        return command
    return None


def paths_of(arguments: dict[str, Any]) -> list[str]:
    """The file paths a call's input names, under the keys agents use for them."""
    return [value for key in _PATH_KEYS if isinstance(value := arguments.get(key), str) and value]


def classify(kind: str, title: str, arguments: dict[str, Any], root: Path) -> Classification:
    effect = _EFFECTS.get(kind, Effect.LOCAL_MUTATION)
    command = command_of(arguments) if kind in ("execute", "other") else None
    if command is not None:
        from auger.tools.shell import classify as classify_shell

        return classify_shell({"command": command}, root)
    paths = paths_of(arguments)
    outside = tuple(p for p in paths if _outside(p, root))
    subject = paths[0] if paths else title
    return Classification(effect, subject, outside_paths=outside)


def resolved(raw: str, root: Path) -> str:
    """Where a path an agent names points (relative ones from the project root), links resolved."""
    path = Path(os.path.expanduser(raw))
    return os.path.realpath(path if path.is_absolute() else root / path)


def _outside(raw: str, root: Path) -> bool:
    target, base = resolved(raw, root), os.path.realpath(root)
    return not (target == base or target.startswith(base.rstrip("/") + "/"))


def pick(options: list[tuple[str, str]], allow: bool) -> str | None:
    """The agent's option for our answer: a one-time allow or reject (auger keeps session grants
    itself, so the agent is never told "always"); None when it offers no such option (cancelled)."""
    wanted = ("allow_once", "allow_always") if allow else ("reject_once", "reject_always")
    for kind in wanted:
        for option_id, option_kind in options:
            if option_kind == kind:
                return option_id
    return None
