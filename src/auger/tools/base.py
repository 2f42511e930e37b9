"""What every tool is made of: a spec beside its handler, a context, a result.

A handler raises `ToolError` for anything the model can fix (bad arguments, a path
outside the project, a missing file); the turn turns it into an error output the
model reads. Any other exception is an internal bug and is reported as such.
"""

from __future__ import annotations

import os
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Protocol, Sequence

from auger.lazy_dataclass import Deferred, dataclass
from auger.policy.types import Classification, Effect
from auger.protocol.events import Diagnostic

if TYPE_CHECKING:
    from auger.context.skills import SkillIndex
    from auger.policy.fs import RootHandle
    from auger.secrets.protected import ProtectedFiles, Reason
    from auger.secrets.redact import Redactor

# The effect vocabulary belongs to policy/types.py; tools name their static effect with these.
READ_ONLY, LOCAL_MUTATION, REMOTE_ACTION, DESTRUCTIVE = (
    Effect.READ_ONLY, Effect.LOCAL_MUTATION, Effect.REMOTE_ACTION, Effect.DESTRUCTIVE)


class ToolError(Exception):
    """A failure the model caused and can fix; its message is shown to the model."""


class ProtectedFileRefused(ToolError):
    """A call refused only because it would read or change protected files (secrets/protected.py). The tool
    runtime says so (a warning) and, in an interactive session, may ask the user to allow this one call."""

    def __init__(self, tool: str, reasons: Sequence[Reason]) -> None:
        self.tool = tool
        self.reasons = tuple(reasons)
        self.paths = tuple(dict.fromkeys(r.path for r in reasons))
        described = "; ".join(r.describe() for r in self.reasons)
        super().__init__(
            f"{described}. The agent may not read or change protected files: the user can allow one call when asked "
            "(interactive sessions), or allow the file in their user config (`[secrets] allow = [\"PATH\"]`); "
            "`auger secrets check` lists what is protected and why. Do not try to read it another way.")


class CallsAborted(Exception):
    """The user ended the turn at the approval of a call a tool made on its caller's behalf (run_code's
    inner calls): the tool runtime ends the outer call as the user's abort, as it would a direct one."""


@dataclass
class ToolResult(Deferred):
    output: str  # the text the model sees
    ok: bool = True
    full_output: str | None = None  # stored for `recall` when larger than `output`
    metadata: dict[str, Any] = field(default_factory=dict)  # informational, for events and tests
    events: list[Any] = field(default_factory=list)  # protocol events to emit once the output is committed
    sandbox_denial: str | None = None  # why the sandbox blocked the command, when it did (the runtime may ask)
    images: list[str] = field(default_factory=list)  # data URLs for the model, sent after the output (turn/turn.py)
    # what the language servers found this call's change introduced (protocol Diagnostics; the output says it too)
    diagnostics: list[Diagnostic] = field(default_factory=list)


class OutputArchive(Protocol):
    """Read access to this session's stored tool outputs (for `recall`)."""

    async def get_output(self, call_id: str) -> tuple[str, str, str] | None:
        """(tool name, arguments JSON, full output) of one call, or None."""

    async def list_outputs(self) -> list[tuple[str, str, str, str]]:
        """(call id, tool name, arguments JSON, full output) of every call, oldest first."""

    async def search_messages(self, query: str) -> list[tuple[str, str]]:
        """(label, text) of conversation messages containing `query`, archived ones included."""


@dataclass
class FileStamp(Deferred):
    mtime_ns: int
    size: int

    @classmethod
    def of(cls, path: Path) -> FileStamp:
        st = os.stat(path)
        return cls(st.st_mtime_ns, st.st_size)


class ClientFiles(Protocol):
    """Files as the user's editor holds them (ACP `fs/*`), unsaved changes included.

    When a session has one, the file tools still resolve every path beneath the root first (and
    run every policy check before that); only the content goes through the editor, addressed by the
    absolute, symlink-free path that resolution produced. Failures are ToolErrors the model reads."""

    reads: bool
    writes: bool

    async def read_text(self, path: Path) -> str: ...

    async def write_text(self, path: Path, text: str) -> None: ...


