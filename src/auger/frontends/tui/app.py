"""The interactive terminal: a prompt (prompt_toolkit) under a transcript printed into the normal
scrollback (rendered by rich), driving one session at a time through `feed.Feed`.

The prompt is drawn before the engine is imported, so it is ready at once; the session opens in the
background and anything typed meanwhile waits for it. The prompt stays usable while a turn runs:
what is typed then is queued and the engine injects it before its next model call.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable
from typing import TYPE_CHECKING

from prompt_toolkit import PromptSession
from prompt_toolkit.filters import Condition
from prompt_toolkit.formatted_text import FormattedText
from prompt_toolkit.key_binding import KeyBindings
from prompt_toolkit.keys import Keys
from prompt_toolkit.styles import Style

from auger.frontends.tui.notify import FOCUS_IN, FOCUS_OFF, FOCUS_ON, FOCUS_OUT, Attention, escape_for, \
    notification_text
from auger.frontends.tui.render import Ansi, Renderer, clean

if TYPE_CHECKING:
    from auger.frontends.tui.feed import Approval, Feed
    from auger.frontends.tui.relay import StoreRelay
    from auger.protocol import events as ev
    from auger.frontends.tui.sessions import Sessions

KEYS = {"approve": "y", "approve_session": "s", "approve_always": "a", "approve_writable_root": "w", "deny": "n",
        "continue": "y", "stop": "n"}
LABELS = {"approve": "yes, once", "approve_session": "yes, this session", "approve_always": "always",
          "approve_writable_root": "yes, and its dir this session",
          "deny": "no", "continue": "continue", "stop": "stop"}
APPROVING = ("approve", "approve_session", "approve_always", "approve_writable_root", "continue")
STYLE = Style.from_dict({
    "dim": "#888888", "running": "ansicyan", "queued": "ansiyellow", "card": "ansiyellow bold",
    "prompt": "bold", "status": "#888888", "status.warn": "ansiyellow",
})


@dataclass
class Choice:
    """A quick question answered with one key (where a note goes, whether to write a file); Esc: None."""

    question: str
    options: tuple[tuple[str, str], ...]  # (key, label)
    answer: asyncio.Future[str | None]


def git_branch(root: Path) -> str:
    """The checked-out branch, read from .git/HEAD (no subprocess: it runs at every redraw's refresh)."""
    for base in (root, *root.parents):
        head = base / ".git"
        if head.is_file():  # a worktree: "gitdir: PATH"
            try:
                head = Path(head.read_text().partition("gitdir:")[2].strip())
            except OSError:
                return ""
        if (head / "HEAD").is_file():
            try:
                ref = (head / "HEAD").read_text().strip()
            except OSError:
                return ""
            return ref.rpartition("/")[2] if ref.startswith("ref:") else ref[:8]
    return ""


class Tui:
    def __init__(self, sessions: Sessions, *, prompt: str | None = None, resume: str | None = None,
                 pick: bool = False, history_path: Path | None = None) -> None:
        self.sessions = sessions
        self.root = Path(sessions.root)
        self.initial = prompt
        self.resume_id = resume
        self.pick_first = pick
        self.history_path = history_path
        self.feed: Feed | None = None
        self.renderer = Renderer(80)
        self.busy = False  # a turn is running
        self.queued: list[str] = []
        self.after_turn: list[tuple[str, Callable[[], None]]] = []  # commands typed during a turn, run at its end
        self.approval: Approval | None = None
        self.feedback_for: Approval | None = None
        self.picking: list | None = None  # sessions offered by the picker
        self.choice: Choice | None = None  # a one-key question waiting for its answer
        self.notice = ""
        self.last_ctrl_c = 0.0
        self.branch = git_branch(self.root)
        self.pump: asyncio.Task | None = None
        self.done = False
        self.failed = False  # no session could be opened: the exit status says so
        self.ps: PromptSession | None = None
        self.attention = Attention()  # focus reports, for desktop notifications (tui/notify.py)
        self.alert = escape_for(os.environ) if sessions.config.tui_notifications else None
        self.turn_started = time.monotonic()
        self.seen_seq = 0  # the last envelope of the session this UI has shown
        self.last_id = ""  # the session left last (for the farewell line)
        self.relay: StoreRelay | None = None  # ops a server leaves for this terminal's session (tui/handoff.py)
        self.handing: asyncio.Task | None = None  # a session handed to a server, until this process lets it go

    # -- output ----------------------------------------------------------------------------
    @property
    def width(self) -> int:
        try:
            return self.ps.app.output.get_size().columns if self.ps else 80
        except Exception:  # no terminal size (tests, pipes): a safe default
            return 80

    def out(self, text: str) -> None:
        if text:
            self.renderer.resize(self.width)
            sys.stdout.write(text if text.endswith("\n") else text + "\n")
            sys.stdout.flush()

    def say(self, text: str, style: str = "cyan") -> None:
        self.out(Ansi(self.width).styled(text, style))

    def notify(self, text: str) -> None:
        """A desktop notification through the terminal, when it has a way and the user looks elsewhere."""
        if self.alert is None or not self.attention.away(time.monotonic() - self.turn_started):
            return
        self.write_raw(self.alert(notification_text(text)))

    def write_raw(self, sequence: str) -> None:
        """An escape sequence for the terminal itself, past the transcript's rendering."""
        if self.ps is not None and self.ps.app.is_running:
            self.ps.app.output.write_raw(sequence)
            self.ps.app.output.flush()
        else:  # between two prompts: stdout is patched raw, so the sequence passes as it is
            sys.stdout.write(sequence)
            sys.stdout.flush()

    def redraw(self) -> None:
        if self.ps is not None and self.ps.app.is_running:
            self.ps.app.invalidate()

    # -- the prompt -----------------------------------------------------------------------
    def message(self):
        self.renderer.resize(self.width)
        lines = list(self.renderer.live_lines())
        lines += [("class:queued", f"queued: {clean(q)[: self.width - 10]}") for q in self.queued]
        lines += [("class:queued", f"after this turn: {clean(c)[: self.width - 18]}") for c, _ in self.after_turn]
        if self.approval is not None and self.feedback_for is None:
            a = self.approval
            keys = [f"[{KEYS[o]}] {LABELS[o]}" for o in a.options if o in KEYS]
            keys += ["[f] no, and say why"] if "deny" in a.options else []
            keys += ["[esc] abort the turn"] if "abort" in a.options else []
            line = "approve? " + "  ".join(keys)
            if len(line) > self.width - 1:  # a narrow terminal: the keys alone still fit in 80 columns
                line = "approve? " + " ".join(k.partition("]")[0] + "]" for k in keys) + "  (/help explains)"
            lines.append(("class:card", line))
        if self.feedback_for is not None:
            lines.append(("class:card", "why not? (Enter sends the denial with your words)"))
        if self.picking is not None:
            lines.append(("class:card", "resume which session? type its number and Enter (Esc: cancel)"))
        if self.choice is not None and self.approval is None:
            keys = "  ".join(f"[{key}] {label}" for key, label in self.choice.options)
            lines.append(("class:card", f"{self.choice.question} {keys}  [esc] cancel"[: self.width - 1]))
        fragments: list[tuple[str, str]] = []
        for style, text in lines:
            fragments += [(style, text), ("", "\n")]
        fragments += [*self.toolbar(), ("", "\n")]
        marker = "… " if self.feed is None and self.picking is None else "› "
        fragments.append(("class:prompt", marker))
        return FormattedText(fragments)

    def toolbar(self) -> list[tuple[str, str]]:
        """The status line, drawn just above the input: the app then takes only the lines it needs
        (a bottom toolbar would stretch it to the screen's foot and push blank lines into the scrollback)."""
        r = self.renderer
        parts = [f"{r.model or 'starting…'}{f' ({r.effort})' if r.effort else ''}", f"{r.mode} mode" if r.mode else ""]
        if r.context_left is not None:
            parts.append(f"{r.context_left:.0f}% context left")
        parts.append(f"{r.tokens:,} tokens")
        parts.append("cost unknown" if r.cost is None else f"${r.cost:.4f}")
        if r.limits:
            parts.append(r.limits)
        if self.branch:
            parts.append(f"⎇ {self.branch}")
        processes = self.feed.live_processes() if self.feed is not None else 0
        if processes:
            parts.append(f"{processes} process{'es' if processes > 1 else ''} running")
        hint = ("esc to interrupt · ctrl-o details" if self.busy else
                "/help · @file · !cmd · ctrl-o details · ctrl-d quit")
        text = clean(" · ".join(p for p in parts if p))[: self.width - 1]
        tail = self.notice or hint
        room = self.width - len(text) - 3
        out = [("class:status", text)]
        if room > 8:
            out.append(("class:status.warn" if self.notice else "class:status", "  " + tail[:room]))
        return out

    def bindings(self) -> KeyBindings:
        _shift_enter_is_newline()
        _focus_reports_are_keys()
        kb = KeyBindings()
        asking = Condition(lambda: self.approval is not None and self.feedback_for is None)
        busy = Condition(lambda: self.busy)
        picking = Condition(lambda: self.picking is not None)
        empty = Condition(lambda: self.ps is not None and not self.ps.default_buffer.text)
        choosing = Condition(lambda: self.choice is not None and self.approval is None)

        @kb.add("<any>", filter=choosing & empty)
        def _(event):
            self.answer_choice(event.data)

        @kb.add("escape", filter=choosing)
        def _(event):
            self.answer_choice(None)

        for key in "ysanw":
            @kb.add(key, filter=asking & empty)
            def _(event, key=key):
                self.answer_key(key)

        @kb.add("f", filter=asking & empty)
        def _(event):
            if self.approval is not None and "deny" in self.approval.options:
                self.feedback_for = self.approval
                self.redraw()

        @kb.add("x", filter=asking & empty)
        @kb.add("escape", filter=asking)
        def _(event):
            self.answer("abort" if "abort" in self.approval.options else self.approval.options[-1])

        @kb.add("escape", filter=~asking & ~choosing & busy)
        def _(event):
            self.interrupt()

        @kb.add("escape", filter=~asking & ~choosing & ~busy & ~picking)
        def _(event):
            self.background_hint()

        @kb.add("escape", filter=picking & ~busy)
        def _(event):
            from auger.frontends.tui.commands import pick_session

            event.app.current_buffer.reset()
            asyncio.ensure_future(pick_session(self, ""))

        @kb.add("c-c")
        def _(event):
            buffer = event.app.current_buffer
            if self.approval is not None:
                self.answer("abort" if "abort" in self.approval.options else self.approval.options[-1])
            elif self.busy:
                self.interrupt()
            elif buffer.text:
                buffer.reset()
            elif time.monotonic() - self.last_ctrl_c < 2:
                event.app.exit(exception=EOFError())
            else:
                self.last_ctrl_c = time.monotonic()
                self.notice = "press ctrl-c again to quit"
                asyncio.get_running_loop().call_later(2, self.clear_notice)

        @kb.add("c-d")
        def _(event):
            if not event.app.current_buffer.text:
                event.app.exit(exception=EOFError())
            else:
                event.app.current_buffer.delete()

        @kb.add("escape", "enter")
        @kb.add("c-j")  # also Shift-Enter, where the terminal reports it (see _shift_enter_is_newline)
        def _(event):
            event.app.current_buffer.insert_text("\n")

        @kb.add("c-o")
        def _(event):
            self.renderer.details = not self.renderer.details
            self.say("details shown: full reasoning, 20 lines of live output, each call's output (ctrl-o hides them)"
                     if self.renderer.details else "details hidden (ctrl-o shows them)", "dim")
            self.redraw()

        @kb.add("c-g")
        def _(event):
            event.app.current_buffer.open_in_editor(validate_and_handle=False)

        @kb.add(Keys.Ignore)  # focus reports arrive as this key (see _focus_reports_are_keys)
        def _(event):
            self.attention.report(event.key_sequence[0].data)

        return kb

    async def choose(self, question: str, options: list[tuple[str, str]]) -> str | None:
        """Ask a one-key question under the prompt; the key pressed (one of `options`), or None for Esc."""
        while self.choice is not None:  # one question at a time: a second waits for the first
            await asyncio.shield(self.choice.answer)
        self.choice = Choice(question, tuple(options), asyncio.get_running_loop().create_future())
        self.redraw()
        try:
            return await self.choice.answer
        finally:
            self.choice = None
            self.redraw()

    def answer_choice(self, key: str | None) -> None:
        choice = self.choice
        if choice is None or choice.answer.done():
            return
        if key is None or key in {k for k, _ in choice.options}:
            choice.answer.set_result(key)

    async def edit(self, path: Path) -> int:
        """Open `path` in the user's editor ($VISUAL, $EDITOR, else vi), the prompt suspended meanwhile;
        the editor's exit status."""
        import shlex
        import subprocess

        from prompt_toolkit.application import run_in_terminal

        editor = shlex.split(os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi")
        path.parent.mkdir(parents=True, exist_ok=True)
        return await run_in_terminal(lambda: subprocess.call([*editor, str(path)]), in_executor=True)

    def clear_notice(self) -> None:
        self.notice = ""
        self.redraw()

    # -- actions ---------------------------------------------------------------------------
    def interrupt(self) -> None:
        if self.feed is not None and self.busy:
            self.feed.interrupt()
            self.notice = "interrupting…"
            self.redraw()

    def background_hint(self) -> None:
        """Esc with no turn running stops nothing: background sub-agents run until they finish, the session
        ends, or the user cancels them; say how, when there are any."""
        running = self.feed.running_agents() if self.feed is not None else 0
        if running:
            self.notice = f"{running} agent(s) keep running: /agents cancel stops them"
            self.redraw()
            asyncio.get_running_loop().call_later(4, self.clear_notice)

    def answer_key(self, key: str) -> None:
        a = self.approval
        if a is None:
            return
        for option in a.options:
            if KEYS.get(option) == key:
                self.answer(option)
                return

    def answer(self, decision: str, feedback: str | None = None) -> None:
        a = self.approval
        if a is None or self.feed is None:
            return
        self.feed.decide(a.request_id, decision, feedback)
        shown = {"abort": "aborted the turn", "deny": "denied"}.get(decision, LABELS.get(decision, decision))
        self.say(f"  → {shown}" + (f": {feedback}" if feedback else ""), "green" if decision in APPROVING else "yellow")
        self.approval = self.feedback_for = None
        self.redraw()

    def show_card(self, a: Approval) -> None:
        from rich.panel import Panel
        from rich.text import Text

        body = Text()
        body.append(clean(a.message) + "\n", style="bold")
        facts = [f for f in (a.effect.replace("_", " ") if a.effect else "", a.reason) if f]
        if facts:
            body.append("why: " + clean(" · ".join(facts)) + "\n", style="")
        for finding in a.findings[:5]:
            body.append(f"  • {clean(finding)}\n", style="dim")
        if a.writable_root:
            body.append(f"[w] lets commands write beneath {clean(a.writable_root)} for the rest of the session\n",
                        style="")
        if a.subject and a.tool == "shell":
            body.append(f"$ {clean(a.subject)}", style="bold magenta")
        body.rstrip()
        ansi = Ansi(self.width)
        self.out(ansi.render(Panel(body, title="approval needed", title_align="left", border_style="yellow",
                                   expand=False)))
        if a.diff:
            self.out(ansi.diff(a.diff, limit=60))
            self.renderer.diffs.pop(a.call_id, None)  # shown here: not again when the call succeeds

    async def events(self, feed: Feed) -> None:
        """Render one session's events until it shuts down (a server's: until this UI leaves it)."""
        from auger.frontends.tui.feed import Approval
        from auger.protocol import events as ev

        async for envelope in feed.events():
            event, parent = envelope.event, envelope.parent_call_id
            self.seen_seq = envelope.seq
            history = envelope.seq <= feed.replayed  # shown again on attaching: nothing to notify
            if parent is not None and isinstance(event, ev.TurnStarted):
                continue  # a sub-agent's turn is not this session's (its end says whether it was cut short)
            if parent is not None and not isinstance(event, (ev.ApprovalRequest, ev.ApprovalResolved)):
                self.out(self.renderer.handle_child(parent, event))  # a sub-agent's activity
                self.redraw()
                continue
            if isinstance(event, ev.TurnStarted):
                self.busy = True
                self.turn_started = time.monotonic()
                prompt = await feed.prompt_of(envelope)  # sent by another client of the session's server
                if prompt is not None:
                    self.say(f"› {prompt}", "bold")
                elif self.queued:  # a message queued as the last turn ended starts this one
                    self.say(f"› {self.queued.pop(0)}", "bold")
            elif isinstance(event, ev.TurnEnded):
                self.busy = False
                self.notice = ""
                self.approval = self.feedback_for = None
                deferred, self.after_turn = self.after_turn, []
                for _, action in deferred:
                    action()
            elif isinstance(event, ev.UserInputInjected) and event.text in self.queued:
                self.queued.remove(event.text)
            if isinstance(event, ev.ApprovalRequest):
                self.approval = Approval.of(event)
                self.show_card(self.approval)
                if not history:
                    self.notify(f"approval needed: {self.approval.subject or self.approval.message}")
            elif isinstance(event, ev.ApprovalResolved):
                self.resolved(event)
            else:
                self.out(self.renderer.handle(event))
            if isinstance(event, ev.TurnEnded):
                self.branch = git_branch(self.root)
                if event.reason != "cancelled" and not history:  # interrupted: whoever interrupted it is here
                    self.notify("turn complete" if event.reason == "complete" else
                                f"turn failed: {event.message or ''}")
            self.redraw()

    def resolved(self, event: ev.ApprovalResolved) -> None:
        """An approval answered somewhere else (another client of the server, a browser): the card goes,
        and the transcript says what was answered, and by whom. (What this UI answers it says at once.)"""
        a = self.approval
        if a is None or a.request_id != event.request_id:
            return
        decision = str(event.decision) if event.decision is not None else ""
        shown = {"abort": "aborted the turn", "deny": "denied", "": "withdrawn"}.get(
            decision, LABELS.get(decision, decision))
        self.say(f"  → {shown}" + (f" (by {event.by})" if event.by else ""),
                 "green" if decision in APPROVING else "yellow")
        self.approval = self.feedback_for = None

    async def switch(self, *, resume: str | None = None, fork: str | None = None) -> bool:
        """Close the current session (if any) and open another; False (and said why) if it failed."""
        from auger.frontends.tui.sessions import OpenError

        if self.busy:
            self.say("a turn is running: interrupt it (esc) first", "yellow")
            return False
        await self.close_session()
        try:
            feed = await self.sessions.open(resume=resume, fork=fork)
        except OpenError as exc:
            self.say(f"✗ {exc}", "red")
            if self.feed is None and not (resume or fork):
                raise
            return False
        self.follow(feed)
        await asyncio.sleep(0)  # the pump subscribes before anything is sent
        return True

    def follow(self, feed: Feed) -> None:
        """Show `feed`'s session from now on (its events drawn by a task of their own)."""
        from auger.frontends.tui.feed import LocalFeed

        self.seen_seq = 0
        self.renderer = Renderer(self.width)
        if isinstance(feed, LocalFeed):
            from auger.frontends.tui.handoff import start_relay

            self.relay = start_relay(self, feed)
        self.feed = feed
        self.pump = asyncio.create_task(self.events(feed))

    async def stop_following(self) -> None:
        """Stop drawing the session's events (`seen_seq` is the last one drawn), to go on from there."""
        if self.pump is not None:
            self.pump.cancel()
            await asyncio.gather(self.pump, return_exceptions=True)

    def continue_with(self, feed: Feed, sessions: Sessions) -> None:
        """The same session, now from another feed (handed to a server): drawn on from where it stopped."""
        self.feed, self.sessions, self.relay = feed, sessions, None
        self.pump = asyncio.create_task(self.events(feed))
        self.redraw()

    async def close_session(self) -> None:
        if self.feed is not None:
            self.last_id = self.feed.id
            self.feed.shutdown()
            if self.pump is not None:
                await self.pump
            await self.feed.closed()  # observers (notify, telemetry) done with its end
            self.feed = None
        await self.sessions.release()

    async def start(self) -> None:
        from auger.frontends.tui.commands import offer_sessions

        try:
            if self.pick_first and await offer_sessions(self):
                return  # the picker's answer opens the session
            ok = await self.switch(resume=await self.resolve(self.resume_id))
            if not ok:  # the asked-for session could not be opened: a new one rather than nothing
                await self.switch()
        except Exception as exc:  # cannot even start a new session: say why and leave
            self.say(f"✗ cannot start a session: {exc}", "red")
            self.done = self.failed = True
            if self.ps is not None and self.ps.app.is_running:
                self.ps.app.exit(exception=EOFError())
            return
        await self.send_initial()

    async def resolve(self, prefix: str | None) -> str | None:
        """The full id of the session to resume: "" is this project's latest; None (and said why) if none."""
        from auger.frontends.tui.sessions import OpenError

        if prefix is None:
            return None
        if prefix == "":
            records = await self.sessions.recent(1)
            if not records:
                self.say("no stored session in this project; starting a new one", "yellow")
            return records[0].id if records else None
        try:
            return (await self.sessions.find(prefix)).id
        except OpenError as exc:
            self.say(f"✗ {exc}; starting a new session", "yellow")
            return None

    async def send_initial(self) -> None:
        """The prompt given on the command line, once a session is open."""
        if self.initial and self.feed is not None:
            prompt, self.initial = self.initial, None
            await self.submit(prompt)

    async def submit(self, text: str) -> None:
        from auger.frontends.tui.commands import pick_session, run_command
        from auger.frontends.tui.compose import compose
        from auger.models.images import ImageError, user_data_url

        if self.feedback_for is not None:
            self.answer("deny", text.strip() or None)
            return
        if self.picking is not None:
            await pick_session(self, text.strip())
            return
        if not text.strip():
            return
        if self.feed is None:  # lines wait in the worker's queue until start() has opened one
            self.say("no session is open", "yellow")
            return
        if text.startswith("/") and not text.startswith("//"):
            await run_command(self, text)
            return
        if text.startswith("!"):
            self.say(f"› {text}", "bold")
            self.user_shell(text[1:].strip())
            return
        if text.startswith("#") and not text.startswith("##"):
            from auger.frontends.tui.commands import add_note

            await add_note(self, text[1:].strip())
            return
        msg = compose(text, self.root)
        try:  # the user's own files, read here and sent as data
            images = await asyncio.to_thread(lambda: [user_data_url(path) for path in msg.images])
        except ImageError as exc:
            self.say(f"message not sent: {exc}", "yellow")
            return
        if self.busy:
            self.queued.append(text)
        else:
            self.say(f"› {text}", "bold")
        for path in msg.attached + msg.images:
            self.say(f"  attached {os.path.relpath(path, self.root)}", "dim")
        self.feed.send(msg.text, images)
        self.redraw()

    def user_shell(self, command: str) -> None:
        if not command:
            self.say("usage: !COMMAND runs it in the project (through the same policy as the agent's)", "yellow")
            return
        if self.busy:
            self.say("a turn is running: run the command after it ends", "yellow")
            return
        assert self.feed is not None, "a shell line waits for the session to open"
        self.busy = True  # until its turn_ended; the session runs it as a turn without a model call
        self.feed.run_shell(command)

    async def run(self) -> None:
        from prompt_toolkit.history import FileHistory, History, InMemoryHistory
        from prompt_toolkit.patch_stdout import patch_stdout

        from auger.frontends.tui.commands import completions
        from auger.frontends.tui.compose import make_completer

        history: History = InMemoryHistory()
        if self.history_path is not None:
            try:
                self.history_path.parent.mkdir(parents=True, exist_ok=True)
                history = FileHistory(str(self.history_path))
            except OSError:
                pass  # an unwritable data dir costs the history, not the session
        self.ps = PromptSession(
            message=self.message, key_bindings=self.bindings(), history=history,
            completer=make_completer(self.root, lambda: completions(self)), complete_while_typing=True,
            style=STYLE, erase_when_done=True, refresh_interval=0.5, reserve_space_for_menu=4,
            include_default_pygments_style=False, color_depth=None)
        # A lone Esc acts at once (it interrupts): Alt+key arrives in one read, so no wait is needed to
        # tell them apart, neither for the terminal's escape sequences nor for Esc-prefixed bindings.
        self.ps.app.ttimeoutlen = 0.05
        self.ps.app.timeoutlen = 0.05
        lines: asyncio.Queue[str] = asyncio.Queue()

        drawn = asyncio.Event()
        self.ps.app.after_render += lambda _app: drawn.set()

        async def work() -> None:
            """Handle submitted lines in order, while the prompt is already back for more typing. The
            session opens only once the prompt is on screen: opening it imports the engine."""
            await drawn.wait()
            self.write_raw(FOCUS_ON)  # a terminal that can now says when it gains and loses focus
            await self.start()
            while True:
                line = await lines.get()
                try:
                    await self.submit(line)
                except Exception as exc:  # one failed command must not leave the prompt dead
                    self.say(f"✗ {type(exc).__name__}: {exc}", "red")

        with patch_stdout(raw=True):
            worker = asyncio.create_task(work())
            try:
                while not self.done:
                    try:
                        lines.put_nowait(await self.ps.prompt_async())
                    except EOFError:
                        break
                    except KeyboardInterrupt:
                        continue
            finally:
                worker.cancel()
                await asyncio.gather(worker, return_exceptions=True)
                await self.close_session()
                await self.sessions.aclose()
                if self.handing is not None and not self.handing.done():
                    self.say("the turn still runs in this process: waiting for it to end, then the server goes on "
                             "with it (ctrl-c stops it here)", "yellow")
                    await self.handing
        sys.stdout.write(FOCUS_OFF)
        if self.renderer.model:
            sys.stdout.write(Ansi(self.width).styled(self.farewell(), "dim"))

    def farewell(self) -> str:
        """The last line: how to come back to the session just left."""
        where, short = self.sessions.where, self.last_id[:8]
        if not where:
            return "auger: session saved; continue it with `auger resume --last`"
        return f"auger: detached; session {short} goes on in {where} (`auger attach {short} --connect {where}`)"


def _focus_reports_are_keys() -> None:
    """A terminal with focus reporting on sends `CSI I` / `CSI O`; prompt_toolkit knows neither and would type
    "[I" into the prompt. Both become the Ignore key, whose binding reads which one it was (tui/notify.py)."""
    from prompt_toolkit.input.ansi_escape_sequences import ANSI_SEQUENCES

    for sequence in (FOCUS_IN, FOCUS_OUT):
        ANSI_SEQUENCES[sequence] = Keys.Ignore


def _shift_enter_is_newline() -> None:
    """Terminals that report Shift-Enter distinctly send `CSI 13;2 u` (the kitty keyboard protocol, also
    foot, WezTerm, Ghostty) or `CSI 27;2;13 ~` (xterm's modifyOtherKeys); prompt_toolkit reads the first
    as nothing and the second as plain Enter, which would send a half-written prompt. Both become Ctrl-J,
    the new-line key. Terminals that send Shift-Enter as Enter cannot be told apart: Alt-Enter and Ctrl-J
    remain for them."""
    from prompt_toolkit.input.ansi_escape_sequences import ANSI_SEQUENCES
    from prompt_toolkit.keys import Keys

    for sequence in ("\x1b[13;2u", "\x1b[27;2;13~"):
        ANSI_SEQUENCES[sequence] = Keys.ControlJ
