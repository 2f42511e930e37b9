"""A ranked map of a repository: its files and their most used definitions, within a token budget.

As Aider's repository map does: each file's definitions come from tree-sitter (lsp/tags.py) and the names it
uses from its identifiers; a file that uses a name another file defines points to it, weighted by how
often (square root), by how few files define the name (a name defined everywhere says little) and down for
private names (`_x`); PageRank over those links, biased toward the `focus` files and names, ranks the
files, and each file's rank flows to the definitions its users use. The focus's own definitions (of its
files, of its names) come first, then what they use, by rank. The map is the largest prefix of the
definitions by rank that fits the budget (binary search), shown file by file: each definition's line, with
its line number.

The index (per file: size, modification time, definitions, names used) is kept in auger's cache dir, one
file per project, with the ranking made from it, so a later session reads only what changed since — per
commit and per edit alike: a file is parsed again when its size or time changed, dropped when it is gone,
and the ranking is made again only when something did. Files larger than MAX_FILE are
left out (generated code, data). Names used are read with a regular expression rather than the parse tree:
ten times faster, and a word in a comment that happens to name a definition moves a rank a little, which a
map can afford.
"""

from __future__ import annotations

import asyncio
import hashlib
import heapq
import json
import math
import os
import re
import tempfile
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from auger.lsp.files import Project

MAX_FILE = 512 * 1024  # bytes: larger files are left out of the map
MAX_FILES = 20_000
CACHE_VERSION = 1
BYTES_PER_TOKEN = 4  # as engine/turn/tokens.py estimates
_NAME = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_DAMPING, _ROUNDS, _SETTLED = 0.85, 40, 1e-6
MIN_NAME = 3  # shorter names link nothing (loop variables, minified code)
MAX_DEFINERS = 12  # a name more files than this define links nothing either
MAX_LINKS = 32  # a file's strongest links to the files it uses are kept (PageRank's cost is their number)
MINIFIED = 300  # characters per line on average: generated or minified, left out
_FAMILIES = {"typescript": "js", "tsx": "js", "javascript": "js", "c": "c", "cpp": "c"}  # files that import each other


@dataclass(frozen=True)
class Focus:
    """What to rank around: files (or directories) of the project, and names."""

    paths: tuple[str, ...] = ()
    names: tuple[str, ...] = ()


NO_FOCUS = Focus()


