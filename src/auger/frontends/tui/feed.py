"""The terminal UI's one seam to a session: how it follows a session's events and sends it ops.

`Feed` is what the UI needs of a session, wherever it runs. `LocalFeed` is a session in this process
(everything the TUI knows of the engine's Session API lives here); `tui/remote.py` has the other, a
session in `auger serve` followed through the public client. What only the session's own machine can
answer (its instruction files, its sub-agents' runs, its MCP servers' state) a remote feed refuses with
`NotHere`, which a command says in one line.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, AsyncIterator, Protocol

from auger.protocol import events as ev
from auger.protocol.vocab import ApprovalOption, Mode
from auger.protocol.ops import (
    AddMcpServer, ApprovalDecision, CancelAgents, Compact, Interrupt, PendingApply, PendingDiscard, PendingRewind, Redo,
    RemoveMcpServer, Rollback, RunShell, SetBackend, SetMode, SetModel, SetTurnContext, Shutdown, Undo, UserTurn,
)

if TYPE_CHECKING:
    from auger.backends.status import BackendStatus
    from auger.context.agents import AgentDef
    from auger.context.memory import InstructionFile
    from auger.engine.session.session import Session
    from auger.engine.agents.subagent_host import AgentRun
    from auger.protocol.envelope import Envelope
    from auger.tools.mcp_servers import ServerStatus


class NotHere(Exception):
    """What a command asked for can only be had on the machine where the session runs; the message says so
    in one line."""


@dataclass(frozen=True)
class Approval:
    """What an approval card shows, read from an ApprovalRequest and its typed details."""

    request_id: str
    call_id: str
    kind: str
    message: str
    options: tuple[str, ...]
    tool: str
    subject: str
    effect: str
    reason: str
    diff: str
    findings: tuple[str, ...]
    writable_root: str = ""  # what `approve_writable_root` would let commands write beneath

    @classmethod
    def of(cls, event: ev.ApprovalRequest) -> Approval:
        d = event.details
        if d is None:  # not about a tool call (the loop guard's question, an MCP server's form)
            return cls(event.request_id, "", event.kind, event.message, tuple(event.options), "", "", "", "", "", ())
        return cls(event.request_id, d.call_id, event.kind, event.message, tuple(event.options), d.tool,
                   d.subject, str(d.effect), d.reason, d.diff or "", tuple(d.findings), d.writable_root or "")


class Feed(Protocol):
    """One open session as the TUI drives it: here (`LocalFeed`) or in a server (`remote.RemoteFeed`)."""

    @property
    def id(self) -> str: ...
    @property
    def where(self) -> str:
        """"" for a session in this process; the server's URL for one in `auger serve`."""
    @property
    def replayed(self) -> int:
        """The seq up to which the events are history the UI is shown again (0: none): no notification for
        them."""
    @property
    def model(self) -> str: ...
    @property
    def mode(self) -> str: ...
    @property
    def root(self) -> str: ...
    @property
    def cwd(self) -> str: ...
    @property
    def turn_running(self) -> bool: ...
    @property
    def effort(self) -> str | None: ...
    @property
    def backend(self) -> str: ...

    def events(self) -> AsyncIterator[Envelope]:
        """The session's envelopes in order, each once, until it shuts down (a local one) or the UI leaves
        it (a remote one)."""
    async def prompt_of(self, envelope: Envelope) -> str | None:
        """The user's message that started the turn `envelope` (a `turn_started`) announces, when another
        client sent it (this UI shows what it sent itself); None otherwise."""
    def memory_files(self) -> list[InstructionFile]: ...
    def note_targets(self) -> list[tuple[str, str, Path, str]]: ...
    def skills(self) -> list[tuple[str, str]]: ...
    def prompts(self) -> list[tuple[str, str]]: ...
    def agents(self) -> tuple[list[AgentDef], list[AgentRun]]: ...
    def running_agents(self) -> int: ...
    def live_processes(self) -> int: ...
    def backends(self) -> list[BackendStatus]: ...
    async def pending_lines(self) -> list[str] | None: ...
    def mcp_servers(self) -> list[ServerStatus]: ...
    def usage(self) -> tuple[int, float | None]: ...
    def send(self, text: str, images: list[str] | None = None, skills: list[str] | None = None) -> None: ...
    def interrupt(self) -> None: ...
    def cancel_agents(self, ids: list[str]) -> None: ...
    def decide(self, request_id: str, decision: str, feedback: str | None = None) -> None: ...
    def set_mode(self, mode: str) -> None: ...
    def set_model(self, model: str, provider: str | None = None) -> None: ...
    def set_turn_context(self, *, effort: str | None = None, cwd: str | None = None) -> None: ...
    def set_backend(self, name: str) -> None: ...
    def compact(self) -> None: ...
    def rollback(self, turns: int) -> None: ...
    def undo(self, *, redo: bool = False, force: bool = False) -> None: ...
    def pending(self, action: str, paths: list[str]) -> None: ...
    def add_mcp_server(self, name: str, table: dict) -> None: ...
    def remove_mcp_server(self, name: str) -> None: ...
    def run_shell(self, command: str) -> None: ...
    def shutdown(self) -> None:
        """Leave the session: a local one is shut down; a remote one keeps running in its server."""
    async def closed(self) -> None:
        """Once left: wait until it is stored and its observers have seen its end (local), or the
        connection is closed (remote)."""


