"""Hooks: code the user (or a plugin) runs at fixed points of a session, able to steer it.

Events, and what a hook's reply may do at each:

    session_start    add context for the model                    (context)
    user_prompt      block the prompt with a reason; add context   (decision/reason, context)
    before_tool      deny the call with a reason; rewrite its args (decision/reason, args)
    after_tool       rewrite the output the model sees             (output)
    turn_end         nothing: it is told
    before_compact   nothing: it is told

A hook is a Python callable a plugin registered (tools/plugins.py) or a shell command from the config
(`[[hooks.before_tool]] command = "…" matcher = "shell"`, docs/hooks.md). Both get the same event
object (shell commands as JSON on stdin) and reply the same way: nothing, or an object like
`{"decision": "block", "reason": "…"}`; a shell command may also block by exiting with status 2 (its
stderr is the reason). Hooks of one event run in order, plugins' first; each sees the arguments or
output as the previous one left them; the first block ends the chain.

A hook never takes the session down: one that fails, times out, or prints something that is not a
reply is reported (a warning naming it) and has no effect. Shell hooks run with the command
environment allow-list (policy/env.py), in the project root, in their own process group (killed at the
timeout), with their output read up to a cap. They are the user's own commands and run outside the
sandbox, like the user's shell; a project's config hooks run only with `trust_project_hooks`.

Rewritten arguments are not trusted: the tool runtime validates them and puts them through policy
again (engine/turn/tool_runtime.py), exactly as if the model had sent them.
"""

from __future__ import annotations

import asyncio
import copy
import fnmatch
import inspect
import json
import logging
import os
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from auger.tools.plugins import HOOK_EVENTS, HookRegistration

log = logging.getLogger("auger.hooks")

DEFAULT_TIMEOUT = 10.0  # seconds; `hooks_timeout` in the config, `timeout` per hook
OUTPUT_CAP = 64 * 1024  # bytes of a shell hook's stdout (and of its stderr) that are read
DRAIN_AFTER_EXIT = 0.3  # seconds a background child of an exited hook may hold its pipes
MAX_REASON = 2_000  # characters of a block reason shown to the model
BLOCKS = frozenset({"user_prompt", "before_tool"})  # the events a hook may block
REPLY_FIELDS = {"context": ("session_start", "user_prompt"), "args": ("before_tool",), "output": ("after_tool",)}


@dataclass(frozen=True)
class ShellHook:
    event: str
    command: str
    matcher: str | None = None
    timeout: float = DEFAULT_TIMEOUT
    source: str = "config"  # where it was defined, for the reports


@dataclass
class HookResult:
    """What the hooks of one event decided, and what went wrong on the way (to report as warnings)."""

    blocked: str | None = None  # the reason, when a hook blocked
    context: list[str] = field(default_factory=list)
    args: dict[str, Any] | None = None  # rewritten arguments (before_tool)
    output: str | None = None  # rewritten output (after_tool)
    warnings: list[str] = field(default_factory=list)


def configured_hooks(tables: Mapping[str, Any], *, trust_project: bool,
                     timeout: float = DEFAULT_TIMEOUT) -> tuple[list[ShellHook], list[str]]:
    """The shell hooks of the user's `[hooks]` tables, then the project's (only with `trust_project`);
    and a problem for each bad entry (skipped) or untrusted project hook."""
    hooks: list[ShellHook] = []
    problems: list[str] = []
    for key, source in (("hooks", "user config"), ("project_hooks", "project config")):
        table = tables.get(key)
        if not table:
            continue
        if not isinstance(table, dict):
            problems.append(f"[{key}] in the {source} must be a table of [[hooks.EVENT]] entries (ignored)")
            continue
        if key == "project_hooks" and not trust_project:
            problems.append("the project's .auger/config.toml defines hooks; they are not run (set "
                            "trust_project_hooks = true in your user config to run them)")
            continue
        for event, entries in table.items():
            if event not in HOOK_EVENTS:
                problems.append(f"hooks.{event} ({source}): unknown event; one of {', '.join(HOOK_EVENTS)} (ignored)")
                continue
            for i, entry in enumerate(entries if isinstance(entries, list) else [entries]):
                hook = _parse_entry(event, entry, source, timeout)
                if isinstance(hook, str):
                    problems.append(f"hooks.{event}[{i}] ({source}): {hook} (ignored)")
                else:
                    hooks.append(hook)
    return hooks, problems


