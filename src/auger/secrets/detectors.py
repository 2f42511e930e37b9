"""Secret values recognised by their shape: one table, one small detector per kind.

Each detector is a regular expression for one format (the secret is the whole match, or its `secret`
group), with an optional check of what it matched (a JWT's header must be JSON; an AWS secret key must not
be a git object id). The kind names the marker the value becomes (`[secret:github-token#1]`). The order of
the table is the order of preference where two detectors find the same text: specific formats first, the
settings-shaped ones (`password = "…"`) last.

Two ways to search, both cheap when a text holds nothing: a `Detector` whose pattern begins with its format's
literal prefix (`ghp_`, `AKIA`, `-----BEGIN`), which the regex engine finds at string-search speed; and a
`NamedValue`, for a value known only by the name before it (`DB_PASSWORD=…`, `"api_key": "…"`,
`aws_secret_access_key = …`): the names' words are found in the lower-cased text with `str.find`, and the
pattern is matched only there.

Why not a library: detect-secrets (Yelp, the maintained Python one) scans a line at a time and reports the
value, not where it is; its patterns miss today's formats (`github_pat_…`, `sk-proj-…`, Anthropic keys,
Google API keys); its private-key plugin sees only the BEGIN line, never the block; its entropy and keyword
plugins would hide every commit id and half the code; and it costs a quarter of a second to import. Its
shape — one small detector per kind, each tested with real-looking samples — is what this table keeps.
The formats come from the providers' documentation and from detect-secrets' and gitleaks' rules.

Values auger knows already (its provider keys, MCP credentials, secret environment variables) are not found
here: secrets/known.py lists them, and secrets/redact.py looks for them first, exactly.
"""

from __future__ import annotations

import base64
import binascii
import fnmatch
import json
import re
from dataclasses import dataclass
from typing import Callable, Protocol

from auger.lazy_regex import lazy_compile

_B64 = "A-Za-z0-9+/"
_B64URL = "A-Za-z0-9_-"
_AFTER = "(?![A-Za-z0-9_-])"  # a token ends where its characters end
_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")

Check = Callable[[re.Match[str]], bool]



class Finder(Protocol):
    @property
    def kind(self) -> str: ...

    def spans(self, text: str, lowered: str) -> list[tuple[int, int]]:
        """Where this kind's secrets are in `text` (`lowered`: the same text in lower case, as long)."""


def _secret_span(match: re.Match[str]) -> tuple[int, int]:
    return match.span("secret") if "secret" in match.re.groupindex else match.span()


@dataclass(frozen=True)
class Detector:
    """A format with a literal prefix; its matches are the secrets (or their `secret` group). `needs`: the
    literal parts a match has, one of which must be in the text before the pattern is compiled and run."""

    kind: str
    needs: tuple[str, ...]
    source: str
    valid: Check | None = None  # False: not a secret after all
    word_start: bool = True  # a match right after a letter, digit or '_' is the tail of another word: skipped
    flags: int = 0

    def spans(self, text: str, lowered: str) -> list[tuple[int, int]]:
        if not any(need in text for need in self.needs):
            return []
        found = []
        for match in _compiled(self.source, self.flags).finditer(text):
            begins = match.start()
            if self.word_start and begins > 0 and text[begins - 1] in _TOKEN_CHARS:
                continue
            if self.valid is None or self.valid(match):
                found.append(_secret_span(match))
        return found


@dataclass(frozen=True)
class NamedValue:
    """A value known by the name before it. `words` (lower case) are looked for in the lowered text; the
    pattern is matched from each one, and `valid` checks the match (its name's start, its value)."""

    kind: str
    words: tuple[str, ...]
    source: str  # matched at a word's position: it begins with the word (case-insensitive)
    valid: Check
    flags: int = 0

    def spans(self, text: str, lowered: str) -> list[tuple[int, int]]:
        found: dict[int, tuple[int, int]] = {}
        pattern = _compiled(self.source, self.flags)
        for word in self.words:
            at = lowered.find(word)
            while at >= 0:
                match = pattern.match(text, at)
                if match is not None and self.valid(match):
                    span = _secret_span(match)
                    found.setdefault(span[0], span)
                at = lowered.find(word, at + 1)
        return sorted(found.values())


