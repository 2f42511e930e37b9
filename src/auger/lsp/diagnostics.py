"""The errors a change introduced: the language servers' diagnostics of the files a call changed, and of the
files that use them, compared with what the servers reported before the change.

For each changed file that has a server: a file the server does not have open yet is first opened with
its text *before* the call (what a file tool read just before it ran, or the snapshot's copy for a shell
command), and the files that mention its module's name (at most DEPENDENTS_MAX, found with a word search)
are opened as they are; their diagnostics are the baseline (an open file's last diagnostics are). Then the
server is given the new text and asked again. A problem is compared by what it says (severity, message,
source, code), not by its line, so a pre-existing error that an edit moved is not told again; what is new
is "introduced", what went away is "fixed". Problems less serious than a server's `severity` (errors, by
default) are left out, and two servers reporting the same place (pyright and ruff on an undefined name)
count once.

The whole check waits at most `wait` seconds (config `diagnostics_wait`), server start-up included. What
is not done by then goes on in the background, and the result says so; what it finds and is still true is
told with a later call's result (`late`), so a server that is slow only once — starting — costs nothing
more. While a server's earlier check still runs, later calls do not wait for it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import posixpath
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Awaitable

from auger.lsp.client import LanguageServer, ServerFailed, char_column
from auger.lsp.files import Project
from auger.lsp.jsonrpc import RpcError
from auger.lsp.manager import LanguageServers
from auger.lsp.servers import ServerSpec
from auger.protocol.events import Diagnostic
from auger.protocol.vocab import Severity

log = logging.getLogger("auger.lsp")

MAX_LINES = 20  # diagnostics told in one result; the rest are counted
MAX_BYTES = 2048  # bytes of diagnostics text in one result
MAX_MESSAGE = 300  # characters of one message
DEPENDENTS_MAX = 10  # files that use a changed file, opened to see what the change broke there
BACKGROUND_MAX = 120.0  # seconds a check may go on after its call's result went back
OPEN_DOCUMENTS_MAX = 60  # documents a server keeps open; the least recently checked are closed
_SEVERITIES = {1: Severity.ERROR, 2: Severity.WARNING, 3: Severity.INFORMATION, 4: Severity.HINT}
SYNTAX = "syntax"  # the code given to a syntax error whose server gave it none (pyright, tsserver's syntactic pass)
SYNTAX_CODES = frozenset({SYNTAX, "invalid-syntax", "E999", "syntax-error"})
_CODELESS_SYNTAX = ("pyright", "basedpyright")  # servers whose every other error has a rule code


@dataclass
class Report:
    """What one check found: for the result's text and its `tool_call_ended` event."""

    introduced: list[Diagnostic] = field(default_factory=list)
    fixed: list[Diagnostic] = field(default_factory=list)
    checked: list[str] = field(default_factory=list)  # the servers that answered
    notices: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)  # the changed files it is about

    def add(self, other: Report) -> None:
        self.introduced += other.introduced
        self.fixed += other.fixed
        self.checked += other.checked
        self.notices += other.notices


