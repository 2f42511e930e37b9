"""The redactor: secret values in a text replaced by markers, and markers put back where a value was.

    known values first, exactly (secrets/known.py, and every value this session has redacted since),
        whitespace between their characters allowed (a value folded over lines, spaced out), and in the
        forms a command makes of them: base64 (at any alignment, wrapped or not), hex, reversed, JSON- and
        URL-escaped
    then the shapes (secrets/detectors.py), on the text as it is; a value found by its shape is known from
        then on, in every form above (the session's first LEARNED of them: each one makes every later
        search cost a few more `find`s, and an output of thousands of tokens must not make it quadratic)

Each distinct text becomes `[secret:KIND#N]`: KIND says what it is (`github-token`, `env-openai-api-key`,
`env-openai-api-key.base64`), N counts the distinct texts of that kind in the session, so the same text is
always the same marker and the model can still say "the token in A is the one in B". A marker stands for
exactly one text, so it can be put back exactly (`reveal`).

The numbers outlive the process without the values: each is recorded as an HMAC of its kind and text under
a key kept in auger's data dir, never in the store (secrets/numbering.py); a resumed session numbers as the
one before it.

Streams (a command's output as it runs, a model's or an agent's text) are redacted by `StreamRedactor`, which
holds back the end of what arrived while it could still be the start of a secret, so a value split across
two pieces is never shown in parts.
"""

from __future__ import annotations

import base64
import bisect
import functools
import json
import re
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable
from urllib.parse import quote

from auger.lazy_regex import lazy_compile

if TYPE_CHECKING:
    from auger.secrets.detectors import Finder
    from auger.secrets.known import KnownSecret
    from auger.secrets.numbering import Numbering

MARKER = lazy_compile(r"\[secret:([a-z0-9][a-z0-9.-]{0,80})#(\d{1,6})\]")
ENCODED_CHARS = 256  # a value longer than this is looked for as written only (its encodings would be huge)
LINE_HOLD = 4096  # a stream holds back an unfinished line of up to this many characters (the shapes need it)
BLOCK_HOLD = 65536  # and an unfinished private key block of up to this many
LEARNED = 64  # values found by their shape that are then looked for in every form (each costs ~10 `find`s)
CLEAN_CACHED = 4096  # a text at least this long that a full redaction left clean is not searched again



class Unrestorable(Exception):
    """A text to write holds a marker that cannot be put back: one this session never made, or one that is
    not in the file being written (a secret is only ever kept where it was)."""

    def __init__(self, marker: str, made: bool) -> None:
        super().__init__(marker)
        self.marker = marker
        self.made = made  # the session made it (so it is new to this file), or it made no such marker

    def explain(self, path: str) -> str:
        """Why nothing was written to `path`, and what to do instead."""
        if self.made:
            return (f"{self.marker} stands for a secret value auger hid from you, and {path} does not hold it: "
                    "a secret is only ever kept where it already is, never written elsewhere. Leave the marker "
                    "out (keep the text around it as it is), or ask the user to put the value in")
        return (f"{self.marker} is not a marker auger made in this session, so there is no value to write in "
                f"its place in {path}. Write the text without it")


@dataclass
class Redaction:
    """A redacted text, and how many values of each kind were replaced in it."""

    text: str
    kinds: Counter[str] = field(default_factory=Counter)

    @property
    def count(self) -> int:
        return sum(self.kinds.values())


