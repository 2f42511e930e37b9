"""The servers this user's terminal talks to: which token opens each one, and which `auger serve` runs on
this machine on the same store.

Tokens. `auger login URL` keeps a server's token in the user's config dir, in `server-tokens.json`
(one entry per server: its scheme, host and port), mode 0600. The file is refused — neither read nor
written — when it is a symlink, is not the user's own, or is readable by anyone else, as the server's
own token file is (frontends/http_guard.py). Which token a client sends to a server, first found wins:
`AUGER_SERVER_TOKEN`; the one `auger login` kept for that server; and, for a server on this machine's
loopback, the owner's token that server keeps in this user's data dir (the same person runs both).

Servers on this machine. `auger serve` writes where it listens, its process id and its store into the
data dir (`servers/serve-PID.json`) while it runs, and removes it on the way out; `running_server`
finds the live one on a given store, so `/handoff` and `auger attach` need no URL on the machine
they share with it. The file holds no secret.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Mapping
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from auger._remote import Client

CLIENT_NAME = "terminal"  # how a server's records name this user's terminal (approval_resolved.by, the audit)
TOKEN_ENV = "AUGER_SERVER_TOKEN"
URL_ENV = "AUGER_SERVER_URL"
TOKENS_FILE = "server-tokens.json"
SERVERS_DIR = "servers"
MAX_TOKEN_CHARS = 200


class ServerError(ValueError):
    """A URL that names no server, a token that cannot be kept or read safely, no server to find; the
    message says what to do."""


def server_key(url: str) -> str:
    """`scheme://host:port` of an http(s) URL, as tokens are kept and clients connect (ServerError otherwise)."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.username or parts.password \
            or parts.query or parts.fragment or parts.path not in ("", "/"):
        raise ServerError(f"{url!r:.200} is not a server's address: give http://HOST:PORT or https://HOST:PORT")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise ServerError(f"{url!r:.200} has no valid port") from None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname.lower()
    return f"{parts.scheme}://{host}:{port}"


def save_token(config_dir: Path, url: str, token: str) -> Path:
    """Keep `token` for the server at `url`; the file it is kept in (created 0600, replaced whole)."""
    key = server_key(url)
    token = token.strip()
    if not token or len(token) > MAX_TOKEN_CHARS or any(not c.isprintable() or c.isspace() for c in token):
        raise ServerError("a token is one line of printable characters without spaces")
    path = config_dir / TOKENS_FILE
    kept = _read_tokens(path)
    kept[key] = token
    config_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    fresh = path.with_name(f".{TOKENS_FILE}.{os.getpid()}")
    fd = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        os.fchmod(handle.fileno(), 0o600)
        json.dump(kept, handle, indent=1, sort_keys=True)
        handle.write("\n")
    os.replace(fresh, path)
    return path


def stored_token(config_dir: Path, url: str) -> str | None:
    """The token `auger login` kept for the server at `url`, or None."""
    return _read_tokens(config_dir / TOKENS_FILE).get(server_key(url))


def token_for(url: str, env: Mapping[str, str], config_dir: Path, data_dir: Path) -> str | None:
    """The token to send to the server at `url` (see the module docstring), or None."""
    given = env.get(TOKEN_ENV)
    if given:
        return given
    kept = stored_token(config_dir, url)
    if kept:
        return kept
    from auger.frontends.http_guard import TOKEN_FILE, TokenError, is_loopback, kept_token

    host = urlsplit(url).hostname or ""
    owner_file = data_dir / TOKEN_FILE
    if is_loopback(host) and owner_file.exists():
        try:
            return kept_token(owner_file)
        except TokenError as exc:
            raise ServerError(str(exc)) from None
    return None


def client_for(url: str) -> Client:
    """A client of the server at `url`, with the token for it, naming itself the terminal (ServerError, saying
    how to get a token, without one)."""
    from auger import connect
    from auger.config import home_dirs

    dirs = home_dirs()
    key = server_key(url)
    token = token_for(key, os.environ, dirs["config"], dirs["data"])
    if not token:
        raise ServerError(f"no token for {key}: `auger login {key}` keeps one, or set {TOKEN_ENV}")
    return connect(key, token=token, name=CLIENT_NAME)


def _read_tokens(path: Path) -> dict[str, str]:
    try:
        info = path.lstat()
    except FileNotFoundError:
        return {}
    if path.is_symlink() or not path.is_file() or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise ServerError(f"{path} must be a regular file of yours readable by you alone (chmod 600 {path}); "
                          "it is neither read nor written until then")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ServerError(f"{path} cannot be read ({exc}); delete it and log in again") from None
    if not isinstance(data, dict):
        raise ServerError(f"{path} is not a table of servers; delete it and log in again")
    return {str(k): str(v) for k, v in data.items() if isinstance(v, str)}


# -- servers running on this machine ------------------------------------------------------------
@dataclass(frozen=True)
class Running:
    """An `auger serve` on this machine: where it listens, its process, the store it uses."""

    url: str
    pid: int
    store: str


def announce(data_dir: Path, url: str, store: str) -> Path:
    """Say, while this process serves, that it listens at `url` on `store`; the file to remove at the end."""
    folder = data_dir / SERVERS_DIR
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = folder / f"serve-{os.getpid()}.json"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump({"url": url, "pid": os.getpid(), "store": store}, handle)
    return path


def running_server(data_dir: Path, store: str) -> Running | None:
    """The live `auger serve` of this user on `store` (the newest, when there are several), or None."""
    found: list[tuple[float, Running]] = []
    for path in (data_dir / SERVERS_DIR).glob("serve-*.json"):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            running = Running(str(data["url"]), int(data["pid"]), str(data["store"]))
            when = path.stat().st_mtime
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if running.store == store and _alive(running.pid):
            found.append((when, running))
    return max(found, key=lambda pair: pair[0])[1] if found else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: not this user's server
        return False
    return True


def store_name(target: str | Path | None) -> str:
    """How a store is named in the files above: a SQLite file's real path, a database URL without its password."""
    from auger.store.factory import describe, is_postgres_url

    return describe(target) if is_postgres_url(target) else os.path.realpath(describe(target))