class LocalFeed:
    """A session in this process."""

    where = ""
    replayed = 0

    def __init__(self, session: Session) -> None:
        self.session = session

    # -- reading ---------------------------------------------------------------------
    def events(self) -> AsyncIterator[Envelope]:
        return self.session.subscribe()

    async def prompt_of(self, envelope: Envelope) -> str | None:
        return None  # only this UI sends it prompts

    @property
    def id(self) -> str:
        return self.session.id

    @property
    def model(self) -> str:
        return self.session.client.model

    @property
    def mode(self) -> str:
        return self.session.mode

    @property
    def root(self) -> str:
        return str(self.session.workspace.root)

    @property
    def turn_running(self) -> bool:
        return self.session.turn_running

    @property
    def effort(self) -> str | None:
        """The reasoning effort the next turns ask for (None: the provider's default)."""
        return self.session.settings.effort or self.session.workspace.config.model_reasoning_effort

    @property
    def cwd(self) -> str:
        return str(self.session.cwd)

    def memory_files(self) -> list[InstructionFile]:
        """The instruction files in force now (/memory)."""
        from auger.context.memory import instruction_files

        workspace = self.session.workspace
        return instruction_files(workspace.root, workspace.config_dir, workspace.config, self.session.cwd)

    def note_targets(self) -> list[tuple[str, str, Path, str]]:
        """Where a `#` note may go: (key, label, the root it is written beneath, the path under it)."""
        from auger.context.memory import MEMORY_PATH
        from auger.context.project_docs import doc_path, global_doc_path

        workspace = self.session.workspace
        config = workspace.config
        project = doc_path(workspace.root, config.project_doc_fallback_filenames)
        personal = global_doc_path(workspace.config_dir)
        targets = [("p", f"project {project.name}", workspace.root, project.name),
                   ("g", f"global {personal.name} (every project)", personal.parent, personal.name)]
        if config.memory:
            targets.append(("m", MEMORY_PATH, workspace.root, MEMORY_PATH))
        return targets

    def skills(self) -> list[tuple[str, str]]:
        return [(s.name, s.description) for s in self.session.skills.skills]

    def prompts(self) -> list[tuple[str, str]]:
        """Custom prompts, then the MCP servers' prompts (`mcp__server__prompt`); the engine expands both."""
        from auger.tools.mcp_servers import prompt_commands

        return [*((p.name, p.description or "custom prompt") for p in self.session.workspace.prompts.values()),
                *prompt_commands(self.session.mcp.registry)]

    def agents(self) -> tuple[list[AgentDef], list[AgentRun]]:
        """The sub-agents the model may start, and those this session started (any depth)."""
        index, pool = self.session.agent_index, self.session.agents
        return (list(index.agents.values()) if index is not None else [],
                list(pool.runs.values()) if pool is not None else [])

    def running_agents(self) -> int:
        """How many sub-agents still run (background ones outlive the turn that started them)."""
        return sum(not run.done for run in self.agents()[1])

    def live_processes(self) -> int:
        """How many interactive processes (exec_command's) the session keeps running between turns."""
        sessions = self.session.runtime.state.exec_sessions
        return len(sessions) if sessions is not None else 0

    @property
    def backend(self) -> str:
        return self.session.backend

    def backends(self) -> list[BackendStatus]:
        from auger.backends.status import statuses

        return statuses(self.session.workspace.config.tables)

    def set_backend(self, name: str) -> None:
        self.session.submit(SetBackend(name))

    async def pending_lines(self) -> list[str] | None:
        """The session's pending changes, one line per path; None when it is not in pending mode."""
        import asyncio

        from auger.changes.pending import rows
        from auger.frontends.pending_cli import row_lines
        from auger.policy.fs import RootHandle

        if self.session.pending is None:
            return None
        entries = await self.session.store.load_pending(self.session.id)
        handle = RootHandle(self.session.workspace.root)
        try:
            return row_lines(await asyncio.to_thread(rows, handle, entries))
        finally:
            handle.close()

    def pending(self, action: str, paths: list[str]) -> None:
        if action == "apply":
            self.session.submit(PendingApply(paths))
        elif action == "discard":
            self.session.submit(PendingDiscard(paths))
        else:
            self.session.submit(PendingRewind(int(paths[0])))

    def mcp_servers(self) -> list[ServerStatus]:
        return self.session.mcp.status()

    def usage(self) -> tuple[int, float | None]:
        ledger = self.session.ledger
        return ledger.usage.total_tokens, ledger.cost

    # -- writing ---------------------------------------------------------------------
    def send(self, text: str, images: list[str] | None = None, skills: list[str] | None = None) -> None:
        self.session.submit(UserTurn(text, images=list(images or []), skills=list(skills or [])))

    def interrupt(self) -> None:
        """Stop the running turn; background sub-agents run on (`cancel_agents` stops them)."""
        self.session.submit(Interrupt())

    def cancel_agents(self, ids: list[str]) -> None:
        """Stop the sub-agents named (none: all still running), with their commands."""
        self.session.submit(CancelAgents(ids))

    def decide(self, request_id: str, decision: str, feedback: str | None = None) -> None:
        self.session.submit(ApprovalDecision(request_id, ApprovalOption(decision), feedback))

    def set_mode(self, mode: str) -> None:
        self.session.submit(SetMode(Mode(mode)))

    def set_model(self, model: str, provider: str | None = None) -> None:
        self.session.submit(SetModel(model, provider))

    def set_turn_context(self, *, effort: str | None = None, cwd: str | None = None) -> None:
        self.session.submit(SetTurnContext(effort=effort, cwd=cwd))

    def compact(self) -> None:
        self.session.submit(Compact())

    def rollback(self, turns: int) -> None:
        self.session.submit(Rollback(turns))

    def undo(self, *, redo: bool = False, force: bool = False) -> None:
        self.session.submit(Redo(force=force) if redo else Undo(force=force))

    def shutdown(self) -> None:
        self.session.submit(Shutdown())

    async def closed(self) -> None:
        """Once shut down: wait until it is stored and its observers (notify, telemetry) have seen its end."""
        await self.session.wait_closed()

    def add_mcp_server(self, name: str, table: dict) -> None:
        self.session.submit(AddMcpServer(name, table))

    def remove_mcp_server(self, name: str) -> None:
        self.session.submit(RemoveMcpServer(name))

    def run_shell(self, command: str) -> None:
        """The user's own `!command`: the session runs it through the model's policy, approvals and sandbox."""
        self.session.submit(RunShell(command))
