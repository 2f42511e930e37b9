"""Exec-policy rules: user and project files of command-prefix rules.

    # rules.toml
    [[rules]]
    prefix = "git push"          # or ["git", "push"]; matched against whole argv words
    decision = "prompt"          # allow | prompt | forbidden
    reason = "pushing publishes work"   # optional, shown to the user and the model

The strictest matching rule wins (forbidden > prompt > allow). A project's own rule
file (`.auger/rules.toml`) comes with the repository, so its `allow` rules are
ignored unless the user sets `trust_project_rules = true`: cloning a repository must
never silently widen what runs without asking.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Iterable, Sequence

from auger.lazy_dataclass import Deferred, dataclass

DECISIONS = ("allow", "prompt", "forbidden")
_STRICTNESS = {d: i for i, d in enumerate(DECISIONS)}


@dataclass(frozen=True)
class Rule(Deferred):
    prefix: tuple[str, ...]
    decision: str
    source: str  # "file:line" or a description
    reason: str = ""

    def matches(self, argv: Sequence[str]) -> bool:
        return tuple(argv[:len(self.prefix)]) == self.prefix

    def describe(self) -> str:
        text = f'prefix "{shlex.join(self.prefix)}" -> {self.decision} ({self.source})'
        return text + (f": {self.reason}" if self.reason else "")


@dataclass(frozen=True)
class RuleOutcome(Deferred):
    decision: str | None  # strictest decision over the command line, or None when no rule applies
    rule: Rule | None


class RuleSet:
    def __init__(self, rules: Iterable[Rule] = ()) -> None:
        self.rules = tuple(rules)

    def match(self, argv: Sequence[str]) -> Rule | None:
        """The strictest rule matching one simple command."""
        best: Rule | None = None
        for rule in self.rules:
            if rule.matches(argv) and (best is None or _STRICTNESS[rule.decision] > _STRICTNESS[best.decision]):
                best = rule
        return best

    def evaluate(self, commands: Sequence[Sequence[str]]) -> RuleOutcome:
        """A whole command line: forbidden or prompt if any part is; allow only if every part is allowed."""
        matched = [self.match(argv) for argv in commands]
        strictest = max((r for r in matched if r is not None), key=lambda r: _STRICTNESS[r.decision], default=None)
        if strictest is None:
            return RuleOutcome(None, None)
        if strictest.decision == "allow" and any(r is None for r in matched):
            return RuleOutcome(None, None)  # an unmatched part is decided by the mode
        return RuleOutcome(strictest.decision, strictest)


def load_rules(user_file: Path, project_file: Path | None, *, trust_project: bool = False
               ) -> tuple[RuleSet, list[str]]:
    """Both rule files merged; problems are returned as diagnostics, never raised."""
    diagnostics: list[str] = []
    rules = _read_file(user_file, diagnostics)
    if project_file is not None:
        for rule in _read_file(project_file, diagnostics):
            if rule.decision == "allow" and not trust_project:
                diagnostics.append(f"{rule.source}: project rule allowing '{shlex.join(rule.prefix)}' ignored "
                                   "(set trust_project_rules = true in your user config to honour it)")
                continue
            rules.append(rule)
    return RuleSet(rules), diagnostics


def _read_file(path: Path, diagnostics: list[str]) -> list[Rule]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError) as exc:
        diagnostics.append(f"{path}: cannot read rules ({exc}); no rules from it")
        return []
    import tomllib

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        diagnostics.append(f"{path}: invalid TOML ({exc}); no rules from it")
        return []
    entries = data.get("rules", [])
    if not isinstance(entries, list):
        diagnostics.append(f"{path}: 'rules' must be an array of tables ([[rules]]); no rules from it")
        return []
    lines = _rule_lines(text)
    rules: list[Rule] = []
    for index, entry in enumerate(entries):
        where = f"{path}:{lines[index]}" if index < len(lines) else f"{path} rule {index + 1}"
        rule = _parse_rule(entry, where, diagnostics)
        if rule is not None:
            rules.append(rule)
    return rules


def _parse_rule(entry: object, where: str, diagnostics: list[str]) -> Rule | None:
    if not isinstance(entry, dict):
        diagnostics.append(f"{where}: a rule must be a table; ignored")
        return None
    prefix = entry.get("prefix")
    if isinstance(prefix, str):
        try:
            prefix = shlex.split(prefix)
        except ValueError as exc:
            diagnostics.append(f"{where}: cannot split prefix {prefix!r} ({exc}); ignored")
            return None
    if not (isinstance(prefix, list) and prefix and all(isinstance(p, str) and p for p in prefix)):
        diagnostics.append(f"{where}: 'prefix' must be a non-empty string or list of words; ignored")
        return None
    decision = entry.get("decision")
    if decision not in DECISIONS:
        diagnostics.append(f"{where}: 'decision' must be one of {', '.join(DECISIONS)}, got {decision!r}; ignored")
        return None
    reason = entry.get("reason", "")
    return Rule(tuple(prefix), decision, where, reason if isinstance(reason, str) else "")


def _rule_lines(text: str) -> list[int]:
    return [n for n, line in enumerate(text.splitlines(), 1) if line.strip().startswith("[[rules]]")]


def append_rule(path: Path, prefix: Sequence[str], decision: str = "allow") -> None:
    """Record "approve and remember": exactly this prefix, nothing wider."""
    import json

    path.parent.mkdir(parents=True, exist_ok=True)
    existing = path.read_text(encoding="utf-8") if path.exists() else ""
    separator = "" if not existing or existing.endswith("\n") else "\n"
    words = ", ".join(json.dumps(w) for w in prefix)  # JSON strings are valid TOML basic strings
    with open(path, "a", encoding="utf-8") as f:
        f.write(f"{separator}\n[[rules]]\nprefix = [{words}]\ndecision = \"{decision}\"\n")
