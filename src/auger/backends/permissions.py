"""What an agent's permission request means to auger's policy: judged by what it asks, not how it labels it.

An ACP tool call says what kind of thing it does (read, edit, delete, move, search, execute, think,
fetch, switch_mode, other), and carries a raw input of any shape, locations and content (diffs). A
hostile or confused agent can put a command in a "read" call, or a path under a key nobody listed
(`notebook_path`), so the whole request is read:

* a command line anywhere in it (`command`, `cmd`, `commands`, `script`… at any depth, as text or
  argv; a bare string for `execute`) is classified by the same shell analyser as auger's own `shell`
  tool, whatever the kind says: for `execute` and `other` the command is what the call does, for any
  other kind the stricter of the two effects wins;
* every path it names (values under path-like keys at any depth, absolute or `~` paths anywhere,
  locations, the files its diffs edit) is checked against the directory the session's tools work on:
  one outside makes every mode ask or refuse, as for a native call; a diff makes the call a change;
* a shape auger cannot read — an input that is not an object, one nested too deeply, an `execute`
  without a command line, a change that names no file — counts as a change nobody can see (asked, or
  refused headless and in plan mode).

The agent runs its commands and its own file tools itself, outside auger's sandbox. So where auger's
own `shell` leaves the analyser's mistakes to the sandbox, a backend's request is judged stricter
(`_unconfined`): a read-only verdict stands only for programs that are read-only by name alone — on
the analyser's plain list, named without a path, needing no reading of their options or configuration
(`cat`, `ls`, `grep`, `wc`, and `cd`; not `git`, `find`, `sed` or `./cat`) — and only when nothing it
reads lies outside the project, where no sandbox hides credentials from the agent. Everything else
counts as a change: asked in `safe` and `auto`, refused in `plan`. Commands are always judged
unsandboxed (`auto` asks as `safe` does); only an edit whose files are all named, and none outside,
keeps the session's sandbox setting, as auger's own `write_file` does.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from auger.backends.base import FileEdit
from auger.policy.types import Classification, Effect

_EFFECTS = {
    "read": Effect.READ_ONLY, "search": Effect.READ_ONLY, "think": Effect.READ_ONLY,
    "edit": Effect.LOCAL_MUTATION, "move": Effect.LOCAL_MUTATION, "switch_mode": Effect.LOCAL_MUTATION,
    "other": Effect.LOCAL_MUTATION, "execute": Effect.LOCAL_MUTATION,
    "delete": Effect.DESTRUCTIVE, "fetch": Effect.REMOTE_ACTION,
}
_CHANGES_FILES = ("edit", "delete", "move")  # kinds that must say which files they change
_RUNS_COMMANDS = ("execute", "other")  # kinds whose command line is what they do; others do it besides their kind
_COMMAND_KEY = re.compile(r"(command|cmd|script|commandline|cmdline)s?$")  # on the key lowered, without _ and -
_LINE_LIST_KEY = re.compile(r"(commands|cmds|scripts?)$")  # a list of strings there is several command lines
_ARGV_KEYS = ("args", "argv", "arguments")
_PATH_KEY = re.compile(r"(path|file|filename|dir|directory|folder|target|destination|dest|source|src|cwd|workdir|"
                       r"location|uri)s?$", re.IGNORECASE)
_CWD_KEYS = ("cwd", "workdir", "working_directory", "directory", "dir")
_TEXT_KEYS = frozenset({"pattern", "regex", "query", "description", "prompt", "title"})  # text, not paths
_MAX_DEPTH = 32


@dataclass(frozen=True)
class AgentRequest:
    """What an agent's permission request asks, read from everything it sent.

    `tool` is the name grants and approvals use (`agent_<kind>`); `hook_tool`/`hook_args` are how the
    user's hooks see it: a command as auger's `shell` call, anything else as `agent_<kind>`."""

    kind: str
    tool: str
    classification: Classification
    command: str | None
    paths: tuple[str, ...]
    confined: bool  # the session's sandbox setting may judge it: an edit of known files, no command

    @property
    def hook_tool(self) -> str:
        return "shell" if self.command is not None else self.tool

    def hook_args(self, title: str, raw_input: Any) -> dict[str, Any]:
        if self.command is not None:
            return {"command": self.command}
        args: dict[str, Any] = {"title": title, "input": raw_input, "paths": list(self.paths)}
        if self.paths:
            args["path"] = self.paths[0]
        return args


def tool_name(kind: str) -> str:
    """The name grants and approvals use for an agent's calls of this kind."""
    return f"agent_{kind if kind in _EFFECTS else 'other'}"


