"""The terminal UI as a client of `auger serve` (`auger --connect URL`, `auger attach`): a session that lives
in the server, followed and driven through the public client (`auger.connect`), so the UI's one seam
(feed.Feed) and its session list (sessions.Sessions) have a second implementation here and the rest of
the UI is the same.

What the server keeps, the UI reads: the session's envelopes from any seq (attaching replays them from the
first, so the transcript is the one every client sees; nothing of it notifies), the user messages other
clients sent (from the items), the state a prompt's status line needs (from the snapshot, then kept by
the events). Ops are posted in the order they were given, each under a submission id of its own, so a
post retried after a lost answer starts nothing twice; a refusal (a role that may not, an approval
someone else answered first) is said in one line. What only the session's machine can answer — its
instruction files, its sub-agents' runs, its MCP servers — is refused with `NotHere`.

Leaving is not ending: Ctrl-D, `/detach` or `/quit` leave the session running in the server.
"""

from __future__ import annotations

import asyncio
import os
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable

from auger.frontends.tui.feed import NotHere
from auger.frontends.tui.sessions import Listed, OpenError
from auger.protocol import events as ev
from auger.protocol.ops import (
    AddMcpServer, ApprovalDecision, CancelAgents, Compact, Interrupt, Op, PendingApply, PendingDiscard,
    PendingRewind, Redo, RemoveMcpServer, Rollback, RunShell, SetBackend, SetMode, SetModel, SetTurnContext,
    Undo, UserTurn,
)
from auger.protocol.vocab import ApprovalOption, Mode

if TYPE_CHECKING:
    from pathlib import Path

    from auger._remote import Client
    from auger._session import Session
    from auger.backends.status import BackendStatus
    from auger.changes.review_change import Change, ReviewTarget
    from auger.config import Config
    from auger.context.agents import AgentDef
    from auger.context.memory import InstructionFile
    from auger.engine.session.init_doc import InitDraft
    from auger.engine.agents.review import ReviewResult
    from auger.engine.agents.subagent_host import AgentRun
    from auger.frontends.tui.feed import Feed
    from auger.protocol.envelope import Envelope
    from auger.tools.mcp_servers import ServerStatus

ITEMS_PAGE = 5000
SEND_DRAIN_S = 10.0  # how long leaving waits for ops still being posted


