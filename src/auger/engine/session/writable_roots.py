"""The session's writable roots: what the user granted at approvals, kept for every runtime of the session.

    an approval of a call with outside paths → `offer` (policy/writable_roots.py: the directory, unless it
    is refused or already granted) → the user chooses `approve_writable_root` → `grant`: judged again,
    added, bound writable in the sandbox, recorded as a `writable_root` item and announced as a warning

A resumed session `restore`s the roots its items record, each judged again as if granted now (the
home directory or auger's dirs may have moved since). The roots are shared like the mode
(engine/session/shared.py): a sub-agent's calls are decided with them too.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Iterable, Sequence
from functools import cached_property
from pathlib import Path

from auger.policy.types import Classification
from auger.policy.writable_roots import covered, offered_root, refusal
from auger.protocol.items import Item, WritableRoot

Record = Callable[[str, WritableRoot], Awaitable[None]]  # (turn id, item): commit it to the session


class WritableRoots:
    def __init__(self, *, projects: Sequence[Path], homes: Sequence[Path], own: Iterable[Path],
                 hidden: Iterable[Path] = (), bind: Callable[[Path], None] | None = None,
                 record: Record | None = None, warn: Callable[[str, str], None] = lambda turn_id, text: None) -> None:
        self._given = (tuple(projects), tuple(homes), tuple(own), tuple(hidden))
        self.bind = bind  # makes a root writable in the session's sandbox (Confinement.add_writable)
        self.record = record
        self.warn = warn  # (turn id, text): what the user is shown
        self.paths: tuple[Path, ...] = ()

    @cached_property
    def _bounds(self) -> tuple[tuple[Path, ...], ...]:
        """(projects, homes, own, hidden), resolved when a root is first judged: most sessions never
        judge one, and resolving the few dozen credential paths is most of what opening them would cost."""
        return tuple(tuple(Path(os.path.realpath(p)) for p in paths) for paths in self._given)

    def refusal(self, root: Path) -> str | None:
        projects, homes, own, hidden = self._bounds
        return refusal(root, projects=projects, homes=homes, own=own, hidden=hidden)

    def offer(self, c: Classification) -> Path | None:
        """The root an approval of `c` offers, or None: nothing outside, already granted, or refused."""
        root = offered_root(c)
        if root is None or covered(self.paths, c) or self.refusal(root) is not None:
            return None
        return root

    async def grant(self, root: Path, turn_id: str) -> str | None:
        """Grant `root` for the rest of the session; why not, when it is refused."""
        why = self.refusal(root)
        if why is not None:
            return why
        self._add(root)
        if self.record is not None:
            await self.record(turn_id, WritableRoot(str(root)))
        self.warn(turn_id, f"commands may write beneath {root} for the rest of this session (approved by the user)")
        return None

    def restore(self, items: Sequence[Item]) -> list[str]:
        """The roots a stored session recorded, granted again; a warning for each one now refused."""
        warnings = []
        for item in items:
            if isinstance(item, WritableRoot):
                root = Path(item.path)
                why = self.refusal(root)
                if why is None:
                    self._add(root)
                else:
                    warnings.append(f"the writable root {item.path} recorded in this session is not granted "
                                    f"again: {why}")
        if self.paths:
            warnings.append("commands may write beneath " + ", ".join(map(str, self.paths)) +
                            " (granted earlier in this session)")
        return warnings

    def _add(self, root: Path) -> None:
        if root not in self.paths:
            self.paths = (*self.paths, root)
            if self.bind is not None:
                self.bind(root)