def _parse_entry(event: str, entry: Any, source: str, timeout: float) -> ShellHook | str:
    if not isinstance(entry, dict):
        return "expected a table with a `command`"
    unknown = sorted(set(entry) - {"command", "matcher", "timeout"})
    if unknown:
        return f"unknown key(s) {', '.join(unknown)}"
    command, matcher, limit = entry.get("command"), entry.get("matcher"), entry.get("timeout", timeout)
    if not isinstance(command, str) or not command.strip():
        return "`command` must be a non-empty string"
    if matcher is not None and not isinstance(matcher, str):
        return "`matcher` must be a string"
    if isinstance(limit, bool) or not isinstance(limit, (int, float)) or limit <= 0:
        return "`timeout` must be a number of seconds > 0"
    return ShellHook(event, command, matcher, float(limit), source)


def matches(matcher: str | None, subject: str | None) -> bool:
    """A matcher is `|`-separated glob patterns over the tool name (`shell`, `write_*|edit_file`, `*`);
    none matches everything. Events without a subject match every hook."""
    if not matcher or subject is None:
        return True
    return any(fnmatch.fnmatchcase(subject, p.strip()) for p in matcher.split("|") if p.strip())


class Hooks:
    """One session's hooks: the plugins' and the configured shell commands, with what they run with."""

    def __init__(self, shell: Sequence[ShellHook], python: Sequence[HookRegistration], *, cwd: Path,
                 env: Mapping[str, str] | None, session_id: str, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.shell = list(shell)
        self.python = list(python)
        self.cwd = cwd
        self.env = dict(os.environ if env is None else env)
        self.env["AUGER_PROJECT_DIR"] = str(cwd)
        self.session_id = session_id
        self.timeout = timeout

    def has(self, event: str) -> bool:
        return any(h.event == event for h in self.python) or any(h.event == event for h in self.shell)

    async def run(self, event: str, data: dict[str, Any], *, subject: str | None = None) -> HookResult:
        """Run the event's matching hooks in order; `data` is the event object without the common fields."""
        result = HookResult()
        chain: list[tuple[str, Callable[[dict[str, Any]], Any]]] = [
            *((f"plugin {h.plugin!r} hook", self._python(h)) for h in self.python
              if h.event == event and matches(h.matcher, subject)),
            *((f"hook `{_short(h.command)}` ({h.source})", self._shell(h)) for h in self.shell
              if h.event == event and matches(h.matcher, subject))]
        for label, run in chain:
            payload = {"event": event, "session_id": self.session_id, "cwd": str(self.cwd), **data}
            if result.args is not None:
                payload["args"] = result.args
            if result.output is not None:
                payload["output"] = result.output
            try:
                reply = await run(payload)
            except _HookFailed as exc:
                result.warnings.append(f"{event} {label}: {exc}; ignored")
                continue
            if reply is not None and _apply(event, reply, result, label):
                break
        return result

    def _python(self, hook: HookRegistration) -> Callable[[dict[str, Any]], Any]:
        async def run(payload: dict[str, Any]) -> dict[str, Any] | None:
            try:
                reply = hook.fn(copy.deepcopy(payload))  # a hook changes the call only by replying
                if inspect.isawaitable(reply):
                    async with asyncio.timeout(self.timeout):
                        reply = await reply
            except TimeoutError:
                raise _HookFailed(f"did not answer within {self.timeout:g} s") from None
            except Exception as exc:
                log.debug("hook failed", exc_info=True)
                raise _HookFailed(f"failed: {type(exc).__name__}: {_one_line(str(exc))}") from None
            if reply is not None and not isinstance(reply, dict):
                raise _HookFailed(f"returned {type(reply).__name__}, not None or a dict")
            return reply

        return run

    def _shell(self, hook: ShellHook) -> Callable[[dict[str, Any]], Any]:
        async def run(payload: dict[str, Any]) -> dict[str, Any] | None:
            code, out, err = await self._spawn(hook, json.dumps(payload).encode())  # ASCII: lone surrogates escaped
            if code == 2:
                reason = _one_line(err.decode("utf-8", "replace"), MAX_REASON) or "blocked by a hook"
                return {"decision": "block", "reason": reason}
            if code != 0:
                tail = _one_line(err.decode("utf-8", "replace")[-500:])
                raise _HookFailed(f"failed (exit status {code}){': ' + tail if tail else ''}")
            text = out.decode("utf-8", "replace").strip()
            if not text:
                return None
            from auger.protocol.jsontext import loads as loads_bounded

            try:
                reply = loads_bounded(text)
            except ValueError:
                raise _HookFailed(f"printed something that is not a JSON object: {_one_line(text, 120)!r}") from None
            if not isinstance(reply, dict):
                raise _HookFailed(f"printed JSON that is not an object: {_one_line(text, 120)!r}")
            return reply

        return run

    async def _spawn(self, hook: ShellHook, stdin: bytes) -> tuple[int, bytes, bytes]:
        """Run the command with the event on stdin; (exit status, stdout, stderr), each output capped."""
        try:
            proc = await asyncio.create_subprocess_exec(
                "/bin/sh", "-c", hook.command, cwd=self.cwd, env=self.env, start_new_session=True,
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        except OSError as exc:
            raise _HookFailed(f"could not be started: {exc.strerror or exc}") from None
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        out, err = bytearray(), bytearray()
        readers = [asyncio.ensure_future(_read_capped(proc.stdout, out)),
                   asyncio.ensure_future(_read_capped(proc.stderr, err))]
        try:
            async with asyncio.timeout(hook.timeout):
                await _feed(proc.stdin, stdin)
                code = await proc.wait()
                await asyncio.wait(readers, timeout=DRAIN_AFTER_EXIT)
        except TimeoutError:
            raise _HookFailed(f"did not finish within {hook.timeout:g} s and was killed") from None
        finally:
            _kill_group(proc.pid)
            for reader in readers:
                reader.cancel()
            await asyncio.gather(*readers, return_exceptions=True)
            if proc.returncode is None:
                await proc.wait()
        return code, bytes(out), bytes(err)


async def _feed(pipe: asyncio.StreamWriter, data: bytes) -> None:
    """Write the event; a hook that does not read its input is not an error."""
    try:
        pipe.write(data)
        await pipe.drain()
    except (BrokenPipeError, ConnectionResetError):
        pass
    finally:
        pipe.close()


async def _read_capped(stream: asyncio.StreamReader, kept: bytearray) -> None:
    """Up to OUTPUT_CAP bytes into `kept`; the rest is read and dropped, so a chatty hook never blocks
    on its pipe."""
    while chunk := await stream.read(65536):
        if len(kept) < OUTPUT_CAP:
            kept += chunk[:OUTPUT_CAP - len(kept)]


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _apply(event: str, reply: dict[str, Any], result: HookResult, label: str) -> bool:
    """Fold one reply into the result; True when it blocked (the chain stops). Fields the event does not
    take, or of the wrong type, are reported and left out."""
    decision = reply.get("decision")
    if decision not in (None, "block", "allow", "approve"):
        result.warnings.append(f"{event} {label}: unknown decision {_one_line(str(decision), 40)!r}; ignored")
    for name, events in REPLY_FIELDS.items():
        if name not in reply:
            continue
        value = reply[name]
        if event not in events:
            result.warnings.append(f"{event} {label}: `{name}` is not taken at {event}; ignored")
        elif name == "args" and isinstance(value, dict):
            result.args = value
        elif name == "context" and isinstance(value, str):
            result.context.append(value)
        elif name == "output" and isinstance(value, str):
            result.output = value
        else:
            result.warnings.append(f"{event} {label}: `{name}` must be {'an object' if name == 'args' else 'a string'}"
                                   "; ignored")
    if decision != "block":
        return False
    if event not in BLOCKS:
        result.warnings.append(f"{event} {label}: a {event} hook cannot block; ignored")
        return False
    reason = reply.get("reason")
    text = _one_line(reason, MAX_REASON) if isinstance(reason, str) else ""
    result.blocked = text or "blocked by a hook"
    return True


class _HookFailed(Exception):
    """A hook that failed, timed out or answered nonsense; the message says which, in one line."""


def _short(command: str) -> str:
    return _one_line(command, 60)


def _one_line(text: str, limit: int = 300) -> str:
    return " ".join(text.split())[:limit]