class RemoteFeed:
    """A session in `auger serve`, as the terminal UI drives it."""

    def __init__(self, client: Client, session: Session, snapshot: dict[str, Any], *, after: int,
                 report: Callable[[str], None]) -> None:
        state = snapshot["state"]
        self.client = client
        self.session = session
        self.after = after
        self.replayed = int(state["last_seq"]) if after == 0 else 0
        self.report = report  # says a refusal in the transcript (set by the UI)
        self._id = str(snapshot["id"])
        self._cwd = self._root = str(snapshot["cwd"])
        self._model, self._mode = str(state.get("model") or ""), str(state.get("mode") or "")
        self._backend = str(state.get("backend") or "")
        self._effort: str | None = None
        self._running = bool(state.get("running_turn"))
        self._tokens, self._cost = 0, snapshot.get("cost")
        self._sent: set[str] = set()  # submission ids of the prompts this UI sent
        self._prompts: dict[str, str] | None = None  # turn id -> the user's message, read from the items
        self._outbox: asyncio.Queue[tuple[Op, str]] = asyncio.Queue()
        self._sender: asyncio.Task[None] | None = None
        self._left = asyncio.Event()

    @property
    def id(self) -> str:
        return self._id

    @property
    def where(self) -> str:
        return self.client.url

    @property
    def model(self) -> str:
        return self._model

    @property
    def mode(self) -> str:
        return self._mode

    @property
    def root(self) -> str:
        return self._root

    @property
    def cwd(self) -> str:
        return self._cwd

    @property
    def turn_running(self) -> bool:
        return self._running

    @property
    def effort(self) -> str | None:
        return self._effort

    @property
    def backend(self) -> str:
        return self._backend

    # -- reading ---------------------------------------------------------------------
    async def events(self) -> AsyncIterator[Envelope]:
        """The session's envelopes after the cursor, until the UI leaves it; a stream the server will not
        give (the user revoked, the server gone for good) is said in one line, and ends."""
        from auger._errors import AugerError

        stream = self.session.follow(self.after)
        leaving = asyncio.ensure_future(self._left.wait())
        step: asyncio.Future[Envelope] | None = None
        try:
            while not self._left.is_set():
                step = asyncio.ensure_future(anext(stream))
                await asyncio.wait({step, leaving}, return_when=asyncio.FIRST_COMPLETED)
                if not step.done():
                    return
                try:
                    envelope = step.result()
                except StopAsyncIteration:
                    return
                except AugerError as exc:
                    self.report(f"✗ lost session {self._id[:8]} in {self.where}: {exc}")
                    return
                self.after = envelope.seq
                self._see(envelope)
                yield envelope
        finally:  # (also when the UI stops drawing it: the read under way is cancelled before the stream closes)
            leaving.cancel()
            if step is not None and not step.done():
                step.cancel()
                await asyncio.gather(step, return_exceptions=True)
            await stream.aclose()  # type: ignore[attr-defined]  # an async generator

    def _see(self, envelope: Envelope) -> None:
        """What the status line and the commands read of the session, kept by its events."""
        event = envelope.event
        if envelope.parent_call_id is not None:
            return
        if isinstance(event, ev.SessionConfigured):
            self._model, self._mode, self._cwd = event.model, str(event.mode), event.cwd
        elif isinstance(event, ev.ModeChanged):
            self._mode = str(event.mode)
        elif isinstance(event, ev.ModelChanged):
            self._model = event.model
        elif isinstance(event, ev.BackendChanged):
            self._backend = event.backend
        elif isinstance(event, ev.TurnContextChanged):
            self._effort, self._cwd = event.effort, event.cwd
        elif isinstance(event, ev.TurnStarted):
            self._running = True
        elif isinstance(event, ev.TurnEnded):
            self._running = False
        elif isinstance(event, ev.TokenUsage):
            self._tokens, self._cost = event.session.total_tokens, event.session_cost

    async def prompt_of(self, envelope: Envelope) -> str | None:
        if not isinstance(envelope.event, ev.TurnStarted) or envelope.submission_id in self._sent:
            return None
        turn = envelope.event.turn_id
        if self._prompts is None or turn not in self._prompts:
            await self._read_prompts(full=self._prompts is None)
        return (self._prompts or {}).get(turn)

    async def _read_prompts(self, *, full: bool) -> None:
        """The user messages of the session's turns, from its items (all of them once, then the newest)."""
        from auger._errors import AugerError

        found = dict(self._prompts or {})
        try:
            page = await self.client.request("GET", f"/api/sessions/{self._id}/items",
                                             params={"limit": str(ITEMS_PAGE if full else 20)}, repeatable=True)
        except AugerError:
            return
        for row in page["items"]:
            item = row.get("item") or {}
            if item.get("type") == "user_message" and isinstance(item.get("text"), str):
                found.setdefault(str(row.get("turn_id")), item["text"])
        self._prompts = found

    def memory_files(self) -> list[InstructionFile]:
        raise self._not_here("the instruction files are read")

    def note_targets(self) -> list[tuple[str, str, Path, str]]:
        raise self._not_here("a note is written to an instruction file")

    def skills(self) -> list[tuple[str, str]]:
        return []

    def prompts(self) -> list[tuple[str, str]]:
        return []

    def agents(self) -> tuple[list[AgentDef], list[AgentRun]]:
        raise self._not_here("its sub-agents are listed")

    def running_agents(self) -> int:
        return 0

    def live_processes(self) -> int:
        return 0

    def backends(self) -> list[BackendStatus]:
        raise self._not_here("the other agents are listed (/backend NAME still switches)")

    async def pending_lines(self) -> list[str] | None:
        from types import SimpleNamespace

        from auger._errors import AugerError
        from auger.frontends.pending_cli import row_lines

        try:
            found = await self.client.request("GET", f"/api/sessions/{self._id}/pending", repeatable=True)
        except AugerError as exc:
            raise NotHere(str(exc)) from None
        return row_lines([SimpleNamespace(kind=f["kind"], path=f["path"], added=f["added"], removed=f["removed"],
                                          proposers=f["proposed_by"], seqs=f["seqs"]) for f in found["files"]])

    def mcp_servers(self) -> list[ServerStatus]:
        raise self._not_here("its MCP servers are listed (/mcp add and /mcp remove still work, for an admin)")

    def usage(self) -> tuple[int, float | None]:
        return self._tokens, self._cost

    def _not_here(self, what: str) -> NotHere:
        return NotHere(f"session {self._id[:8]} runs in {self.where}: {what} only where it runs")

    # -- writing ---------------------------------------------------------------------
    def _post(self, op: Op, submission_id: str | None = None) -> str:
        """Queue an op for the server (posted in order, by one task); its submission id."""
        from auger._session import new_id

        submission_id = submission_id or new_id(f"tui-{op.TYPE}")
        self._outbox.put_nowait((op, submission_id))
        if self._sender is None or self._sender.done():
            self._sender = asyncio.create_task(self._send_all(), name=f"tui-ops-{self._id}")
        return submission_id

    async def _send_all(self) -> None:
        from auger._errors import AugerError, SessionBusy

        while True:
            op, submission_id = await self._outbox.get()
            try:
                await self.session.submit(op, submission_id)
            except SessionBusy as exc:
                self.report(f"✗ {exc}" if not isinstance(op, ApprovalDecision) else f"✗ not answered: {exc}")
            except AugerError as exc:
                self.report(f"✗ {op.TYPE.replace('_', ' ')} refused by {self.where}: {exc}")
            finally:
                self._outbox.task_done()

    def send(self, text: str, images: list[str] | None = None, skills: list[str] | None = None) -> None:
        self._sent.add(self._post(UserTurn(text, images=list(images or []), skills=list(skills or []))))

    def interrupt(self) -> None:
        self._post(Interrupt("interrupted from the terminal"))

    def cancel_agents(self, ids: list[str]) -> None:
        self._post(CancelAgents(ids))

    def decide(self, request_id: str, decision: str, feedback: str | None = None) -> None:
        self._post(ApprovalDecision(request_id, ApprovalOption(decision), feedback))

    def set_mode(self, mode: str) -> None:
        try:
            self._post(SetMode(Mode(mode)))
        except ValueError:
            self.report(f"✗ unknown mode {mode!r}: plan, safe or auto")

    def set_model(self, model: str, provider: str | None = None) -> None:
        self._post(SetModel(model, provider))

    def set_turn_context(self, *, effort: str | None = None, cwd: str | None = None) -> None:
        self._post(SetTurnContext(effort=effort, cwd=cwd))

    def set_backend(self, name: str) -> None:
        self._post(SetBackend(name))

    def compact(self) -> None:
        self._post(Compact())

    def rollback(self, turns: int) -> None:
        self._post(Rollback(turns))

    def undo(self, *, redo: bool = False, force: bool = False) -> None:
        self._post(Redo(force=force) if redo else Undo(force=force))

    def pending(self, action: str, paths: list[str]) -> None:
        self._post(PendingApply(paths) if action == "apply" else PendingDiscard(paths) if action == "discard"
                   else PendingRewind(int(paths[0])))

    def add_mcp_server(self, name: str, table: dict) -> None:
        self._post(AddMcpServer(name, table))

    def remove_mcp_server(self, name: str) -> None:
        self._post(RemoveMcpServer(name))

    def run_shell(self, command: str) -> None:
        self._post(RunShell(command))

    def shutdown(self) -> None:
        """Leave the session: it goes on in the server."""
        self._left.set()

    async def closed(self) -> None:
        """Once left: the ops still queued are posted (for a few seconds at most), then nothing more."""
        if self._sender is not None and not self._sender.done():
            try:
                await asyncio.wait_for(self._outbox.join(), SEND_DRAIN_S)
            except TimeoutError:
                self.report(f"✗ {self._outbox.qsize()} op(s) not sent to {self.where}")
            self._sender.cancel()
            await asyncio.gather(self._sender, return_exceptions=True)


