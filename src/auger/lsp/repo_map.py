"""A ranked map of a repository: its files and their most used definitions, within a token budget.

As Aider's repository map does: each file's definitions come from tree-sitter (lsp/tags.py) and the names it
uses from its identifiers; a file that uses a name another file defines points to it, weighted by how
often (square root), by how few files define the name (a name defined everywhere says little) and down for
private names (`_x`); PageRank over those links, biased toward the `focus` files and names, ranks the
files, and each file's rank flows to the definitions its users use. The map is the largest prefix of the
definitions by rank that fits the budget (binary search), shown file by file: each definition's line, with
its line number.

The index (per file: size, modification time, definitions, names used) is kept in auger's cache dir, one
file per project, so a later session reads only what changed since — per commit and per edit alike: a file
is parsed again when its size or time changed, dropped when it is gone. Files larger than MAX_FILE are
left out (generated code, data). Names used are read with a regular expression rather than the parse tree:
ten times faster, and a word in a comment that happens to name a definition moves a rank a little, which a
map can afford.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import os
import re
import tempfile
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from auger.lsp.files import read_text, source_files

MAX_FILE = 512 * 1024  # bytes: larger files are left out of the map
MAX_FILES = 20_000
CACHE_VERSION = 1
BYTES_PER_TOKEN = 4  # as engine/tokens.py estimates
_NAME = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_DAMPING, _ROUNDS = 0.85, 30
MIN_NAME = 3  # shorter names link nothing (loop variables, minified code)
MINIFIED = 300  # characters per line on average: generated or minified, left out
_FAMILIES = {"typescript": "js", "tsx": "js", "javascript": "js", "c": "c", "cpp": "c"}  # files that import each other


@dataclass(frozen=True)
class Focus:
    """What to rank around: files (or directories) of the project, and names."""

    paths: tuple[str, ...] = ()
    names: tuple[str, ...] = ()


def parse_focus(raw: Any) -> Focus:
    """`focus` as the tool takes it: a string (words separated by spaces or commas) or a list of strings;
    an entry with a `/` or a file extension is a path, anything else a name."""
    if raw is None or raw == "":
        return Focus()
    if isinstance(raw, str):
        entries = [e for e in re.split(r"[\s,]+", raw) if e]
    elif isinstance(raw, list) and all(isinstance(e, str) for e in raw):
        entries = [e.strip() for e in raw if e.strip()]
    else:
        raise ValueError("`focus` must be a string or a list of strings")
    paths = tuple(e.strip("./") or e for e in entries if "/" in e or os.path.splitext(e)[1])
    names = tuple(e for e in entries if e not in paths and e.strip("./") not in paths)
    return Focus(paths, names)


class RepoMap:
    """One project's map: its index, loaded and brought up to date at each use."""

    def __init__(self, root: Path, cache_dir: Path) -> None:
        self.root = root
        self.cache = cache_dir / f"{hashlib.sha256(str(root).encode()).hexdigest()[:24]}.json"
        self._files: dict[str, list[Any]] | None = None  # rel -> [mtime_ns, size, definitions, names used]
        self._lock = asyncio.Lock()
        self.parsed = 0  # files parsed at the last update (for the benchmark and tests)

    @property
    def files(self) -> dict[str, list[Any]]:
        """The index as last brought up to date (empty before the first use)."""
        return self._files or {}

    async def render(self, budget: int, focus: Focus = Focus()) -> str:
        async with self._lock:
            return await asyncio.to_thread(self._render, budget, focus)

    def _render(self, budget: int, focus: Focus) -> str:
        self._update()
        assert self._files is not None
        ranked = rank(self._files, focus)
        if not ranked:
            return "No source files with definitions were found in the project."
        low, high = 0, len(ranked)
        while low < high:  # the most definitions whose map fits
            middle = (low + high + 1) // 2
            if _tokens(_show(ranked[:middle], self._files, len(ranked))) <= budget:
                low = middle
            else:
                high = middle - 1
        if low == 0:
            return f"The budget of {budget} tokens holds no entry of the map; ask for more."
        return _show(ranked[:low], self._files, len(ranked))

    def _update(self) -> None:
        """Bring the index up to date with the tree: parse what changed, drop what is gone, save."""
        from auger.lsp.tags import GRAMMARS, tags

        if self._files is None:
            self._files = self._load()
        files = self._files
        now = source_files(self.root, frozenset(GRAMMARS), MAX_FILES)
        changed = False
        self.parsed = 0
        seen = set()
        for rel in now:
            try:
                info = os.stat(self.root / rel, follow_symlinks=False)
            except OSError:
                continue
            if info.st_size > MAX_FILE:
                continue
            known = files.get(rel)
            if known is not None and known[0] == info.st_mtime_ns and known[1] == info.st_size:
                seen.add(rel)
                continue
            text = read_text(self.root, rel)
            if text is None or len(text) > MINIFIED * (text.count("\n") + 1):
                continue
            found = tags(rel, text)
            if found is None:
                continue
            files[rel] = [info.st_mtime_ns, info.st_size, [[d.name, d.kind, d.line, d.text] for d in found.definitions],
                          _names(text)]
            seen.add(rel)
            self.parsed += 1
            changed = True
        for rel in list(files):
            if rel not in seen:
                del files[rel]
                changed = True
        if changed:
            self._save()

    def _load(self) -> dict[str, list[Any]]:
        try:
            data = json.loads(self.cache.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict) or data.get("version") != CACHE_VERSION or data.get("root") != str(self.root):
            return {}
        files = data.get("files")
        return files if isinstance(files, dict) else {}

    def _save(self) -> None:
        """Write the index atomically (a temp file renamed over it); a cache that cannot be written is only
        slower next time."""
        try:
            self.cache.parent.mkdir(parents=True, exist_ok=True)
            fd, name = tempfile.mkstemp(dir=self.cache.parent, prefix=".repo-map-")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump({"version": CACHE_VERSION, "root": str(self.root), "files": self._files}, f,
                          separators=(",", ":"))
            os.replace(name, self.cache)
        except OSError:
            pass