def parse_focus(raw: Any) -> Focus:
    """`focus` as the tool takes it: a string (words separated by spaces or commas) or a list of strings;
    an entry with a `/` or a file extension is a path, anything else a name."""
    if raw is None or raw == "":
        return NO_FOCUS
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

    def __init__(self, project: Project, cache_dir: Path) -> None:
        self.project = project
        self.root = project.root
        self.cache = cache_dir / f"{hashlib.sha256(str(self.root).encode()).hexdigest()[:24]}.json"
        self._files: dict[str, list[Any]] | None = None  # rel -> [mtime_ns, size, definitions, names used]
        self._lock = asyncio.Lock()
        self._ranked: dict[Focus, list[tuple[str, str, int, str]]] = {}  # while the index is unchanged
        self.parsed = 0  # files parsed at the last update (for the benchmark and tests)

    @property
    def files(self) -> dict[str, list[Any]]:
        """The index as last brought up to date (empty before the first use)."""
        return self._files or {}

    async def render(self, budget: int, focus: Focus = NO_FOCUS) -> str:
        async with self._lock:
            return await asyncio.to_thread(self._render, budget, focus)

    def _render(self, budget: int, focus: Focus) -> str:
        changed = self._update()
        if changed:
            self._ranked.clear()
        files = self.files
        if focus not in self._ranked:
            self._ranked[focus] = rank(files, focus)
            changed = changed or focus == NO_FOCUS  # the ranking is kept too: a later session reads it
        if changed:
            self._save()
        ranked = self._ranked[focus]
        if not ranked:
            return "No source files with definitions were found in the project."
        count = _fitting(ranked, budget, len(files))
        while count and _tokens(_show(ranked[:count], files, len(ranked))) > budget:
            count -= 1  # the estimate's rounding, rarely more than a step
        if count == 0:
            return f"The budget of {budget} tokens holds no entry of the map; ask for more."
        return _show(ranked[:count], files, len(ranked))

    def _update(self) -> bool:
        """Bring the index up to date with the tree: parse what changed, drop what is gone; whether anything
        changed (the caller saves it)."""
        from auger.lsp.tags import GRAMMARS, tags

        if self._files is None:
            self._files = self._load()
        files = self._files
        now = self.project.files(frozenset(GRAMMARS), MAX_FILES)
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
            text = self.project.read(rel)
            if text is None or len(text) > MINIFIED * (text.count("\n") + 1):
                continue
            found = tags(rel, text, references=False)
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
        return changed

    def _load(self) -> dict[str, list[Any]]:
        try:
            data = json.loads(self.cache.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict) or data.get("version") != CACHE_VERSION or data.get("root") != str(self.root):
            return {}
        files = data.get("files")
        if not isinstance(files, dict):
            return {}
        ranked = data.get("ranked")
        if isinstance(ranked, list) and data.get("of") == _fingerprint(files):
            try:
                self._ranked[NO_FOCUS] = [(str(rel), str(name), int(line), str(text))
                                         for rel, name, line, text in ranked]
            except (TypeError, ValueError):  # not as auger writes it: ranked again
                pass
        return files

    def _save(self) -> None:
        """Write the index atomically (a temp file renamed over it); a cache that cannot be written is only
        slower next time."""
        try:
            self.cache.parent.mkdir(parents=True, exist_ok=True)
            fd, name = tempfile.mkstemp(dir=self.cache.parent, prefix=".repo-map-")
            ranked = self._ranked.get(NO_FOCUS)
            data = {"version": CACHE_VERSION, "root": str(self.root), "files": self._files,
                    **({"ranked": ranked, "of": _fingerprint(self.files)} if ranked is not None else {})}
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(json.dumps(data, separators=(",", ":")))  # the C encoder: json.dump's is Python
            os.replace(name, self.cache)
        except OSError:
            pass


def _fingerprint(files: dict[str, list[Any]]) -> str:
    """Which index a ranking was made from: every file's path, time and size."""
    digest = hashlib.sha256()
    for rel in sorted(files):
        digest.update(f"{rel}\0{files[rel][0]}\0{files[rel][1]}\0".encode("utf-8", "surrogateescape"))
    return digest.hexdigest()


def _names(text: str) -> dict[str, int]:
    """How many times each identifier-like word occurs."""
    counts: dict[str, int] = defaultdict(int)
    for name in _NAME.findall(text):
        counts[name] += 1
    return dict(counts)