def read_request(kind: str, title: str, raw_input: Any, locations: list[str], edits: list[FileEdit],
                 root: Path) -> AgentRequest:
    """Judge one request; `root` is the directory the session's tools work on (pending mode: the copy)."""
    from auger.policy.effects import strictest

    command, workdir = _command(kind, raw_input)
    paths = _unique([*_paths(raw_input), *locations, *(e.path for e in edits)])
    effect: str = _EFFECTS.get(kind, Effect.LOCAL_MUTATION)
    reasons: list[str] = []
    commands: tuple[tuple[str, ...], ...] = ()
    outside = [p for p in paths if _outside(p, root)]
    if command is not None:
        from auger.tools.shell import classify as classify_shell

        shell = _unconfined(classify_shell({"command": command, "workdir": workdir}, root))
        effect = shell.effect if kind in _RUNS_COMMANDS else strictest(effect, shell.effect)
        commands, reasons = shell.commands, list(shell.reasons)
        outside = _unique([*outside, *shell.outside_paths])
    if edits:  # a diff is a change, whatever the kind says
        effect = strictest(effect, Effect.LOCAL_MUTATION)
    unknown = _unreadable(kind, raw_input, command, paths)
    if unknown:
        effect = strictest(effect, Effect.LOCAL_MUTATION)
        reasons.append(unknown)
    if effect == Effect.READ_ONLY and outside:
        effect = Effect.LOCAL_MUTATION
        reasons.append(f"it reads {outside[0]} outside the project, where no sandbox hides credentials from the agent")
    subject = command if command is not None else paths[0] if paths else title
    c = Classification(effect, subject, commands, tuple(outside), tuple(reasons))
    confined = kind == "edit" and command is None and bool(paths) and not unknown
    return AgentRequest(kind, tool_name(kind), c, command, tuple(paths), confined)


def _unconfined(c: Classification) -> Classification:
    """The analyser's verdict for a command the agent runs itself, with nothing to catch its mistakes."""
    if c.effect != Effect.READ_ONLY:
        return c
    uncertain = next((argv for argv in c.commands if not _read_only_by_name(argv)), None)
    if uncertain is None:
        return c
    reason = (f"{shlex.join(uncertain)} is read-only only by what auger could read of its options and "
              "configuration, and the agent runs it outside auger's sandbox")
    return Classification(Effect.LOCAL_MUTATION, c.subject, c.commands, c.outside_paths, (*c.reasons, reason))


def _read_only_by_name(argv: tuple[str, ...]) -> bool:
    """A program on the analyser's plain read-only list, with no handler reading its options, and named
    without a path (`./cat` is whatever the project put there)."""
    from auger.policy.effects import unwrap
    from auger.policy.shell.programs import READ_ONLY_PROGRAMS
    from auger.policy.shell.registry import HANDLERS

    runs = unwrap(argv)
    if not runs:
        return False
    written = argv[len(argv) - len(runs)]  # the program's word as the command names it
    if "/" in written:
        return False
    return runs[0] == "cd" or runs[0] in READ_ONLY_PROGRAMS and runs[0] not in HANDLERS  # cd only moves the shell