class ChangeDiagnostics:
    """One session's diagnostics after changes (engine/session/code_intel.py calls it around mutating calls)."""

    def __init__(self, servers: LanguageServers, project: Project, wait: float) -> None:
        self.servers = servers
        self.project = project
        self.wait = wait
        self._before: dict[str, dict[str, str | None]] = {}  # call -> its files' texts before it ran
        self._busy: dict[str, asyncio.Task[Report]] = {}  # server name -> its check still running
        self._late: list[Report] = []
        self._told: set[tuple[str, int, int]] = set()  # places of problems told, since their file last changed
        self._notices: list[str] = []
        servers.notice = self._notices.append

    def remember(self, key: str, rels: list[str]) -> None:
        """Before a file tool runs: its files' texts now (None: absent), the baseline of its change."""
        served = {rel: self.project.read(rel) for rel in rels if self.serves(rel)}
        if served:
            self._before[key] = served

    def remembers(self, key: str) -> bool:
        return key in self._before

    def forget(self, key: str) -> None:
        """The call changed nothing after all (a file tool that failed)."""
        self._before.pop(key, None)

    def serves(self, rel: str) -> bool:
        """Whether some configured server reads this file (found on this machine or not), and it may be read."""
        return any(spec.serves(rel) is not None for spec in self.servers.specs) and not self.project.refused(rel)

    def tell(self, messages: list[str]) -> None:
        """Notices for the next result (problems in the [lsp] tables)."""
        self._notices += messages

    async def check(self, key: str, changed: dict[str, str | None] | None = None) -> Report:
        """What the call `key` introduced: `changed` maps each changed file to its text before (None: it was
        new); without it, the files `remember` read before the call. Waits at most `wait` seconds."""
        before = self._before.pop(key, {}) if changed is None else changed
        self._told = {spot for spot in self._told if spot[0] not in before}  # those files are told anew
        report = Report(files=sorted(before))
        targets: dict[str, dict[str, str | None]] = {}
        for rel, old in before.items():
            for spec in self.servers.specs_for(rel):
                targets.setdefault(spec.name, {})[rel] = old
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.wait
        tasks: dict[str, asyncio.Task[Report]] = {}
        for spec in self.servers.specs:
            if spec.name not in targets:
                continue
            earlier = self._busy.get(spec.name)
            if earlier is not None and not earlier.done():  # checked after it, in the background
                self._busy[spec.name] = self._background(self._after(earlier, spec, targets[spec.name]), spec.name)
                report.notices.append(f"{spec.name} is still busy with an earlier change; what it finds in this "
                                      "one comes with a later result")
                continue
            tasks[spec.name] = asyncio.create_task(self._check_server(spec, targets[spec.name]),
                                                   name=f"lsp-check-{spec.name}")
        if tasks:
            await asyncio.wait(tasks.values(), timeout=max(0.0, deadline - loop.time()))
        for name, task in tasks.items():
            if task.done():
                report.add(_result(task, name))
                continue
            self._busy[name] = self._background(task, name)
            report.notices.append(f"{name} did not finish within {self.wait:g} s"
                                  f"{' (it is starting)' if not self._started(name) else ''}; what it finds comes "
                                  "with a later result")
        report.notices[:0] = self._notices  # the manager's (a server missing or failing), told once
        self._notices.clear()
        report.introduced = _once(_syntax_first(report.introduced))
        report.fixed = _once(report.fixed)
        self._told |= {(d.path, d.line, d.column) for d in report.introduced}
        return report

    def _started(self, name: str) -> bool:
        return any(server.spec.name == name for server in self.servers.live)

    def _background(self, work: Awaitable[Report] | asyncio.Task[Report], name: str) -> asyncio.Task[Report]:
        """A check going on after its call's result went back: what it finds is kept for `late`; it may take
        BACKGROUND_MAX seconds more."""
        task = work if isinstance(work, asyncio.Task) else asyncio.ensure_future(work)
        task.add_done_callback(lambda done: self._late.append(_result(done, name)))
        asyncio.get_running_loop().call_later(BACKGROUND_MAX, task.cancel)
        return task

    async def _after(self, earlier: asyncio.Task[Report], spec: ServerSpec, changed: dict[str, str | None]) -> Report:
        """A change checked once the server's earlier check is over (whatever became of it)."""
        await asyncio.gather(earlier, return_exceptions=True)
        return await self._check_server(spec, changed)

    def late(self) -> Report | None:
        """What background checks found since, and is still true now (once no check of theirs is still
        running, so a later change's own check has had its say); None when there is nothing."""
        if not self._late or any(not task.done() for task in self._busy.values()):
            return None
        reports, self._late = self._late, []
        current: dict[str, Counter[tuple[Any, ...]]] = {}
        for server in self.servers.live:
            for rel, known in server.known.items():
                current.setdefault(rel, Counter()).update(_key(d) for d in known)
        merged = Report()
        for report in reports:
            still = [d for d in report.introduced if current.get(d.path, Counter())[_key(d)] > 0
                     and (d.path, d.line, d.column) not in self._told]  # another server told it in time
            merged.introduced += still
            merged.files += report.files
            merged.checked += report.checked
            merged.notices += report.notices
        merged.introduced = _once(_syntax_first(merged.introduced))
        merged.files = sorted(set(merged.files))
        merged.notices[:0] = self._notices
        self._notices.clear()
        return merged if merged.introduced or merged.notices else None

    async def close(self) -> None:
        for task in self._busy.values():
            task.cancel()
        await asyncio.gather(*self._busy.values(), return_exceptions=True)

    # --- one server ------------------------------------------------------------------------------

    async def _check_server(self, spec: ServerSpec, changed: dict[str, str | None]) -> Report:
        report = Report(files=sorted(changed))
        try:
            server = await asyncio.shield(self.servers.start(spec))  # a cancelled check lets the start go on
        except ServerFailed:
            return report  # told once by the manager
        extensions = self.servers.extensions(spec)
        dependents = await self._dependents(changed, extensions)
        async with server.lock:
            try:
                await self._compare(server, spec, changed, dependents, report)
            except (ServerFailed, RpcError) as exc:
                report.notices.append(f"{spec.name}: {exc}")
                return report
        self.servers.used(spec)
        report.checked.append(spec.name)
        return report

    async def _dependents(self, changed: dict[str, str | None], extensions: frozenset[str]) -> list[str]:
        """Files that mention a changed file's module name: those whose errors the change may have caused."""
        found: list[str] = []
        for rel in sorted(changed):
            name = module_name(rel)
            if not name:
                continue
            for other in await self.project.mentioning(name, extensions, DEPENDENTS_MAX + len(changed)):
                if other not in changed and other not in found and len(found) < DEPENDENTS_MAX:
                    found.append(other)
        return found

    async def _compare(self, server: LanguageServer, spec: ServerSpec, changed: dict[str, str | None],
                       dependents: list[str], report: Report) -> None:
        languages = {rel: spec.serves(rel) or spec.languages[0] for rel in [*changed, *dependents]}
        since = server.seq
        opened = []
        for rel, old in changed.items():  # the baseline: as the file was before the call
            if rel not in server.documents and old is not None:
                server.sync(rel, old, languages[rel])
                opened.append(rel)
        for rel in dependents:
            text = self.project.read(rel) if rel not in server.documents else None
            if text is not None:
                server.sync(rel, text, languages[rel])
                opened.append(rel)
        if opened:
            found: dict[str, list[dict[str, Any]]] = {}
            await server.diagnostics(opened, since, found)
            for rel in opened:
                server.known[rel] = self._convert(server, rel, found.get(rel, []))
        since = server.seq
        moved = []
        for rel in changed:
            text = self.project.read(rel)
            if text is None:  # gone (or unreadable now): what it said is no longer there
                server.forget(rel)
                server.known.pop(rel, None)
            elif server.sync(rel, text, languages[rel]):
                moved.append(rel)
        if not moved and not any(old is not None and self.project.read(rel) is None for rel, old in changed.items()):
            return
        interest = [rel for rel in [*changed, *dependents] if rel in server.documents]
        found = {}
        await server.diagnostics(interest, since, found, fresh=set(moved))
        for rel in interest:
            now = self._convert(server, rel, found.get(rel, []))
            introduced, fixed = difference(server.known.get(rel, []), now)
            report.introduced += introduced
            report.fixed += fixed
            server.known[rel] = now
        _close_oldest(server, set(interest))

    def _convert(self, server: LanguageServer, rel: str, items: list[dict[str, Any]]) -> list[Diagnostic]:
        document = server.documents.get(rel)
        lines = document.text.splitlines() if document is not None else []
        out = []
        for raw in items:
            found = convert(raw, rel, lines, server.spec.name)
            if found is not None and server.spec.reports(found.severity):
                out.append(found)
        return out


