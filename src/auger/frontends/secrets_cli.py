"""`auger secrets check`: what the agent may not read in a project, and why.

It runs the session's own parts (secrets/protected.py, the configuration's `[secrets]`) on the project: the
protected paths that exist, each with the pattern and the layer that protects it (auger's defaults, the user
config, the project's config, `.augerignore`) or the protected file it is a hard link to; the files the user
allowed; every pattern in force; problems with them; what the sandbox here does with them and cannot do; and
the protected paths git's history holds, which no sandbox hides (secrets/history.py). `--json` prints the
same as one object. Exit status 1 when the history holds a protected path, so a CI step can stop on it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, Callable

EXIT_OK, EXIT_COMMITTED = 0, 1


def add_commands(sub: Any, store_opts: Callable[[argparse.ArgumentParser], None]) -> None:
    p_secrets = sub.add_parser("secrets", help="what the agent may not read in a project, and why")
    secrets_sub = p_secrets.add_subparsers(dest="secrets_command", metavar="SUBCOMMAND", required=True)
    p_check = secrets_sub.add_parser("check", help="list the protected files of a project (and why), the files you "
                                                   "allowed, and protected files committed to git")
    p_check.add_argument("-C", "--cd", dest="cwd", help="project directory (default: current directory)")
    p_check.add_argument("--json", action="store_true", help="print one JSON object")
    store_opts(p_check)
    p_check.set_defaults(run=_check)


def _check(args: argparse.Namespace) -> int:
    from auger.frontends.cli_support import CliError, load_cli_config
    from auger.secrets.history import committed
    from auger.secrets.protected import SCAN_LIMIT, protected_files

    root = Path(os.path.realpath(args.cwd or os.getcwd()))
    if not root.is_dir():
        raise CliError(f"{args.cwd}: not a directory")
    config = load_cli_config(args)
    protected = protected_files(config, root)
    scan = protected.scan()
    found = []
    for rel in scan.paths:
        try:
            st: os.stat_result | None = os.lstat(root / rel)
        except OSError:
            st = None
        reason = protected.check(rel, st)
        if reason is not None:
            found.append({"path": rel, "directory": st is not None and os.path.isdir(root / rel)
                          and not os.path.islink(root / rel), "pattern": reason.pattern, "source": reason.source,
                          "matched": reason.matched, "same_as": reason.same_as, "why": reason.describe()})
    history, no_history = committed(protected)
    report = {
        "root": str(root),
        "protected": found,
        "allowed": [{"path": path, "pattern": pattern} for path, pattern in scan.allowed],
        "patterns": [{"pattern": rule.text, "source": rule.source} for rule in protected.rules.rules],
        "allow": list(protected.settings.allow),
        "problems": list(protected.diagnostics),
        "scan": {"entries": scan.entries, "complete": scan.complete, "limit": SCAN_LIMIT},
        "sandbox": _sandbox(config.sandbox),
        "committed": [{"path": c.path, "tracked": c.tracked, "commit": c.commit} for c in history],
        "git": no_history,
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        _print(report)
    return EXIT_COMMITTED if history else EXIT_OK


def _sandbox(preference: str) -> dict[str, Any]:
    """What the sandbox this configuration gets here does with protected files, and what it cannot do."""
    from auger.policy.sandbox import detect

    sandbox, description = detect(preference)
    kind = sandbox.kind if sandbox is not None else "none"
    limits = ["a file committed to git stays readable through git (git show, git log -p): see `committed`"]
    if kind == "bwrap":
        hides = "each protected path found as the sandbox starts is covered by a mount (reading it fails)"
        limits.append("a protected file a command creates is covered from the next sandbox start: at once when "
                      "nothing runs in the sandbox, later while a background command or MCP server keeps it running")
    elif kind == "landlock":
        hides = "each command gets a ruleset without the protected paths that exist as it starts"
        limits += ["names stay visible (ls shows them; reading fails)",
                   "a command can still overwrite, truncate or delete a protected file it cannot read",
                   "a file a command creates in a directory on the way to a protected file is unreadable to that same "
                   "command (the next command reads it)",
                   "moving a file from such a directory into a subdirectory with rename(2) fails (EXDEV; mv copies)"]
    else:
        hides = "nothing: commands run unsandboxed and can read protected files (only auger's file tools refuse them)"
    limits.append(f"a scan looks at most at {_limit()} entries: protected files beyond are refused by the file tools "
                  "(by name) but not hidden from commands")
    return {"kind": kind, "description": description, "hides": hides, "limits": limits}


def _limit() -> str:
    from auger.secrets.protected import SCAN_LIMIT

    return f"{SCAN_LIMIT:,}"


def _print(report: dict[str, Any]) -> None:
    out = sys.stdout.write
    out(f"Protected in {report['root']} (the agent's file tools refuse them; the sandbox hides them):\n")
    if not report["protected"]:
        out("  (nothing)\n")
    width = min(40, max((len(p["path"]) + p["directory"] for p in report["protected"]), default=0))
    for entry in report["protected"]:
        shown = entry["path"] + ("/" if entry["directory"] else "")
        if entry["same_as"]:
            why = f"the same file as {entry['same_as']} (a hard link, or it renamed)"
        else:
            inside = f", its directory {entry['matched']}/" if entry["matched"] != entry["path"] else ""
            why = f"'{entry['pattern']}' ({entry['source']}{inside})"
        out(f"  {shown:<{width}}  {why}\n")
    if report["allowed"]:
        out("Allowed by your user config ([secrets] allow):\n")
        for entry in report["allowed"]:
            out(f"  {entry['path']}  ('{entry['pattern']}')\n")
    scan = report["scan"]
    if not scan["complete"]:
        out(f"The scan stopped at {scan['limit']:,} entries: protected files beyond are refused by the file tools "
            "but not hidden from commands.\n")
    out("Patterns (gitignore syntax, case-insensitive; later ones win, a project may only add):\n")
    by_source: dict[str, list[str]] = {}
    for rule in report["patterns"]:
        by_source.setdefault(rule["source"], []).append(rule["pattern"])
    for source, patterns in by_source.items():
        out(f"  {source}: {' '.join(patterns)}\n")
    if report["allow"]:
        out(f"  allowed: {' '.join(report['allow'])}\n")
    for problem in report["problems"]:
        out(f"warning: {problem}\n")
    sandbox = report["sandbox"]
    out(f"Sandbox: {sandbox['kind']} — {sandbox['hides']}.\n")
    for limit in sandbox["limits"]:
        out(f"  cannot: {limit}\n")
    if report["committed"]:
        out("WARNING: protected files are in git's history; commands can read them there (git show), whatever is "
            "hidden. Rotate these secrets, and remove them from the history:\n")
        for entry in report["committed"]:
            state = "tracked now" if entry["tracked"] else "in earlier commits"
            out(f"  {entry['path']}  ({state}; git show {entry['commit']}:{entry['path']})\n")
    elif report["git"] is None:
        out("Git history: no protected file was ever committed.\n")