class RemoteSessions:
    """The sessions of one `auger serve`: listed, found, attached to, started and forked there."""

    def __init__(self, config: Config, root: str, client: Client) -> None:
        self.config = config
        self.root = root
        self.client = client
        self.report: Callable[[str], None] = lambda text: None  # the UI's, once it draws

    @property
    def where(self) -> str:
        return self.client.url

    async def recent(self, limit: int = 10) -> list[Listed]:
        """The server's latest sessions, those running a turn first."""
        rows = await self._call(self.client.sessions(limit=limit))
        listed = [Listed(str(r["id"]), str(r.get("title") or ""), float(r.get("updated") or 0),
                         bool(r.get("running"))) for r in rows]
        return sorted(listed, key=lambda row: not row.running)  # stable: newest first within each

    async def find(self, prefix: str) -> Listed:
        rows = await self._call(self.client.sessions(limit=500))
        found = [r for r in rows if r["id"] == prefix] or [r for r in rows if str(r["id"]).startswith(prefix)]
        if len(found) != 1:
            raise OpenError(f"no session of {self.where} matches '{prefix}'" if not found else
                            f"'{prefix}' matches {len(found)} sessions of {self.where}; give more of the id")
        row = found[0]
        return Listed(str(row["id"]), str(row.get("title") or ""), float(row.get("updated") or 0),
                      bool(row.get("running")))

    async def open(self, *, resume: str | None = None, fork: str | None = None) -> Feed:
        """`resume`: attach to the server's session as it is (its transcript shown again from the start);
        `fork`: a copy of it, made there; neither: a new session there, in this directory when it lies
        inside one of the server's roots, else in its first root."""
        if resume:
            snapshot = await self._call(self.client.describe(resume))
            session = await self._call(self.client.attach(resume))
            return RemoteFeed(self.client, session, snapshot, after=0, report=self.report)
        if fork:
            source = await self._call(self.client.attach(fork))
            session = await self._call(source.fork())
        else:
            session = await self._call(self.client.open(await self._cwd()))
        snapshot = await self._call(self.client.describe(session.id))
        return RemoteFeed(self.client, session, snapshot, after=0, report=self.report)

    async def _cwd(self) -> str:
        """Where a new session works: this directory if the server may work in it, else its first root."""
        roots = [str(r) for r in (await self._call(self.client.info()))["roots"]]
        here = os.path.realpath(self.root)
        inside = [r for r in roots if here == r or here.startswith(r.rstrip(os.sep) + os.sep)]
        return here if inside else roots[0]

    async def _call(self, pending: Any) -> Any:
        """The answer, or the server's refusal as an OpenError (one line)."""
        from auger._errors import AugerError

        try:
            return await pending
        except AugerError as exc:
            raise OpenError(str(exc)) from None

    async def review(self, target: ReviewTarget, instructions: str,
                     on_envelope: Callable[[Envelope], None]) -> tuple[Change, ReviewResult] | str:
        return f"the session runs in {self.where}: review there (`auger review` on its machine)"

    async def draft_agents_md(self, on_envelope: Callable[[Envelope], None]) -> InitDraft | str:
        return f"the session runs in {self.where}: draft AGENTS.md there (`auger init` on its machine)"

    async def release(self) -> None:
        return None  # the server holds its sessions

    async def aclose(self) -> None:
        await self.client.aclose()
