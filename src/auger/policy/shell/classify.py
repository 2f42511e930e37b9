"""The classifier's entry point: one command line in, one `CommandAnalysis` out, never an exception.
"""

from __future__ import annotations

import os
from pathlib import Path

from auger.policy.shell.analyzer import Analyzer
from auger.policy.shell.parser import Parser
from auger.policy.shell.registry import HANDLERS
from auger.policy.shell.syntax import TooDeep
from auger.policy.shell.verdict import DESTRUCTIVE, LOCAL_MUTATION, CommandAnalysis


def analyze_command(command: str, root: Path, cwd: Path | None = None) -> CommandAnalysis:
    """Classify one shell command line; never raises.

    `root` is the resolved project root; relative paths resolve from `cwd` (default `root`).
    The only I/O is path resolution (`os.path.realpath`).
    """
    try:
        root_s = os.fspath(root)
        if not os.path.isabs(root_s):  # documented as resolved; tolerate a relative one
            root_s = os.path.realpath(root_s)
        cwd_s = os.path.realpath(os.path.join(root_s, os.fspath(cwd))) if cwd is not None else root_s
        home = os.environ.get("HOME") or None
        analyzer = Analyzer(root_s, cwd_s, home, HANDLERS)
        errors: list[str] = []
        try:
            notes: list[str] = []
            analyzer.script(Parser(command, home, 0, errors, notes).parse())
            analyzer.note_constructs(notes)
        except (TooDeep, RecursionError):
            errors.insert(0, "the command is nested too deeply to analyse")
            analyzer.add(DESTRUCTIVE, "the command is nested too deeply to analyse, so it counts as destructive")
        else:
            errors += analyzer.errors
            if errors:
                analyzer.add(LOCAL_MUTATION, f"the command could not be parsed ({errors[0]}), "
                                             "so it counts as a change")
        return CommandAnalysis(analyzer.effect, tuple(analyzer.commands), tuple(analyzer.reasons),
                               tuple(analyzer.outside), errors[0] if errors else None,
                               outside_real=tuple(analyzer.outside_real))
    except Exception as exc:  # a bug here must neither crash the turn nor let the command pass as harmless
        return CommandAnalysis(DESTRUCTIVE, (), (f"the command could not be analysed ({type(exc).__name__}), "
                                                 "so it counts as destructive",), (),
                               f"internal error while analysing: {exc!r}"[:300])