_PATTERNS: dict[tuple[str, int], re.Pattern[str]] = {}


def _compiled(source: str, flags: int) -> re.Pattern[str]:
    """A detector's pattern, compiled the first time a text needs it (most texts need few of them)."""
    pattern = _PATTERNS.get((source, flags))
    if pattern is None:
        pattern = _PATTERNS[(source, flags)] = re.compile(source, flags)
    return pattern


# -- checks ------------------------------------------------------------------------------------------------

def _value(check: Callable[[str], bool]) -> Check:
    """A check of the secret a match found (its `secret` group, or the whole match)."""
    return lambda match: check(match.group("secret") if "secret" in match.re.groupindex else match.group(0))


def _jwt(value: str) -> bool:
    """A JWT with a signature: a JSON header naming its algorithm, a JSON payload, a signature."""
    header, payload, signature = value.split(".")[:3]
    try:
        head = json.loads(_b64url(header))
        json.loads(_b64url(payload))
    except (ValueError, UnicodeDecodeError, binascii.Error):
        return False
    return isinstance(head, dict) and "alg" in head and len(signature) >= 16


def _b64url(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def _mixed(value: str) -> bool:
    """A 40-character AWS secret key has upper and lower case letters; a git object id (hex) has not."""
    return any(c.isupper() for c in value) and any(c.islower() for c in value)


_DOTTED = lazy_compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
_PLACEHOLDERS = frozenset({"changeme", "password", "yourpassword", "your_password", "your-password", "secret",
                           "yoursecret", "your_token", "your-token", "placeholder", "example", "redacted",
                           "none", "null", "undefined", "true", "false", "required", "optional"})


def looks_secret(value: str) -> bool:
    """Whether a value given to a secret-sounding name looks like a secret rather than code or a placeholder:
    no reference, call or marker in it, not a URL, a path or a dotted name, not one character over and over,
    and a digit, a symbol or both cases in it."""
    value = value.rstrip(",;")
    if "://" in value or value.startswith(("/", "./", "../", "~/")):  # a URL or a path names where one is
        return False
    if _CODE.search(value) or _DOTTED.fullmatch(value):
        return False
    lower = value.lower()
    if len(set(lower)) <= 2 or lower in _PLACEHOLDERS:
        return False
    return bool(_DIGIT_OR_SYMBOL.search(value)) or (lower != value and value.upper() != value)


_CODE = lazy_compile(r"[()\[\]{}<>$`%]")
_DIGIT_OR_SYMBOL = lazy_compile(r"[^A-Za-z_.\-]")


def _basic(value: str) -> bool:
    """`Authorization: Basic …` carries base64 of user:password."""
    try:
        return b":" in base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return False


def _name_start(match: re.Match[str], before: str = " \t\r\n\0;'\"{(,", inside: str = "_.-") -> int | None:
    """Where the name the match's word belongs to begins (letters, digits and `inside` before the word), or
    None when something other than a separator (`before`) comes before it."""
    text, begin = match.string, match.start()
    while begin > 0 and (text[begin - 1].isalnum() or text[begin - 1] in inside):
        begin -= 1
    return begin if begin == 0 or text[begin - 1] in before else None


def _at_line_start(match: re.Match[str]) -> bool:
    begin = _name_start(match, " \t\r\n")
    if begin is None:
        return False
    line = match.string.rfind("\n", 0, begin) + 1
    return not match.string[line:begin].strip()


# -- the table -----------------------------------------------------------------------------------------------

_SECRET_WORDS = ("password", "passwd", "passphrase", "secret", "token", "api_key", "apikey", "api-key",
                 "access_key", "accesskey", "private_key", "credential")
_WORD = r"(?i:password|passwd|passphrase|secret|token|api[_-]?key|access[_-]?key|private[_-]?key|credential)"

DETECTORS: tuple[Finder, ...] = (
    # a private key block, whole: to its END line, or to the first character no key block has (cut short)
    Detector("private-key", ("PRIVATE KEY-----",),
             r"-----BEGIN (?P<label>[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?)-----"
             r"[A-Za-z0-9+/=\s:,.\\\"-]{0,65536}?(?:-----END (?P=label)-----|(?=[^A-Za-z0-9+/=\s:,.\\\"-])|\Z)",
             word_start=False),
    Detector("private-key", ("PuTTY-User-Key-File-",),
             r"PuTTY-User-Key-File-[23]: [\s\S]{0,8192}?Private-MAC: [0-9a-f]+"),
    Detector("anthropic-key", ("sk-ant-",), rf"sk-ant-(?:api|admin|oat|sid)\d\d-[{_B64URL}]{{32,}}"),
    Detector("openai-key", ("sk-",), rf"sk-(?:proj|svcacct|admin|None)-[{_B64URL}]{{20,}}"),
    Detector("openai-key", ("T3BlbkFJ",), rf"sk-[A-Za-z0-9]{{20}}T3BlbkFJ[A-Za-z0-9]{{20}}{_AFTER}"),
    Detector("github-token", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), rf"gh[pousr]_[A-Za-z0-9]{{36,251}}{_AFTER}"),
    Detector("github-token", ("github_pat_",), rf"github_pat_[A-Za-z0-9_]{{22,255}}{_AFTER}"),
    Detector("gitlab-token", ("glpat-",), rf"glpat-[{_B64URL}]{{20,}}"),
    Detector("aws-access-key-id", ("AKIA", "ASIA", "ABIA", "ACCA", "A3T"),
             rf"(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{{16}}{_AFTER}"),
    # an AWS secret access key within a few lines after its access key id (a CSV, `aws configure list`)
    Detector("aws-secret-key", ("AKIA", "ASIA"),
             rf"(?:AKIA|ASIA)[A-Z0-9]{{16}}[^\n]{{0,80}}?(?:\n[^\n]{{0,80}}?){{0,3}}(?<![{_B64}])"
             rf"(?P<secret>[{_B64}]{{40}})(?![{_B64}=])", _value(_mixed)),
    Detector("slack-token", ("xox",), r"xox[abposr]-(?:[0-9]+-)+[A-Za-z0-9-]+"),
    Detector("slack-token", ("xapp-",), r"xapp-\d-[A-Z0-9]+-\d+-[a-z0-9]+"),
    Detector("slack-webhook", ("hooks.slack.com",), r"https://hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9_/]{20,}"),
    Detector("stripe-key", ("k_live_", "k_test_"), rf"[sr]k_(?:live|test)_[0-9a-zA-Z]{{24,}}{_AFTER}"),
    Detector("stripe-key", ("whsec_",), rf"whsec_[0-9a-zA-Z]{{24,}}{_AFTER}"),
    Detector("google-api-key", ("AIza",), rf"AIza[{_B64URL}]{{35}}{_AFTER}"),
    Detector("google-oauth-secret", ("GOCSPX-",), rf"GOCSPX-[{_B64URL}]{{28}}{_AFTER}"),
    Detector("jwt", ("eyJ",), rf"eyJ[{_B64URL}]{{8,}}\.ey[{_B64URL}]{{8,}}\.[{_B64URL}]{{16,}}", _value(_jwt)),
    Detector("npm-token", ("npm_",), rf"npm_[A-Za-z0-9]{{36}}{_AFTER}"),
    Detector("pypi-token", ("pypi-AgE",), rf"pypi-AgE[IN][{_B64URL}]{{50,}}"),
    Detector("huggingface-token", ("hf_",), rf"hf_[A-Za-z0-9]{{34,}}{_AFTER}"),
    Detector("sendgrid-key", ("SG.",), rf"SG\.[{_B64URL}]{{22}}\.[{_B64URL}]{{43}}"),
    Detector("twilio-key", ("SK",), rf"SK[0-9a-f]{{32}}{_AFTER}"),
    Detector("square-token", ("sq0csp-",), rf"sq0csp-[{_B64URL}]{{43}}{_AFTER}"),
    Detector("shopify-token", ("shpat_", "shpca_", "shppa_", "shpss_"),
             rf"shp(?:at|ca|pa|ss)_[0-9a-fA-F]{{32}}{_AFTER}"),
    Detector("digitalocean-token", ("_v1_",), rf"do[opr]_v1_[0-9a-f]{{64}}{_AFTER}"),
    Detector("databricks-token", ("dapi",), rf"dapi[0-9a-f]{{32}}(?:-\d)?{_AFTER}"),
    Detector("azure-storage-key", ("AccountKey=",), rf"AccountKey=(?P<secret>[{_B64}]{{86}}==)", word_start=False),
    # the password in a URL (postgres://user:password@host)
    Detector("url-password", ("://",), r"://[^\s:/@\"'<>]{1,64}:(?P<secret>[^\s:/@\"'<>]{3,128})@[A-Za-z0-9.\[\]-]",
             lambda m: m.start() > 0 and m.string[m.start() - 1].isalnum()
             and not m.group("secret").startswith(("$", "{", "<", "%")) and m.group("secret").strip("*x") != "",
             word_start=False),
    NamedValue("authorization", ("authorization",),
               r"(?i:authorization)[\"']?\s*[:=]\s*[\"']?(?i:bearer|token)\s+(?P<secret>[A-Za-z0-9_.~+/-]{16,}=*)",
               lambda m: True),
    NamedValue("authorization", ("authorization",),
               rf"(?i:authorization)[\"']?\s*[:=]\s*[\"']?(?i:basic)\s+(?P<secret>[{_B64}]{{8,}}=*)", _value(_basic)),
    NamedValue("aws-secret-key", ("secret",),
               rf"(?i:secret_?(?:access_?)?key)[\"']?\s*[:=,]\s*[\"']?(?P<secret>[{_B64}]{{40}})(?![{_B64}=])",
               _value(_mixed)),
)