class ClientTerminal(Protocol):
    """Runs a command in a terminal of the user's editor (ACP `terminal/*`), where the user sees it.

    The editor's terminal is outside auger's sandbox, so the shell tool sends it only commands that
    passed the policy as changes (read-only ones keep the read-only sandbox), and a session that has
    one is treated as unsandboxed by the policy (auto asks like safe)."""

    async def run(self, argv: list[str], cwd: Path, timeout: float, call_id: str) -> tuple[str, int | None, bool]:
        """(the terminal's output, the exit code or None when killed by a signal, whether it timed out)."""


class LiveSessions(Protocol):
    """A runtime's interactive processes (exec_command's, tools/exec_sessions.py): counted where a front
    end shows them, ended with whoever started them."""

    def __len__(self) -> int: ...

    async def close(self) -> None: ...


@dataclass(frozen=True)
class ExecLimits(Deferred):
    """How many interactive processes a runtime keeps (the oldest idle one ends to make room), and how long
    one may sit unused before it ends (config: exec_sessions_max, exec_session_idle_timeout)."""

    max_sessions: int = 8
    idle_timeout: float = 600.0


@dataclass
class SessionToolState(Deferred):
    """Mutable per-session state the tools share; one per Session (a sub-agent has its own), never shared."""

    scratch_dir: Path
    read_stamps: dict[Path, FileStamp] = field(default_factory=dict)
    created_files: set[Path] = field(default_factory=set)
    background: dict[int, Any] = field(default_factory=dict)  # pid -> process handle
    exec_limits: ExecLimits = field(default_factory=ExecLimits)
    exec_sessions: LiveSessions | None = None  # made at the first exec_command
    plan: list[dict] | None = None  # the model's current plan (update_plan), kept across compaction
    root_handle: RootHandle | None = None  # the project root, opened once (see auger.policy.fs)
    client_files: ClientFiles | None = None  # an editor's buffers, when a front end offers them (ACP)
    client_terminal: ClientTerminal | None = None  # an editor's terminals, likewise
    protected: ProtectedFiles | None = None  # the root's protected files (made at first use: tools/protection.py)


@dataclass(frozen=True)
class Transcript(Deferred):
    """A caller's conversation, for a tool that must know where a text came from: `web_fetch` fetches only
    URLs that reached the conversation from outside the model (tools/provenance.py).

    `from_person`: its user messages are the user's own (a sub-agent's are its parent agent's words);
    `since`: when the session began (a file changed after it may hold what the model wrote); `root`: the
    project itself, where a file the model read is looked at again (in pending mode the tools read a copy,
    made when the session opened); `archive`: the full outputs of its calls; `parent`: the caller's
    caller's transcript, for a sub-agent."""

    items: Callable[[], Sequence[Any]]
    from_person: bool
    since: float
    root: Path
    archive: OutputArchive
    parent: Transcript | None = None


@dataclass
class ToolContext(Deferred):
    root: Path
    state: SessionToolState
    call_id: str
    archive: OutputArchive
    turn_id: str = ""
    emit_output: Callable[[str, str], None] = lambda stream, text: None
    env: dict[str, str] | None = None
    sandbox: CommandSandbox | None = None
    skills: SkillIndex | None = None  # the session's current skills (the `skill` tool)
    # the caller's trust mode now (a sub-agent's may be stricter than the session's): commands run read-only by it
    mode: Callable[[], str] | None = None
    cwd: Path | None = None  # where commands run unless told otherwise: the session's working directory (root: None)
    transcript: Transcript | None = None  # the caller's conversation (web_fetch's provenance check)
    call_tool: ToolCaller | None = None  # the caller's other tools, for a tool that runs them (run_code)
    # protected files the user let this one call read or change (root-relative paths; tools/protection.py)
    protected_grant: frozenset[str] = frozenset()
    # the session's redaction of secret values: a file tool puts back the values of the markers the model
    # kept (`reveal`), and refuses one it cannot (auger/secrets/redact.py); None: nothing was redacted
    secrets: Redactor | None = None


