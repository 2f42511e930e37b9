"""`auger review`: a read-only session reviews the uncommitted work, a branch or a commit, and the
findings are printed as a report (or as JSON). The engine side is engine/agents/review.py, shared with any
other front end; this module only parses options, opens the store and the model, and prints.

With --json, the review session's events are printed as `auger exec --json` prints them (one envelope a
line: `entered_review_mode` first, `exited_review_mode` before `shutdown_complete`), and the result (or
the error) is the last line.

Exit status: 0 when a review was given (whatever its verdict) or there was nothing to review; 1 when
the model never gave a valid review (the raw reply is printed on stderr); 2 for a usage problem.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Callable

_PRIORITY_COLOURS = {0: "\x1b[1;31m", 1: "\x1b[31m", 2: "\x1b[33m", 3: "\x1b[36m"}


def add_commands(sub: Any, store_opts: Callable[[argparse.ArgumentParser], None]) -> dict[str, argparse.ArgumentParser]:
    p = sub.add_parser("review", help="review uncommitted changes, a branch or a commit (read-only session)")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--uncommitted", action="store_true",
                       help="staged, unstaged and untracked changes against HEAD (the default)")
    which.add_argument("--base", metavar="BRANCH", help="this branch's commits since its merge base with BRANCH")
    which.add_argument("--commit", metavar="SHA", help="one commit, against its parent")
    p.add_argument("--instructions", metavar="TEXT", default="", help="what the review should focus on")
    p.add_argument("--json", action="store_true", help="print the review session's events, one JSON object a "
                   "line, then the findings as one JSON object on the last line")
    p.add_argument("-m", "--model", help="model name")
    p.add_argument("-p", "--provider", help="provider name; `auger providers` lists them")
    p.add_argument("--base-url", help="base URL of an OpenAI-compatible API, e.g. http://localhost:11434/v1")
    p.add_argument("-C", "--cd", dest="cwd", help="project directory (default: current directory)")
    store_opts(p)
    p.set_defaults(run=_cmd_review)
    return {"review": p}


def _cmd_review(args: argparse.Namespace) -> int:
    import asyncio
    import dataclasses

    from auger.frontends.cli_support import guard_store, load_cli_config

    config = load_cli_config(args)
    if args.model:  # a model named on the command line is the one asked for, whatever `review_model` says
        config = dataclasses.replace(config, review_model=None)
    return guard_store(lambda: asyncio.run(_review(args, config)))


async def _review(args: argparse.Namespace, config) -> int:
    import json
    import os
    from pathlib import Path

    from auger.changes.review_change import ReviewError, ReviewTarget, collect_change
    from auger.engine.agents.review import ReviewFailed
    from auger.frontends.cli_support import CliError

    root = Path(os.path.realpath(args.cwd or os.getcwd()))
    if not root.is_dir():
        raise CliError(f"project directory {root} is not a directory")
    target = (ReviewTarget("base", args.base) if args.base is not None
              else ReviewTarget("commit", args.commit) if args.commit is not None else ReviewTarget())
    try:
        change = await collect_change(root, target)
    except ReviewError as exc:
        raise CliError(str(exc)) from None
    if change.empty:
        if args.json:
            print(json.dumps({"target": target.describe(), "findings": [], "verdict": None,
                              "summary": "nothing to review", "session_id": None}))
        else:
            print(f"nothing to review: no {target.describe()}" if target.kind == "uncommitted"
                  else f"nothing to review: {target.describe()} changes no file")
        return 0
    try:
        result = await _run(args, config, root, change)
    except ReviewFailed as exc:
        if args.json:
            print(json.dumps({"error": str(exc), "session_id": exc.session_id, "raw_replies": exc.raw}))
        from auger.frontends.tui.render import clean

        print(f"auger: error: {exc} (session {exc.session_id[:8]})", file=sys.stderr)
        for number, raw in enumerate(exc.raw, 1):
            print(f"--- raw reply {number} ---\n{clean(raw)}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(result.to_json(), ensure_ascii=False))
    else:
        from auger.frontends.tui.render import no_color

        print(await render_report(root, change, result, colour=sys.stdout.isatty() and not no_color()))
    return 0


async def _run(args, config, root, change):
    """Open the model (`review_model`, else the configured one) and the store, and run the review session;
    its events are printed with --json, else its tool calls shown while a person watches."""
    from auger.engine.agents.review import review_client, run_review
    from auger.engine.session.sessions import SessionManager
    from auger.engine.workspace import Workspace
    from auger.frontends.cli_support import CliError, JsonRenderer, ToolProgress, open_store
    from auger.models.registry import ProviderError

    try:
        client = review_client(config)
    except ProviderError as exc:
        raise CliError(str(exc)) from None
    store = open_store(config)
    try:
        sessions = SessionManager(Workspace.open(root, config), store)
        progress = JsonRenderer() if args.json else ToolProgress()
        return await run_review(sessions, client, change, args.instructions, on_envelope=progress)
    finally:
        await store.aclose()


async def render_report(root, change, result, *, colour: bool) -> str:
    """The findings for a person: priority tag, title, file:line, body, the code lines (dimmed numbers
    when `colour`). `auger review` prints it; the terminal UI's /review shows it in the transcript."""
    from auger.engine.agents.review import code_lines
    from auger.frontends.tui.render import clean

    def paint(code: str, text: str) -> str:
        return f"{code}{text}\x1b[0m" if colour else text

    out: list[str] = []
    verdict = paint("\x1b[1;32m" if result.verdict == "correct" else "\x1b[1;31m", result.verdict)
    out.append(f"Review of {result.target}: {verdict}")
    if result.summary.strip():
        out.append(clean(result.summary.strip()))
    out.append(f"{len(result.findings)} finding(s)" + (":" if result.findings else "."))
    for finding in sorted(result.findings, key=lambda f: (f.priority, -f.confidence)):
        out.append("")
        tag = paint(_PRIORITY_COLOURS.get(finding.priority, ""), f"[P{finding.priority}]")
        out.append(f"{tag} {clean(finding.title)} (confidence {finding.confidence:.2f})")
        if finding.file:
            place = finding.file + (f":{finding.line_start}" if finding.line_start else "")
            if finding.line_end and finding.line_end != finding.line_start:
                place += f"-{finding.line_end}"
            out.append(f"  {clean(place)}")
        if finding.outside_diff:
            out.append(paint("\x1b[33m", f"  ! outside the diff: {clean(finding.outside_diff)}"))
        out += [f"  {line}" for line in clean(finding.body.strip()).splitlines()]
        lines = await code_lines(root, change, finding)
        width = len(str(lines[-1][0])) if lines else 0
        for number, text in lines:
            out.append(f"    {paint(chr(27) + '[2m', f'{number:>{width}} │')} {clean(text.expandtabs(4))}")
    out += ["", f"session {result.session_id[:8]}: `auger resume {result.session_id[:8]}` to follow up"]
    return "\n".join(out)