def _command(kind: str, raw_input: Any) -> tuple[str | None, str | None]:
    """The command line a request carries (several are one script), and the directory it names to run in."""
    if kind == "execute" and isinstance(raw_input, str) and raw_input.strip():
        return raw_input, None
    if kind == "execute" and _is_argv(raw_input):
        return shlex.join(raw_input), None
    lines = list(_command_lines(raw_input, 0))
    workdir = next((v for k in _CWD_KEYS if isinstance(raw_input, dict) and isinstance(v := raw_input.get(k), str)),
                   None)
    return ("\n".join(lines) if lines else None), workdir


def _command_lines(value: Any, depth: int) -> Iterator[str]:
    if depth > _MAX_DEPTH:
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str) and _is_command_key(key):
                line = _as_command(_normal(key), item, value)
                if line is not None:
                    yield line
                    continue
            yield from _command_lines(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            yield from _command_lines(item, depth + 1)


def _as_command(key: str, value: Any, owner: dict[str, Any]) -> str | None:
    """A command value: text (with an argv list beside it); under `command`/`cmd` a list of words is an
    argv, under `commands`/`script` a list of command lines (or of argvs)."""
    if isinstance(value, str) and value.strip():
        extra = next((v for k in _ARGV_KEYS if _is_argv(v := owner.get(k)) and v), None)
        return shlex.join([value, *extra]) if extra else value
    if not isinstance(value, list) or not value:
        return None
    if _is_argv(value):
        if _LINE_LIST_KEY.search(key) or len(value) == 1:
            return "\n".join(value)
        return shlex.join(value)
    if all(_is_argv(v) and v for v in value):
        return "\n".join(shlex.join(v) for v in value)
    return None


def _normal(key: str) -> str:
    return key.lower().replace("_", "").replace("-", "")


def _is_command_key(key: str) -> bool:
    return bool(_COMMAND_KEY.search(_normal(key)))


def _is_argv(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(word, str) for word in value)


def _paths(raw_input: Any) -> list[str]:
    """The paths in a request's input: values under path-like keys first, then absolute or `~` paths anywhere."""
    keyed: list[str] = []
    loose: list[str] = []

    def walk(value: Any, key: str | None, depth: int) -> None:
        if depth > _MAX_DEPTH:
            return
        if isinstance(value, dict):
            for k, item in value.items():
                walk(item, k if isinstance(k, str) else None, depth + 1)
        elif isinstance(value, list):
            for item in value:
                walk(item, key, depth + 1)
        elif isinstance(value, str) and _path_like(value):
            if key is not None and _PATH_KEY.search(key) and not _is_command_key(key):
                keyed.append(_strip_uri(value))
            elif value.startswith(("/", "~", "file://")) and (key is None or key.lower() not in _TEXT_KEYS
                                                              and not _is_command_key(key)):
                loose.append(_strip_uri(value))

    walk(raw_input, None, 0)
    return [*keyed, *loose]


def _path_like(text: str) -> bool:
    return bool(text.strip()) and "\n" not in text and len(text) <= 4096 and "\x00" not in text


def _strip_uri(text: str) -> str:
    return text[len("file://"):] if text.startswith("file://") else text


def _unreadable(kind: str, raw_input: Any, command: str | None, paths: list[str]) -> str:
    """Why auger cannot tell what this request does, or ""."""
    if _deeper_than(raw_input, _MAX_DEPTH):
        return f"the agent's input for this {kind} call is nested too deeply to read"
    if raw_input is not None and not isinstance(raw_input, dict) and command is None:
        return f"the agent's input for this {kind} call is not an object auger can read"
    if kind == "execute" and command is None:
        return "the agent's execute call carries no command line auger can read"
    if kind in _CHANGES_FILES and not paths and command is None:
        return f"the agent's {kind} call names no file"
    return ""


def _deeper_than(value: Any, limit: int) -> bool:
    if limit < 0:
        return True
    if isinstance(value, dict):
        return any(_deeper_than(v, limit - 1) for v in value.values())
    if isinstance(value, list):
        return any(_deeper_than(v, limit - 1) for v in value)
    return False


def _unique(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


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