class ToolCaller(Protocol):
    """The tools a call may run on its caller's behalf (run_code's program), each call going through the
    tool runtime's whole pipeline — hooks, policy, approval, sandbox, mutation hooks — announced as a child
    of the calling call (engine/turn/inner_calls.py)."""

    def specs(self) -> Sequence[ToolSpec]:
        """The tools it may call (the caller's catalog, without the calling tool)."""

    async def call(self, name: str, args: dict[str, Any]) -> ToolResult:
        """Run one call; a refusal or failure is a result that is not ok. Raises ToolError when the caller
        may make no more calls (a limit), CallsAborted when the user ended the turn at its approval."""


class CommandSandbox(Protocol):
    """Confines a command (see auger.policy.confinement.Confinement)."""

    async def spawn(self, argv: list[str], cwd: Path, env: dict[str, str], stdio: tuple[int, int, int],
                    effect: str, mode: str | None = None, tty: bool = False, offline: bool = False) -> Any: ...

    def open_log(self) -> tuple[int, Path]: ...

    async def explain(self, exit_code: int | None, stderr: str, since: float, readonly: bool = False) -> str | None:
        ...

    @property
    def writes_confined(self) -> bool: ...

    def readonly_for(self, effect: str) -> bool: ...


Handler = Callable[[dict[str, Any], ToolContext], Awaitable[ToolResult]]


Classifier = Callable[[dict[str, Any], Path], Classification]
# A per-call effect that depends on more than the arguments: the session's state or mode (write_stdin: the
# process it types into; run_code: plan mode makes its program read-only).
ContextClassifier = Callable[[dict[str, Any], "ToolContext"], Classification]
Previewer = Callable[[dict[str, Any], ToolContext], Awaitable[str]]
# A check that needs the call's context (the conversation), run before the policy decision: the reason the
# call may never run (a policy refusal, whatever the mode or an approval), or None.
Gate = Callable[[dict[str, Any], ToolContext], Awaitable[str | None]]


@dataclass(frozen=True)
class ToolSpec(Deferred):
    name: str
    description: str
    parameters: dict[str, Any]  # JSON schema of the arguments object
    handler: Handler
    effect: str = READ_ONLY
    parallel_safe: bool = False  # may run concurrently with other parallel-safe calls
    # A read whose only effect is its result: a call the policy lets run unasked may start while the model's
    # reply still streams, and be cancelled and forgotten if that reply is dropped (engine/early_calls.py).
    starts_early: bool = False
    classifier: Classifier | None = None  # per-call effect (shell); default: the static `effect`
    previewer: Previewer | None = None  # shows the change an approval is asked for (a diff)
    gate: Gate | None = None  # refuses a call before policy asks (web_fetch: a URL the model made up)
    context_classifier: ContextClassifier | None = None  # per-call effect read from the call's context; wins
    calls_tools: bool = False  # runs the caller's other tools (ToolContext.call_tool: run_code)

    def classify(self, args: dict[str, Any], root: Path) -> Classification:
        if self.classifier is not None:
            return self.classifier(args, root)
        return Classification(self.effect, subject_of(self.name, args))

    def classify_call(self, args: dict[str, Any], ctx: ToolContext) -> Classification:
        """The effect of one call as the runtime decides it: from its context where the tool reads one."""
        if self.context_classifier is not None:
            return self.context_classifier(args, ctx)
        return self.classify(args, ctx.root)

    def validate(self, args: Any) -> dict[str, Any]:
        """Check and normalise arguments against the schema; raise ToolError saying what is wrong."""
        return _validate_object(self.name, self.parameters, args)