def _names(text: str) -> dict[str, int]:
    """How many times each identifier-like word occurs."""
    counts: dict[str, int] = defaultdict(int)
    for name in _NAME.findall(text):
        counts[name] += 1
    return dict(counts)


def rank(files: dict[str, list[Any]], focus: Focus = Focus()) -> list[tuple[str, str, int, str]]:
    """The definitions of the map, best first: (file, name, line, line text)."""
    from auger.lsp.tags import GRAMMARS

    family = {rel: _FAMILIES.get(GRAMMARS.get(os.path.splitext(rel)[1].lower(), ""), "") for rel in files}
    definers: dict[tuple[str, str], set[str]] = defaultdict(set)  # (language family, name) -> files
    for rel, (_, _, definitions, _) in files.items():
        for name, *_ in definitions:
            if len(name) >= MIN_NAME:
                definers[(family[rel], name)].add(rel)
    focused = {rel for rel in files if any(rel == p or rel.startswith(p.rstrip("/") + "/") for p in focus.paths)}
    focus_names = set(focus.names)
    edges: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    uses: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)  # (definer, name) -> user -> weight
    spreads: dict[tuple[str, str], int] = defaultdict(int)  # how many files use a defined name
    for user, (_, _, _, names) in files.items():
        for name in names:
            if (family[user], name) in definers:
                spreads[(family[user], name)] += 1
    spread = math.log(len(files) + 1)
    for user, (_, _, _, names) in files.items():
        for name, count in names.items():
            targets = definers.get((family[user], name))
            if not targets:
                continue
            # a name nearly every file uses (`name`, `TYPE_CHECKING`) says little about any one of them
            rarity = math.log((len(files) + 1) / spreads[(family[user], name)]) / spread
            weight = math.sqrt(count) * rarity * _weight(name, len(targets), name in focus_names)
            for definer in targets:
                if definer == user:
                    continue
                edges[user][definer] += weight
                uses[(definer, name)][user] = weight
    defining = {rel for (_, name), rels in definers.items() if name in focus_names for rel in rels}
    score = _pagerank(list(files), edges, focused | defining)
    rated: list[tuple[float, str, str, int, str]] = []
    out_weight = {user: sum(targets.values()) for user, targets in edges.items()}
    for rel, (_, _, definitions, _) in files.items():
        for name, _kind, line, text in definitions:
            used_by = uses.get((rel, name), {})
            value = sum(score[user] * w / out_weight[user] for user, w in used_by.items() if out_weight.get(user))
            value += score[rel] * 1e-3  # a file's own rank orders what nobody uses yet
            if name in focus_names or rel in focused:
                value *= 10
            rated.append((value, rel, name, line, text))
    rated.sort(key=lambda r: (-r[0], r[1], r[3]))
    return [(rel, name, line, text) for _, rel, name, line, text in rated]


def _weight(name: str, definers: int, focused: bool) -> float:
    """How much one use of `name` says (Aider's rule of thumb): a long or compound name much, a private one
    or one many files define little, a focus name most."""
    weight = 1.0 / definers
    if len(name) >= 8 and ("_" in name.strip("_") or (name != name.lower() and name != name.upper())):
        weight *= 10
    if name.startswith("_"):
        weight *= 0.1
    if definers > 5:
        weight *= 0.1
    return weight * 10 if focused else weight


def _pagerank(nodes: list[str], edges: dict[str, dict[str, float]], personal: set[str]) -> dict[str, float]:
    if not nodes:
        return {}
    base = {node: (1.0 if node in personal else 0.0) for node in nodes} if personal else {node: 1.0 for node in nodes}
    total = sum(base.values())
    base = {node: value / total for node, value in base.items()}
    score = dict(base)
    outgoing = {node: sum(targets.values()) for node, targets in edges.items()}
    for _ in range(_ROUNDS):
        following = {node: (1 - _DAMPING) * base[node] for node in nodes}
        dangling = sum(score[node] for node in nodes if not outgoing.get(node))
        for node, targets in edges.items():
            share = _DAMPING * score[node] / outgoing[node]
            for target, weight in targets.items():
                following[target] += share * weight
        for node in nodes:
            following[node] += _DAMPING * dangling * base[node]
        score = following
    return score


def _show(entries: list[tuple[str, str, int, str]], files: dict[str, list[Any]], total: int) -> str:
    """The chosen definitions, grouped by file in the order their best one ranks."""
    by_file: dict[str, list[tuple[int, str]]] = {}
    for rel, _name, line, text in entries:
        by_file.setdefault(rel, []).append((line, text))
    out = []
    for rel, found in by_file.items():
        out.append(f"{rel}:")
        out += [f"  {line}: {text}" for line, text in sorted(set(found))]
    left = total - len(entries)
    others = len(files) - len(by_file)
    if left > 0:
        out.append(f"({left} more definitions in {others} more files not shown; a larger budget shows more)")
    return "\n".join(out)


def _tokens(text: str) -> int:
    return (len(text.encode("utf-8", "surrogateescape")) + BYTES_PER_TOKEN - 1) // BYTES_PER_TOKEN