def encodings(kind: str, value: str) -> list[tuple[str, str]]:
    """(kind, text) of each form a value is looked for in: as written, JSON- and URL-escaped, and (for a value
    of at most ENCODED_CHARS) reversed, hex and base64 (standard and URL-safe, at each byte alignment: the
    characters of a longer base64 stream that hold only the value's bits)."""
    forms = [(kind, value), (kind, json.dumps(value)[1:-1]), (kind, quote(value, safe=""))]
    if len(value) <= ENCODED_CHARS:
        data = value.encode("utf-8", "surrogatepass")
        forms += [(f"{kind}.reversed", value[::-1]), (f"{kind}.hex", data.hex()), (f"{kind}.hex", data.hex().upper())]
        for skip in range(3):
            encoded = base64.b64encode(b"\0" * skip + data + b"\0\0").decode()
            core = encoded[-(-8 * skip // 6):(8 * (skip + len(data))) // 6]
            forms += [(f"{kind}.base64", core), (f"{kind}.base64", core.replace("+", "-").replace("/", "_"))]
    seen: set[str] = set()
    unique = []
    for form_kind, text in forms:
        key = "".join(text.split())
        if len(key) >= 8 and key not in seen:
            seen.add(key)
            unique.append((form_kind, key))
    return unique


class Needles:
    """Exact texts to find, whitespace between their characters allowed: searched with `str.find` in the
    text with its whitespace taken out, then mapped back (the search costs a few `find`s per megabyte; the
    mapping is done only for a text that holds one)."""

    def __init__(self) -> None:
        self._kinds: dict[str, str] = {}  # text (no whitespace) -> kind
        self._values: set[str] = set()  # the values added
        self._order: list[str] = []  # longest first: a value containing another is found whole
        self._prefixes: frozenset[str] | None = None  # every proper prefix of a needle, once `tail` asks

    def __bool__(self) -> bool:
        return bool(self._kinds)

    def __len__(self) -> int:
        return len(self._values)

    def add(self, kind: str, value: str) -> bool:
        """Look for `value` (and its encodings) from now on; False when it was looked for already."""
        if value in self._values:
            return False
        self._values.add(value)
        for form_kind, text in encodings(kind, value):
            self._kinds.setdefault(text, form_kind)
        self._order = sorted(self._kinds, key=len, reverse=True)
        self._prefixes = None
        return True

    def has(self, value: str) -> bool:
        """Whether `value` is one looked for (exactly, as added)."""
        return value in self._values

    def find(self, text: str) -> list[tuple[int, int, str]]:
        """(start, end, kind) of each needle in `text`, whitespace inside it included in its span."""
        if not self._kinds:
            return []
        squeezed = "".join(text.split())
        hits: list[tuple[int, int, str]] = []
        for needle in self._order:
            at = squeezed.find(needle)
            while at >= 0:
                hits.append((at, at + len(needle), self._kinds[needle]))
                at = squeezed.find(needle, at + len(needle))
        if not hits or len(squeezed) == len(text):
            return hits
        where = _Unsqueeze(text)
        return [(where.start(a), where.end(b), kind) for a, b, kind in hits]

    def first(self, text: str) -> str | None:
        """The kind of the first needle `text` holds (as written, whitespace as it is), or None."""
        for needle in self._order:
            if needle in text:
                return self._kinds[needle]
        return None

    def tail(self, text: str, after: int = 0) -> int:
        """Where the longest end of `text` from `after` on that could begin a needle starts (len(text): none
        could)."""
        if not self._kinds:
            return len(text)
        if self._prefixes is None:
            self._prefixes = _prefixes(tuple(self._order))
        longest = max(map(len, self._order))
        window = text[max(after, len(text) - 4 * longest):]
        ends = [i for i, c in enumerate(window) if not c.isspace()]  # positions of the window's characters
        squeezed = "".join(window[i] for i in ends)
        for k in range(max(0, len(squeezed) - longest + 1), len(squeezed)):
            if squeezed[k:] in self._prefixes:
                return len(text) - len(window) + ends[k]
        return len(text)


@functools.lru_cache(maxsize=32)
def _prefixes(needles: tuple[str, ...]) -> frozenset[str]:
    """Every proper prefix of the needles: hundreds of strings for a few secrets in their encodings, the same for
    every session that looks for the same values (a server's sessions all know its environment's), so made once
    and shared instead of kept by each session (55 KB each, a thousand idle sessions' 55 MB)."""
    return frozenset(n[:k] for n in needles for k in range(1, len(n)))


class _Unsqueeze:
    """Positions in a text with its whitespace taken out → positions in the text."""

    def __init__(self, text: str) -> None:
        self._starts: list[int] = []  # where each run of non-space characters begins in the text
        self._offsets: list[int] = []  # ... and in the squeezed text
        done = 0
        for run in re.finditer(r"\S+", text):
            self._starts.append(run.start())
            self._offsets.append(done)
            done += run.end() - run.start()

    def start(self, at: int) -> int:
        i = bisect.bisect_right(self._offsets, at) - 1
        return self._starts[i] + at - self._offsets[i]

    def end(self, at: int) -> int:
        return self.start(at - 1) + 1


class Redactor:
    """The session's: what it knows, how it numbers, and the shapes it looks for (one per session, shared
    by every runtime, sub-agent and stream of it). The file tools reveal on their threads while the loop
    redacts: a lock keeps the numbering and the learned values whole."""

    def __init__(self, known: Iterable[KnownSecret], numbering: Numbering, env_patterns: tuple[str, ...],
                 enabled: bool = True) -> None:
        self.enabled = enabled
        self.numbering = numbering
        self._env_patterns = env_patterns
        self._known = Needles()  # what the configuration and environment say is secret
        self._learned = Needles()  # what this session found by shape since
        self._labels: dict[str, str] = {}  # a known value's kind -> what it is, in words
        self._finders: tuple[Finder, ...] | None = None
        # long texts a full redaction left clean (by hash), with the number of learned values then: the
        # session's scrubber meets a tool's output again right after the runtime redacted it
        self._clean: dict[int, int] = {}
        self._learned_count = 0
        self._lock = threading.RLock()
        for secret in known:
            self._known.add(secret.kind, secret.value)
            self._labels.setdefault(secret.kind, secret.label)

    # -- finding -------------------------------------------------------------------------------------------
    def redact(self, text: str, *, shapes: bool = True) -> Redaction:
        """`text` with each secret value replaced by its marker: known and learned values everywhere, and with
        `shapes`, values recognised by their shape (which are learned)."""
        if not self.enabled or not text:
            return Redaction(text)
        with self._lock:
            return self._redact(text, shapes)

    def _redact(self, text: str, shapes: bool) -> Redaction:
        long = len(text) >= CLEAN_CACHED
        if long and self._clean.get(hash(text)) == self._learned_count:
            return Redaction(text)
        spans = self._known.find(text) + self._learned.find(text)
        if shapes and len(text) >= 8:
            lowered = text.lower()
            if len(lowered) != len(text):  # a few characters grow in lower case: ASCII only, then
                lowered = text.translate(_ASCII_LOWER)
            for finder in self._shapes():
                spans += [(start, end, finder.kind) for start, end in finder.spans(text, lowered)]
        if not spans:
            if long and shapes:
                self._remember_clean(text)
            return Redaction(text)
        taken = _without_overlaps(spans)
        out: list[str] = []
        kinds: Counter[str] = Counter()
        done = 0
        for start, end, kind in taken:
            value = text[start:end]
            out += [text[done:start], self.numbering.marker(kind, value)]
            kinds[kind] += 1
            done = end
            found_by_shape = "." not in kind and not (self._known.has(value) or self._learned.has(value))
            if found_by_shape and len(self._learned) < LEARNED and self._learned.add(kind, value):
                self._learned_count += 1  # from now on, in every form
        out.append(text[done:])
        redacted = "".join(out)
        if shapes and len(redacted) >= CLEAN_CACHED:
            self._remember_clean(redacted)
        return Redaction(redacted, kinds)

    def _remember_clean(self, text: str) -> None:
        if len(self._clean) >= 256:
            self._clean.clear()
        self._clean[hash(text)] = self._learned_count

    def known_in(self, text: str) -> str | None:
        """The kind of a value the configuration or environment says is secret that `text` holds (as written,
        JSON- or URL-escaped), or None: what may never be sent anywhere."""
        if not self.enabled:
            return None
        return self._known.first(text)

    def label(self, kind: str) -> str:
        """What a known value of `kind` is, in words (never the value)."""
        return self._labels.get(kind.split(".")[0], "a secret auger knows")

    def _shapes(self) -> tuple[Finder, ...]:
        if self._finders is None:  # the table is loaded by the first text that is looked at for shapes
            from auger.secrets.detectors import DETECTORS, SETTINGS, env_assignments

            self._finders = (*DETECTORS, env_assignments(self._env_patterns), *SETTINGS)
        return self._finders

    # -- streams -------------------------------------------------------------------------------------------
    def stream(self, *, shapes: bool) -> StreamRedactor:
        return StreamRedactor(self, shapes)

    # -- putting values back -------------------------------------------------------------------------------
    def reveal(self, text: str, original: str) -> str:
        """`text` (what the model wants written where `original` is now) with the markers that stand for
        values in `original` put back. A marker `original` holds as written stays as written. Raises
        Unrestorable for any other marker: one the session never made, or one for a value `original` does
        not hold (a secret is only ever kept where it is, never copied elsewhere)."""
        if not self.enabled or "[secret:" not in text:
            return text
        here = self._markers_of(original)
        literal = set(MARKER.findall(original)) if "[secret:" in original else set()

        def put_back(match: re.Match[str]) -> str:
            marker = match.group(0)
            value = here.get(marker)
            if value is not None:
                return value
            if (match.group(1), match.group(2)) in literal:
                return marker
            raise Unrestorable(marker, self.numbering.text_of(marker) is not None)

        return MARKER.sub(put_back, text)

    def _markers_of(self, original: str) -> dict[str, str]:
        """marker -> the text it stands for, for the markers redacting `original` makes."""
        if not original:
            return {}
        redaction = self.redact(original)
        if not redaction.count:
            return {}
        return {m.group(0): value for m in MARKER.finditer(redaction.text)
                if (value := self.numbering.text_of(m.group(0))) is not None and value in original}


def _without_overlaps(spans: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """The spans to replace, in text order: each in the order given (known values first, then the table's
    order) unless it overlaps one taken before it."""
    taken: list[tuple[int, int, str]] = []
    starts: list[int] = []
    for start, end, kind in spans:
        i = bisect.bisect_left(starts, start)
        if i > 0 and taken[i - 1][1] > start:
            continue
        if i < len(taken) and taken[i][0] < end:
            continue
        taken.insert(i, (start, end, kind))
        starts.insert(i, start)
    return taken


_ASCII_LOWER = {c: c + 32 for c in range(ord("A"), ord("Z") + 1)}


# How the formats that begin in lower case begin (secrets/detectors.py): a lower-case word that begins none of
# them cannot be the start of a secret, so a stream need not hold it back.
_LOWER_STARTS = ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-", "xoxb-", "xoxp-", "xoxa-",
                 "xoxo-", "xoxs-", "xoxr-", "xapp-", "sk-", "sk_", "rk_", "whsec_", "npm_", "pypi-", "hf_", "sq0csp-",
                 "shpat_", "shpca_", "shppa_", "shpss_", "dop_v1_", "doo_v1_", "dor_v1_", "dapi")


def _may_begin_secret(word: str) -> bool:
    """Whether a stream's last word could be the start of a secret the next piece completes: anything but a
    plain lower-case word that begins no format's prefix."""
    if not word:
        return False
    if not (word.isalpha() and word.islower()):
        return True
    return any(start.startswith(word) for start in _LOWER_STARTS)


class StreamRedactor:
    """One stream's redaction: `feed` each piece as it arrives and show what it returns; `flush` at the end.

    What it holds back: the longest end that could begin a known value (a few characters at most, usually
    none), and with shapes, an unfinished line (a shape is matched on whole lines) and an unfinished private
    key block."""

    def __init__(self, redactor: Redactor, shapes: bool) -> None:
        self._redactor = redactor
        self._shapes = shapes
        self._held = ""

    def feed(self, text: str) -> Redaction:
        if not self._redactor.enabled:
            return Redaction(text)
        text = self._held + text
        cut = self._cut(text)
        self._held = text[cut:]
        return self._redactor.redact(text[:cut], shapes=self._shapes)

    def flush(self) -> Redaction:
        text, self._held = self._held, ""
        return self._redactor.redact(text, shapes=self._shapes)

    def _cut(self, text: str) -> int:
        """Where what may be shown of `text` ends: never inside a value it holds whole, never after the start
        of one it may hold only the beginning of."""
        redactor = self._redactor
        whole = redactor._known.find(text) + redactor._learned.find(text)
        after = max((end for _, end, _ in whole), default=0)
        cut = min(redactor._known.tail(text, after), redactor._learned.tail(text, after))
        if self._shapes:
            line = text.rfind("\n") + 1
            rest = text[line:]
            if len(rest) <= LINE_HOLD and ("=" in rest or ":" in rest):  # a setting may be cut after its name
                cut = min(cut, line)
            else:  # hold back the last word, when a secret could begin with it
                word = len(text)
                while word > max(line, len(text) - 512) and not text[word - 1].isspace():
                    word -= 1
                if _may_begin_secret(text[word:]):
                    cut = min(cut, word)
            block = text.rfind("-----BEGIN", max(0, len(text) - BLOCK_HOLD))
            if block >= 0 and "-----END" not in text[block:]:
                cut = min(cut, block)
        return cut