# Values known by a setting's name alone (`password = "…"`, `"api_key": "…"` in code and configuration, and
# `password = …` alone on a line, as in an ini file): looked at after the formats and the secret variables.
SETTINGS: tuple[Finder, ...] = (
    NamedValue("secret-setting", _SECRET_WORDS,
               rf"{_WORD}[A-Za-z0-9_.-]{{0,40}}[\"']?\s*(?::|=|:=|=>)\s*(?P<q>[\"'])(?P<secret>[^\"'\s]{{8,512}})(?P=q)",
               lambda m: _name_start(m) is not None and looks_secret(m.group("secret"))),
    NamedValue("secret-setting", _SECRET_WORDS,
               rf"{_WORD}[A-Za-z0-9_.-]{{0,40}}[ \t]*[:=][ \t]*(?P<secret>[^\s\"'#]{{8,512}})[ \t]*\r?$",
               lambda m: _at_line_start(m) and looks_secret(m.group("secret")), re.M),
)


def env_assignments(patterns: tuple[str, ...]) -> Finder:
    """`NAME=value` where NAME is a secret variable's name (`patterns`, the `[secrets] env` setting): what
    `env`, `printenv`, `/proc/self/environ`, `docker inspect` and a `.env` file print. Found from each
    pattern's literal part (KEY, TOKEN…); the whole name is then read back and matched."""
    compiled = [re.compile(fnmatch.translate(p.upper())) for p in patterns]
    words = tuple(sorted({max(re.split(r"[^A-Za-z0-9_]+", p), key=len).lower() for p in patterns}))
    if "" in words:  # a pattern with no literal part ("*"): every assignment is looked at
        words = ("=",)

    def valid(match: re.Match[str]) -> bool:
        begin = _name_start(match, " \t\r\n\0;'\"", "_")
        if begin is None:
            return False
        name = match.string[begin:match.end("name")].upper()
        return any(p.match(name) for p in compiled) and looks_secret(match.group("secret"))

    return NamedValue("secret-variable", words,
                      r"(?P<name>[A-Za-z0-9_]{0,128})=(?P<q>[\"']?)(?P<secret>[^\s\"'\0]{8,512})(?P=q)", valid)
