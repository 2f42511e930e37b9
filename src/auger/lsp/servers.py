"""Which language servers a session may start: the defaults auger knows, the user's `[lsp.NAME]` tables, and
which file each one serves.

    [lsp.NAME]                     a server of the user's own, or changes to a default of that name
    command = ["prog", "arg"…]     what to run (the program looked for on PATH, and beside auger's Python)
    languages = ["python"]         LSP language ids it serves (the extensions of known ids are known)
    extensions = [".ml"]           more file extensions, for a language auger does not know
    disabled = true                never start it (a default the user does not want)
    settings = { … }               what it is told when it asks for its configuration
    initialization_options = { … } what `initialize` tells it
    severity = "warning"           the least serious problem told after an edit (default "error")

Defaults, each used when its program is found: Python — `basedpyright-langserver` (else
`pyright-langserver`: one type checker per language, `group`) and `ruff server`; TypeScript and
JavaScript — `typescript-language-server`; Go — `gopls`; Rust — `rust-analyzer`. Only the user's own
config names servers: a project's `[lsp]` is refused (config.py), because a server is a command auger
starts. Parsing never raises: a bad table is a warning and is left out.
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

from auger.protocol.vocab import Severity

# LSP language id -> the file extensions it covers
LANGUAGES: dict[str, tuple[str, ...]] = {
    "python": (".py", ".pyi"),
    "typescript": (".ts", ".mts", ".cts"),
    "typescriptreact": (".tsx",),
    "javascript": (".js", ".mjs", ".cjs"),
    "javascriptreact": (".jsx",),
    "go": (".go",),
    "rust": (".rs",),
    "c": (".c", ".h"),
    "cpp": (".cc", ".cpp", ".cxx", ".hpp", ".hh", ".hxx"),
    "java": (".java",),
    "csharp": (".cs",),
    "ruby": (".rb",),
    "php": (".php",),
    "lua": (".lua",),
    "kotlin": (".kt", ".kts"),
    "swift": (".swift",),
    "scala": (".scala",),
    "zig": (".zig",),
}
LANGUAGE_NAMES = {"python": "Python", "typescript": "TypeScript", "typescriptreact": "TypeScript",
                  "javascript": "JavaScript", "javascriptreact": "JavaScript", "go": "Go", "rust": "Rust"}
SEVERITY_ORDER = (Severity.ERROR, Severity.WARNING, Severity.INFORMATION, Severity.HINT)


@dataclass(frozen=True)
class ServerSpec:
    """One language server as configured. `group`: of the defaults, only the first found in a group runs
    (basedpyright before pyright: two type checkers would report everything twice)."""

    name: str
    command: tuple[str, ...]
    languages: tuple[str, ...]
    extensions: tuple[str, ...] = ()
    group: str = ""
    settings: Mapping[str, Any] = field(default_factory=dict)
    init_options: Mapping[str, Any] = field(default_factory=dict)  # `initializationOptions`
    severity: Severity = Severity.ERROR
    install: str = ""  # how to get it, for the notice when it is missing

    def serves(self, path: str) -> str | None:
        """The language id this server reads `path` as, or None."""
        suffix = os.path.splitext(path)[1].lower()
        for language in self.languages:
            if suffix in LANGUAGES.get(language, ()):
                return language
        return self.languages[0] if suffix in self.extensions and self.languages else None

    def reports(self, severity: Severity) -> bool:
        return SEVERITY_ORDER.index(severity) <= SEVERITY_ORDER.index(self.severity)


_PYRIGHT_SETTINGS = {"analysis": {"diagnosticMode": "openFilesOnly", "typeCheckingMode": "standard"}}
DEFAULTS: tuple[ServerSpec, ...] = (
    ServerSpec("basedpyright", ("basedpyright-langserver", "--stdio"), ("python",), group="python",
               settings={"basedpyright": _PYRIGHT_SETTINGS}, install="pip install 'auger[lsp]' (basedpyright)"),
    ServerSpec("pyright", ("pyright-langserver", "--stdio"), ("python",), group="python",
               settings={"python": _PYRIGHT_SETTINGS}, install="npm install -g pyright"),
    ServerSpec("ruff", ("ruff", "server"), ("python",), group="python-lint", install="pip install ruff"),
    ServerSpec("typescript", ("typescript-language-server", "--stdio"),
               ("typescript", "typescriptreact", "javascript", "javascriptreact"),
               # one tsserver, not a second for syntax; no typings fetched from npm (it is offline anyway)
               init_options={"tsserver": {"useSyntaxServer": "never"}, "disableAutomaticTypingAcquisition": True},
               install="npm install -g typescript-language-server typescript"),
    ServerSpec("gopls", ("gopls",), ("go",), install="go install golang.org/x/tools/gopls@latest"),
    ServerSpec("rust-analyzer", ("rust-analyzer",), ("rust",), install="rustup component add rust-analyzer"),
)
_KEYS = {"command", "languages", "extensions", "disabled", "settings", "initialization_options", "severity"}


def configured_servers(tables: Mapping[str, Any]) -> tuple[list[ServerSpec], list[str]]:
    """The defaults with the user's `[lsp.NAME]` tables applied (in the defaults' order, then the user's
    own), and a warning for each bad table or key (left out)."""
    table = tables.get("lsp") or {}
    problems: list[str] = []
    if not isinstance(table, Mapping):
        return list(DEFAULTS), ["[lsp] must be a table of [lsp.NAME] tables (ignored)"]
    specs = {spec.name: spec for spec in DEFAULTS}
    for name, entry in table.items():
        parsed = _parse(str(name), entry, specs.get(str(name)))
        if isinstance(parsed, str):
            problems.append(f"[lsp.{name}]: {parsed} (ignored)")
        elif parsed is None:
            specs.pop(str(name), None)
        else:
            specs[parsed.name] = parsed
    return list(specs.values()), problems


def _parse(name: str, entry: Any, default: ServerSpec | None) -> ServerSpec | None | str:
    """The spec of one table (None: disabled), or what is wrong with it."""
    if not isinstance(entry, Mapping):
        return "expected a table"
    unknown = sorted(set(entry) - _KEYS)
    if unknown:
        return f"unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(_KEYS))})"
    if entry.get("disabled") is True:
        return None
    spec = default or ServerSpec(name, (), ())
    command, languages, extensions = entry.get("command"), entry.get("languages"), entry.get("extensions")
    if command is not None:
        if not _strings(command) or not command:
            return "`command` must be a non-empty list of strings"
        spec = replace(spec, command=tuple(command), install="")
    if languages is not None:
        if not _strings(languages) or not languages:
            return "`languages` must be a non-empty list of LSP language ids"
        spec = replace(spec, languages=tuple(languages))
    if extensions is not None:
        if not _strings(extensions):
            return "`extensions` must be a list of file extensions"
        spec = replace(spec, extensions=tuple(e.lower() if e.startswith(".") else f".{e.lower()}" for e in extensions))
    settings = entry.get("settings")
    if settings is not None:
        if not isinstance(settings, Mapping):
            return "`settings` must be a table"
        spec = replace(spec, settings=dict(settings))
    options = entry.get("initialization_options")
    if options is not None:
        if not isinstance(options, Mapping):
            return "`initialization_options` must be a table"
        spec = replace(spec, init_options=dict(options))
    severity = entry.get("severity")
    if severity is not None:
        if severity not in {s.value for s in Severity}:
            return f"`severity` must be one of {', '.join(s.value for s in Severity)}"
        spec = replace(spec, severity=Severity(severity))
    if default is None and not spec.command:
        return "`command` is required for a server auger does not know"
    if not spec.languages:
        return "`languages` is required for a server auger does not know"
    unknown_languages = [lang for lang in spec.languages if lang not in LANGUAGES]
    if unknown_languages and not spec.extensions:
        return f"language(s) {', '.join(unknown_languages)} need `extensions` (auger does not know their files)"
    if default is not None and (command is not None or languages is not None):
        spec = replace(spec, group="")  # the user's own choice runs whatever else is found
    return spec


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) and v for v in value)


def search_path(env: Mapping[str, str] | None) -> str:
    """Where server programs are looked for: the command environment's PATH, then the directory of auger's
    own interpreter (where `pip install 'auger[lsp]'` puts basedpyright-langserver and ruff, also when its
    environment is not activated)."""
    path = (env if env is not None else os.environ).get("PATH", os.defpath)
    return os.pathsep.join(filter(None, (path, str(Path(sys.executable).parent))))


def find_program(program: str, path: str) -> str | None:
    """The program's absolute path, or None when it is not there."""
    if os.sep in program:
        return program if os.path.isfile(program) and os.access(program, os.X_OK) else None
    return shutil.which(program, path=path)


def language_name(language: str) -> str:
    return LANGUAGE_NAMES.get(language, language)