def rank(files: dict[str, list[Any]], focus: Focus = NO_FOCUS) -> list[tuple[str, str, int, str]]:
    """The definitions of the map, best first: (file, name, line, line text)."""
    from auger.lsp.tags import GRAMMARS

    family = {rel: _FAMILIES.get(GRAMMARS.get(os.path.splitext(rel)[1].lower(), ""), "") for rel in files}
    definers: dict[tuple[str, str], list[str]] = defaultdict(list)  # (language family, name) -> files
    for rel, (_, _, definitions, _) in files.items():
        for name in {d[0] for d in definitions}:
            if len(name) >= MIN_NAME:
                definers[(family[rel], name)].append(rel)
    for key in [key for key, rels in definers.items() if len(rels) > MAX_DEFINERS]:
        del definers[key]  # `get`, `run`, `__init__`: defined everywhere, they link nothing in particular
    focused = {rel for rel in files if any(rel == p or rel.startswith(p.rstrip("/") + "/") for p in focus.paths)}
    focus_names = set(focus.names)
    used: dict[str, list[tuple[tuple[str, str], int]]] = {}  # file -> the defined names it uses, how often
    spreads: Counter[tuple[str, str]] = Counter()  # how many files use a defined name
    for user, (_, _, _, names) in files.items():
        mine = [((family[user], name), count) for name, count in names.items() if (family[user], name) in definers]
        used[user] = mine
        spreads.update(key for key, _ in mine)
    spread = math.log(len(files) + 1)
    edges: dict[str, dict[str, float]] = {}  # user -> definer -> weight (a file's strongest links only)
    uses: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)  # (definer, name) -> user -> weight
    # what one use of a name says: a name nearly every file uses (`name`, `TYPE_CHECKING`) says little
    factor = {key: math.log((len(files) + 1) / n) / spread * _weight(key[1], len(definers[key]), key[1] in focus_names)
              for key, n in spreads.items()}
    for user, mine in used.items():
        links: dict[str, float] = defaultdict(float)
        for key, count in mine:
            weight = math.sqrt(count) * factor[key]
            for definer in definers[key]:
                links[definer] += weight
        links.pop(user, None)
        if not links:
            continue
        kept = edges[user] = dict(heapq.nlargest(MAX_LINKS, links.items(), key=lambda link: link[1]))
        for key, count in mine:
            for definer in definers[key]:
                if definer in kept and definer != user:
                    uses[(definer, key[1])][user] = math.sqrt(count) * factor[key]
    defining = {rel for (_, name), rels in definers.items() if name in focus_names for rel in rels}
    score = _pagerank(list(files), edges, focused | defining)
    rated: list[tuple[bool, float, str, str, int, str]] = []
    out_weight = {user: sum(targets.values()) for user, targets in edges.items()}
    for rel, (_, _, definitions, _) in files.items():
        for name, _kind, line, text in definitions:
            used_by = uses.get((rel, name), {})
            value = sum(score[user] * w / out_weight[user] for user, w in used_by.items())
            value += score[rel] * 1e-3  # a file's own rank orders what nobody uses yet
            # the focus itself first (its files' definitions, the names asked for), then by rank
            rated.append((not (name in focus_names or rel in focused), -value, rel, name, line, text))
    rated.sort(key=lambda r: (r[0], r[1], r[2], r[4]))
    return [(rel, name, line, text) for _, _, rel, name, line, text in rated]


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
    """PageRank with a personalization toward `personal` (every node alike when it is empty), until it
    settles (or _ROUNDS rounds)."""
    if not nodes:
        return {}
    index = {node: i for i, node in enumerate(nodes)}
    weights = [1.0 if not personal or node in personal else 0.0 for node in nodes]
    total = sum(weights) or 1.0
    base = [w / total for w in weights]
    links = []
    for node, targets in edges.items():
        out = sum(targets.values())
        if out > 0:
            links.append((index[node], [(index[t], w / out) for t, w in targets.items()]))
    linked = {i for i, _ in links}
    dangling = [i for i in range(len(nodes)) if i not in linked]
    score = list(base)
    for _ in range(_ROUNDS):
        following = [(1 - _DAMPING) * b for b in base]
        lost = _DAMPING * sum(score[i] for i in dangling)
        for i, shares in links:
            share = _DAMPING * score[i]
            for j, w in shares:
                following[j] += share * w
        following = [f + lost * b for f, b in zip(following, base, strict=True)]
        moved = sum(abs(f - s) for f, s in zip(following, score, strict=True))
        score = following
        if moved < _SETTLED:
            break
    return {node: score[i] for node, i in index.items()}


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


def _fitting(entries: list[tuple[str, str, int, str]], budget: int, files: int) -> int:
    """How many of the best entries `_show` fits in `budget` tokens, counted as it writes them (a file's
    line once, each entry's line, the closing line) without writing them."""
    limit = budget * BYTES_PER_TOKEN
    seen: set[str] = set()
    size = 0
    for count, (rel, _name, line, text) in enumerate(entries, 1):
        if rel not in seen:
            seen.add(rel)
            size += len(f"{rel}:".encode()) + 1
        size += len(f"  {line}: {text}".encode()) + 1
        closing = len(f"({len(entries) - count} more definitions in {files - len(seen)} more files not shown; "
                      "a larger budget shows more)") if count < len(entries) else 0
        if size + closing > limit:
            return count - 1
    return len(entries)


def _tokens(text: str) -> int:
    return (len(text.encode("utf-8", "surrogateescape")) + BYTES_PER_TOKEN - 1) // BYTES_PER_TOKEN
