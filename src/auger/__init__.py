"""auger: an AI coding-agent engine, as a Python library.

    import auger

    result = await auger.run("fix the failing test", cwd=".")          # one prompt, one new session
    print(result.text, result.diff, result.usage)

    async with auger.open(cwd=".", mode="safe", approve=ask) as session:
        async for event in session.run("add a --verbose flag"):       # the protocol's typed events
            ...
        print((await session.diff()).text)
        await session.undo()

    async with auger.connect("http://127.0.0.1:8765", token=...) as server:   # the same, on `auger serve`
        async with server.open(cwd="/srv/project") as session: ...

The names listed in `__all__` are the API (docs/library.md is its reference); every other module is
private, and may change without notice. The events are in `auger.events`, the ops `Session.submit` takes
in `auger.ops`.

Importing this module is cheap on purpose: the names are loaded when first used (`__getattr__`), so
`auger --version` and `import auger` never pay for the engine.
"""

from typing import TYPE_CHECKING

from auger._version import __version__ as __version__

if TYPE_CHECKING:
    from auger import events as events
    from auger import ops as ops
    from auger._errors import (
        ApprovalFailed as ApprovalFailed, AugerError as AugerError, ConfigError as ConfigError, Refused as Refused,
        RemoteError as RemoteError, SessionBusy as SessionBusy, SessionClosed as SessionClosed,
        SessionNotFound as SessionNotFound, StoreError as StoreError, TurnError as TurnError,
        TurnFailed as TurnFailed, TurnInterrupted as TurnInterrupted,
    )
    from auger._local import open_session as open, resume_session as resume, run as run, run_sync as run_sync
    from auger._remote import Client as Client, connect as connect
    from auger._session import Opening as Opening, Run as Run, Session as Session
    from auger._types import (
        Approver as Approver, Decision as Decision, Diff as Diff, Result as Result, Task as Task,
        TurnChange as TurnChange,
    )
    from auger.protocol.events import ApprovalRequest as ApprovalRequest, Event as Event, Usage as Usage

__all__ = [
    "__version__",
    # sessions in this process
    "open", "resume", "run", "run_sync",
    # sessions on `auger serve`
    "connect", "Client",
    # what they are made of
    "Session", "Run", "Opening", "Result", "Diff", "TurnChange", "Decision", "Approver", "Task",
    "ApprovalRequest", "Event", "Usage", "events", "ops",
    # errors
    "AugerError", "ConfigError", "SessionNotFound", "SessionBusy", "SessionClosed", "Refused", "StoreError",
    "RemoteError", "TurnError", "TurnFailed", "TurnInterrupted", "ApprovalFailed",
]

# Where each name lives: (module, attribute); the attribute is the name unless given.
_LAZY: dict[str, tuple[str, str]] = {
    "open": ("auger._local", "open_session"), "resume": ("auger._local", "resume_session"),
    "run": ("auger._local", "run"), "run_sync": ("auger._local", "run_sync"),
    "connect": ("auger._remote", "connect"), "Client": ("auger._remote", "Client"),
    "Session": ("auger._session", "Session"), "Run": ("auger._session", "Run"),
    "Opening": ("auger._session", "Opening"),
    **{name: ("auger._types", name) for name in ("Result", "Diff", "TurnChange", "Decision", "Approver", "Task")},
    **{name: ("auger.protocol.events", name) for name in ("ApprovalRequest", "Event", "Usage")},
    **{name: ("auger._errors", name) for name in (
        "AugerError", "ConfigError", "SessionNotFound", "SessionBusy", "SessionClosed", "Refused", "StoreError",
        "RemoteError", "TurnError", "TurnFailed", "TurnInterrupted", "ApprovalFailed")},
}

if not TYPE_CHECKING:  # for a type checker every name is imported above; an unknown one stays an error
    def __getattr__(name: str):
        import importlib

        if name in ("events", "ops"):
            return importlib.import_module(f"auger.{name}")
        where = _LAZY.get(name)
        if where is None:
            raise AttributeError(f"module 'auger' has no attribute {name!r}")
        value = getattr(importlib.import_module(where[0]), where[1])
        globals()[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})