def _result(task: asyncio.Task[Report], name: str) -> Report:
    if task.cancelled():
        return Report()
    error = task.exception()
    if error is not None:
        log.debug("the diagnostics of %s failed", name, exc_info=error)
        return Report(notices=[f"{name} failed: {type(error).__name__}: {error}"])
    return task.result()


def _close_oldest(server: LanguageServer, keep: set[str]) -> None:
    """Keep the server's open documents few: each one open costs it work at every change."""
    for rel in list(server.documents)[:max(0, len(server.documents) - OPEN_DOCUMENTS_MAX)]:
        if rel not in keep:
            server.forget(rel)
            server.known.pop(rel, None)


def module_name(rel: str) -> str:
    """The name other files use to import this one: its stem, or its directory's for a package's
    `__init__.py` / a directory's `index.ts` (and friends)."""
    directory, name = posixpath.split(rel)
    stem = os.path.splitext(name)[0]
    if stem in ("__init__", "index", "mod", "main", "lib") and directory:
        stem = posixpath.basename(directory)
    return stem if stem.replace("-", "_").isidentifier() else ""


def convert(raw: dict[str, Any], rel: str, lines: list[str], server: str) -> Diagnostic | None:
    """One LSP diagnostic as the protocol's (1-based line and character), or None when it is unreadable."""
    where = raw.get("range")
    start = where.get("start") if isinstance(where, dict) else None
    message, number = raw.get("message"), start.get("line") if isinstance(start, dict) else None
    if not isinstance(start, dict) or not isinstance(number, int) or not isinstance(message, str):
        return None
    line = max(0, number)
    units = start.get("character")
    units = units if isinstance(units, int) and units >= 0 else 0
    column = char_column(lines[line], units) if line < len(lines) else units
    level = raw.get("severity")
    severity = _SEVERITIES.get(level if isinstance(level, int) else 1, Severity.ERROR)
    code = raw.get("code")
    if isinstance(code, dict):
        code = code.get("value")
    source = raw.get("source")
    if raw.get("syntax") is True or (code in (None, "") and severity == Severity.ERROR and (
            source == "syntax" or str(source).lower() in _CODELESS_SYNTAX)):
        code = SYNTAX
    text = " ".join(message.split("\n\n")[0].split())[:MAX_MESSAGE]
    return Diagnostic(rel, line + 1, column + 1, severity, text, (source if isinstance(source, str) else server)[:40],
                      str(code)[:60] if code not in (None, "") else "")