def subject_of(tool: str, args: dict[str, Any]) -> str:
    """What a user approves for a call of a tool with a fixed effect: the path or command it names, or the tool."""
    return str(args.get("path") or args.get("command") or tool)


def _validate_object(tool: str, schema: dict[str, Any], args: Any) -> dict[str, Any]:
    if not isinstance(args, dict):
        raise ToolError(f"{tool}: arguments must be a JSON object, got {type(args).__name__}")
    props: dict[str, Any] = schema.get("properties", {})
    missing = [name for name in schema.get("required", []) if args.get(name) is None]
    unknown = [k for k in args if k not in props]
    problems = []
    if missing:
        problems.append(f"missing required argument(s): {', '.join(missing)}")
    if unknown:
        problems.append(f"unknown argument(s): {', '.join(unknown)} (accepted: {', '.join(props)})")
    if problems:
        raise ToolError(f"{tool}: " + "; ".join(problems))
    out: dict[str, Any] = {}
    for name, value in args.items():
        if value is None:
            continue
        out[name] = _coerce(tool, name, props[name], value)
    return out


def _coerce(tool: str, name: str, prop: dict[str, Any], value: Any) -> Any:
    """Accept what models commonly send (\"10\" for 10, \"true\" for true); refuse the rest."""
    kind = prop.get("type")
    if isinstance(kind, list):  # one of several types: the first that takes the value
        for option in kind:
            try:
                return _coerce(tool, name, {**prop, "type": option}, value)
            except ToolError:
                continue
        raise ToolError(f"{tool}: argument '{name}' must be {_describe(prop)}, got {value!r}")
    bad = ToolError(f"{tool}: argument '{name}' must be {_describe(prop)}, got {value!r}")
    if kind == "string":
        if not isinstance(value, str):
            raise bad
        _check_encodable(tool, name, value)
    elif kind == "integer":
        if isinstance(value, bool):
            raise bad
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        elif isinstance(value, str):
            try:
                value = int(value.strip())
            except ValueError:
                raise bad from None
        if not isinstance(value, int):
            raise bad
        if "minimum" in prop and value < prop["minimum"]:
            raise ToolError(f"{tool}: argument '{name}' must be >= {prop['minimum']}, got {value}")
    elif kind == "boolean":
        if isinstance(value, str) and value.lower() in ("true", "false"):
            value = value.lower() == "true"
        if not isinstance(value, bool):
            raise bad
    elif kind == "array":
        if not isinstance(value, list):
            raise bad
        item_schema = prop.get("items")
        if item_schema:
            value = [_coerce(tool, f"{name}[{i}]", item_schema, v) for i, v in enumerate(value)]
    elif kind == "object":
        value = _validate_object(tool, prop, value)
    if "enum" in prop and value not in prop["enum"]:
        raise bad
    return value


def _check_encodable(tool: str, name: str, value: str) -> None:
    """Refuse a lone surrogate (legal in JSON) that no file, command line or pattern can hold.

    Surrogates U+DC80..U+DCFF are allowed: they are how undecodable bytes of a file or file name
    were shown to the model (surrogateescape), and they encode back to those bytes."""
    try:
        value.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError as exc:
        raise ToolError(f"{tool}: argument '{name}' contains a lone surrogate "
                        f"({value[exc.start:exc.end].encode('unicode_escape').decode()} at offset {exc.start}), "
                        "which cannot be written as UTF-8 (not in a file, a command line or a pattern); "
                        "send valid Unicode") from None


def _describe(prop: dict[str, Any]) -> str:
    if "enum" in prop:
        return "one of " + ", ".join(repr(v) for v in prop["enum"])
    kinds = prop.get("type", "")
    names = {"string": "a string", "integer": "an integer", "boolean": "true or false", "array": "an array",
             "object": "an object"}
    if isinstance(kinds, list):
        return " or ".join(names.get(kind, str(kind)) for kind in kinds)
    return names.get(kinds, "valid")
