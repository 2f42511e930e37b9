"""The optional extras of pyproject.toml, and the one way to say a feature needs one that is not installed.

A plain `pip install auger` has none of them; each feature that needs one asks here before it starts
(`missing`, `require`: the modules are looked for, not imported, so asking costs nothing at start-up) or
imports its modules under `importing`, which turns the extra's own ImportError into `MissingExtra`. Its
message is the one line the user reads — which feature, which extra, the pip command — and what can go on
without the feature goes on (a session without an MCP server or telemetry, web_fetch's plain-text pages).
Any other ImportError is a bug and raises as it is.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Iterator

# extra -> the modules auger imports from it (pyproject.toml's [project.optional-dependencies]); OpenTelemetry's
# by their full names, since `opentelemetry` alone (its API) comes with other packages (the MCP SDK)
EXTRAS: dict[str, tuple[str, ...]] = {
    "mcp": ("mcp",),
    "acp": ("acp",),
    "server": ("starlette", "uvicorn", "websockets", "acp"),
    "web": ("markdownify", "bs4", "pypdf"),
    "postgres": ("psycopg", "psycopg_pool", "pgqueuer"),
    "otel": ("opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http"),
    "lsp": ("tree_sitter", "tree_sitter_language_pack"),
}


class MissingExtra(Exception):
    """`feature` needs the optional `extra`, which is not installed; the message says what to install."""

    def __init__(self, extra: str, feature: str, module: str | None = None) -> None:
        super().__init__(needs(extra, feature, module))
        self.extra = extra
        self.feature = feature
        self.module = module


def install_command(extra: str) -> str:
    return f"pip install 'auger[{extra}]'"


def needs(extra: str, feature: str, module: str | None = None) -> str:
    """The one line that says it, e.g. "`auger serve` needs the server extra, which is not installed (no module
    'uvicorn'): pip install 'auger[server]'" (the module is named when it is not the extra's own name)."""
    found = f" (no module {module!r})" if module and module != extra else ""
    return f"{feature} needs the {extra} extra, which is not installed{found}: {install_command(extra)}"


def missing(extra: str) -> str | None:
    """The first of the extra's modules this interpreter cannot find (None: all of them are there). A dotted
    name's parent packages are imported to look inside them (only OpenTelemetry's are dotted; telemetry
    imports them under `importing` instead)."""
    import importlib.util  # here: the CLI imports this module for its error type, before anything is missing

    for module in EXTRAS[extra]:
        try:
            if importlib.util.find_spec(module) is None:
                return module
        except (ImportError, ValueError):  # a broken package counts as missing
            return module
    return None


def require(extra: str, feature: str) -> None:
    """Raise MissingExtra unless the extra's modules are installed."""
    module = missing(extra)
    if module is not None:
        raise MissingExtra(extra, feature, module)


@contextmanager
def importing(extra: str, feature: str) -> Iterator[None]:
    """Imports of the extra's modules inside: one that fails (absent, or too old to have a name auger
    imports) is MissingExtra."""
    try:
        yield
    except ImportError as exc:
        module = exc.name or ""
        if not module or not any(_nested(module, name) or _nested(name, module) for name in EXTRAS[extra]):
            raise
        raise MissingExtra(extra, feature, module) from None


def _nested(inner: str, outer: str) -> bool:
    """`inner` is the module `outer` or one inside it."""
    return f"{inner}.".startswith(f"{outer}.")
