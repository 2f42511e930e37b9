"""Marker numbers: the same text is the same `[secret:KIND#N]` for the whole session, across restarts.

A number is given to a (kind, text) the first time the session redacts it, and recorded as a `secret_marker`
item holding the kind, the number and an HMAC-SHA256 of kind and text under a key that lives in auger's data
dir (`secrets.key`, 0600, hidden from commands like the rest of that dir) — never the text, and never the
key, in the store. A resumed session reads its markers back and, meeting the same text again, computes the
same HMAC and so the same number. Where the key is gone (another machine resumed the session, the file was
removed), texts met again get new numbers after the recorded ones: a number is never given to two texts.

Which text a marker stands for is kept in memory only, for putting values back into files (redact.py
`reveal`): after a restart a marker is known again once its text is met again (an edit reads its file first).
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections import Counter
from pathlib import Path
from typing import Iterable

KEY_FILE = "secrets.key"


def load_key(data_dir: Path) -> bytes | None:
    """The user's numbering key, made on first use; None when it can be neither read nor made (numbers then
    hold for this process only)."""
    path = data_dir / KEY_FILE
    try:
        key = path.read_bytes()
        if len(key) >= 32:
            return key
    except FileNotFoundError:
        pass
    except OSError:
        return None
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process made it meanwhile
        try:
            key = path.read_bytes()
        except OSError:
            return None
        return key if len(key) >= 32 else None
    except OSError:
        return None
    key = os.urandom(32)
    try:
        os.write(fd, key)
    finally:
        os.close(fd)
    return key


class Numbering:
    """Numbers per kind; `recorded` are the (kind, number, digest) a stored session holds."""

    def __init__(self, key: bytes | None, recorded: Iterable[tuple[str, int, str]] = ()) -> None:
        self._key = key if key is not None else os.urandom(32)
        self._by_digest: dict[str, str] = {}  # digest -> marker
        self._last: Counter[str] = Counter()  # kind -> its highest number yet
        self._texts: dict[str, str] = {}  # marker -> the text it stands for (met by this process)
        self._made: dict[tuple[str, str], str] = {}  # (kind, text) -> marker
        self.new: list[tuple[str, int, str]] = []  # numbers given since `take_new`, to be recorded
        for kind, number, digest in recorded:
            self._by_digest[digest] = _marker(kind, number)
            self._last[kind] = max(self._last[kind], number)

    def marker(self, kind: str, text: str) -> str:
        made = self._made.get((kind, text))
        if made is not None:
            return made
        digest = hmac.new(self._key, f"{kind}\0{text}".encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()
        marker = self._by_digest.get(digest)
        if marker is None:
            self._last[kind] += 1
            marker = _marker(kind, self._last[kind])
            self._by_digest[digest] = marker
            self.new.append((kind, self._last[kind], digest))
        self._made[(kind, text)] = marker
        self._texts[marker] = text
        return marker

    def text_of(self, marker: str) -> str | None:
        """The text `marker` stands for, when this process has met it."""
        return self._texts.get(marker)

    def take_new(self) -> list[tuple[str, int, str]]:
        new, self.new = self.new, []
        return new


def _marker(kind: str, number: int) -> str:
    return f"[secret:{kind}#{number}]"