def _key(d: Diagnostic) -> tuple[Any, ...]:
    return (d.path, d.severity, d.message, d.source, d.code)


def difference(before: list[Diagnostic], after: list[Diagnostic]) -> tuple[list[Diagnostic], list[Diagnostic]]:
    """(introduced, fixed): what `after` says more often than `before`, and less; by what each says, so a
    problem that only moved is neither. Of several alike, those on lines the other side has not are told."""
    return _more(after, before), _more(before, after)


def _more(these: list[Diagnostic], than: list[Diagnostic]) -> list[Diagnostic]:
    extra = Counter(_key(d) for d in these)
    extra.subtract(_key(d) for d in than)
    lines = {(_key(d), d.line) for d in than}
    out = []
    for d in sorted(these, key=lambda d: ((_key(d), d.line) in lines, d.line)):
        if extra[_key(d)] > 0:
            extra[_key(d)] -= 1
            out.append(d)
    return sorted(out, key=lambda d: (d.path, d.line, d.column))


def is_syntax(d: Diagnostic) -> bool:
    return d.code in SYNTAX_CODES


def _syntax_first(found: list[Diagnostic]) -> list[Diagnostic]:
    """In a file the change left unparsable, only its first syntax error (of the first server that reported
    one): what follows it, from that server or another, is mostly the parser losing its way."""
    first: dict[str, Diagnostic] = {}
    for d in found:
        if is_syntax(d) and (d.path not in first or (first[d.path].source == d.source and
                                                     (d.line, d.column) < (first[d.path].line, first[d.path].column))):
            first[d.path] = d
    return [d for d in found if d.path not in first or d is first[d.path]]


def _once(found: list[Diagnostic]) -> list[Diagnostic]:
    """One problem per place: the first server's (the configured order) when two report the same spot."""
    seen: set[tuple[str, int, int]] = set()
    out = []
    for d in found:
        if (d.path, d.line, d.column) not in seen:
            seen.add((d.path, d.line, d.column))
            out.append(d)
    return sorted(out, key=lambda d: (d.path, d.line, d.column))


def render(report: Report, *, late: bool = False) -> str:
    """The text appended to a result: what was introduced (capped: MAX_LINES lines, MAX_BYTES bytes, the
    rest counted by file), what was fixed, and the notices. '' when there is nothing to say: a change that
    broke nothing and fixed nothing adds nothing to its result."""
    parts = []
    if late and report.introduced:
        parts.append(f"Diagnostics of an earlier change ({', '.join(report.files[:5])}), found since: "
                     f"{_count(report.introduced)} still there:")
    elif report.introduced:
        parts.append(f"Diagnostics: this change introduced {_count(report.introduced)}:")
    shown, size = 0, 0
    for d in report.introduced:
        line = f"{d.path}:{d.line}:{d.column}: {d.severity.value}: {d.message}" + \
            (f" ({d.source}{' ' + d.code if d.code else ''})" if d.source else "")
        if shown >= MAX_LINES or size + len(line) > MAX_BYTES:
            break
        parts.append(line)
        shown += 1
        size += len(line) + 1
    rest = report.introduced[shown:]
    if rest:
        per_file = Counter(d.path for d in rest)
        parts.append(f"… and {len(rest)} more ({', '.join(f'{n} in {p}' for p, n in per_file.most_common(5))}"
                     f"{', …' if len(per_file) > 5 else ''})")
    if report.fixed and not late:
        fixed = "; ".join(f"{d.path}:{d.line} {d.message}" for d in report.fixed[:3])
        more = f" and {len(report.fixed) - 3} more" if len(report.fixed) > 3 else ""
        lead = "It fixed" if report.introduced else "Diagnostics: this change fixed"
        parts.append(f"{lead} {_count(report.fixed)}: {fixed[:600]}{more}" +
                     ("" if report.introduced else "; it introduced none."))
    parts += [f"Diagnostics: {notice}" for notice in dict.fromkeys(report.notices)]
    return "\n".join(parts)


def _count(found: list[Diagnostic]) -> str:
    kinds = Counter(d.severity.value for d in found)
    return ", ".join(f"{n} {kind}{'s' if n > 1 else ''}" for kind, n in kinds.most_common())
