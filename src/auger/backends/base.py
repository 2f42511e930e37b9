"""What a backend is: an agent process that runs a turn for us and reports it as a stream.

`AgentBackend.prompt` yields `BackendEvent`s: what the agent said, thought and did (normalised from
its protocol's updates), and the requests it makes of us (permission, file reads and writes), each
with a future the consumer answers. Requests travel in the stream rather than as callbacks so that
the turn answers them in its own task, in order with the updates around them: the events they
cause carry the turn's submission id, and a permission asked for a call comes after that call's start.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, AsyncGenerator, Protocol


class BackendError(Exception):
    """The agent cannot run this prompt (not installed, died, broke the protocol); the message says
    which agent and what to do, in one line."""


@dataclass(frozen=True)
class BackendSpec:
    """One configured or known agent: how to start it."""

    name: str
    command: str
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    enabled: bool = True
    label: str = ""
    source: str = "built-in"  # "built-in" or the config file that defines it

    @property
    def title(self) -> str:
        return self.label or self.name


# -- what the stream carries -------------------------------------------------------------
@dataclass(frozen=True)
class TextChunk:
    text: str


@dataclass(frozen=True)
class ThoughtChunk:
    text: str


@dataclass(frozen=True)
class ToolStarted:
    call_id: str
    title: str
    kind: str  # the protocol's tool kind: read, edit, delete, move, search, execute, think, fetch, other
    arguments: dict[str, Any]


@dataclass(frozen=True)
class ToolFinished:
    call_id: str
    ok: bool
    output: str


@dataclass(frozen=True)
class PlanChanged:
    steps: list[tuple[str, str]]  # (text, status: pending | in_progress | completed)


@dataclass(frozen=True)
class UsageReported:
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    reasoning_tokens: int = 0
    context_used: int = 0
    context_window: int = 0


@dataclass(frozen=True)
class FileEdit:
    """A diff in a tool call's content: the file and its text before (None: a new file) and after."""

    path: str
    old: str | None
    new: str


@dataclass
class PermissionAsked:
    """The agent asks whether it may run a tool call. `options` are (id, kind) pairs, kind one of
    allow_once, allow_always, reject_once, reject_always; answer with an option id or None (cancelled).
    `raw_input` is the call's input exactly as sent (any JSON shape), `arguments` its object form;
    `locations` and `edits` are the files the call says it touches and the diffs it carries."""

    call_id: str
    title: str
    kind: str
    arguments: dict[str, Any]
    options: list[tuple[str, str]]
    answer: asyncio.Future[str | None]
    raw_input: Any = None
    locations: list[str] = field(default_factory=list)
    edits: list[FileEdit] = field(default_factory=list)


@dataclass
class ReadRequested:
    """fs/read_text_file: answer with the text, or an exception whose message the agent is told."""

    path: str
    line: int | None
    limit: int | None
    answer: asyncio.Future[str]


@dataclass
class WriteRequested:
    """fs/write_text_file: answer with None once written, or an exception whose message the agent is told."""

    path: str
    content: str
    answer: asyncio.Future[None]


BackendEvent = (TextChunk | ThoughtChunk | ToolStarted | ToolFinished | PlanChanged | UsageReported
                | PermissionAsked | ReadRequested | WriteRequested)


@dataclass(frozen=True)
class Health:
    alive: bool
    pid: int | None
    detail: str = ""


class AgentBackend(Protocol):
    """One agent process serving one auger session."""

    spec: BackendSpec

    @property
    def agent_session_id(self) -> str | None:
        """The agent's own id for this conversation, once it has one (stored, so a resume can load it)."""

    async def ensure_session(self, cwd: str, agent_session_id: str | None) -> str:
        """Start the agent if it is not running, and open its session (loading `agent_session_id`
        when the agent can); returns the agent's session id."""

    def prompt(self, text: str) -> AsyncGenerator[BackendEvent, None]:
        """Run one prompt; the stream ends when the agent's turn does. Raises BackendError."""

    async def cancel(self) -> None:
        """Ask the agent to stop the running prompt."""

    async def close(self) -> None:
        """End the agent's session (the process may stay)."""

    async def dispose(self) -> None:
        """Stop the process and everything it started."""

    def health(self) -> Health: ...

    @property
    def busy(self) -> bool:
        """Whether a prompt is running (an idle reaper must not stop it)."""
