"""`/init`: a starter AGENTS.md written from a quick look at the project (its build files and folders),
for the user to correct — the agent reads it at the start of every session."""

from __future__ import annotations

from pathlib import Path

_STACKS = [
    ("pyproject.toml", "Python", "pip install -e .", "pytest -q"),
    ("setup.py", "Python", "pip install -e .", "pytest -q"),
    ("package.json", "JavaScript/TypeScript", "npm install", "npm test"),
    ("Cargo.toml", "Rust", "cargo build", "cargo test"),
    ("go.mod", "Go", "go build ./...", "go test ./..."),
    ("pom.xml", "Java (Maven)", "mvn -q compile", "mvn -q test"),
    ("build.gradle", "Java/Kotlin (Gradle)", "./gradlew build", "./gradlew test"),
    ("Gemfile", "Ruby", "bundle install", "bundle exec rake test"),
    ("CMakeLists.txt", "C/C++ (CMake)", "cmake -B build && cmake --build build", "ctest --test-dir build"),
]


def starter(root: Path) -> str:
    stacks = [s for s in _STACKS if (root / s[0]).is_file()]
    folders = sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")
                     and p.name not in {"node_modules", "__pycache__", "venv", "dist", "build"})[:15]
    lines = [f"# {root.name}", "", "Notes for coding agents working in this repository.", ""]
    lines += ["## Stack", ""]
    lines += [f"- {name} (`{marker}`)" for marker, name, _, _ in stacks] or ["- (describe the language and tools)"]
    lines += ["", "## Layout", ""]
    lines += [f"- `{d}/`: " for d in folders] or ["- (describe the main folders)"]
    lines += ["", "## Build and test", ""]
    has_make = (root / "Makefile").is_file()
    if has_make:
        lines.append("- `make` (see the Makefile's targets)")
    for _, _, build, test in stacks:
        lines += [f"- build: `{build}`", f"- test: `{test}`"]
    if not stacks and not has_make:
        lines.append("- (the commands that build and test the project)")
    lines += ["", "## Conventions", "", "- (style, naming, what to avoid, how to commit)", ""]
    return "\n".join(lines)


def write_starter(root: Path) -> str:
    """Write AGENTS.md unless one exists; say what happened."""
    target = root / "AGENTS.md"
    if target.exists():
        return f"{target.name} already exists; not overwritten"
    target.write_text(starter(root), encoding="utf-8")
    return f"wrote {target.name}: edit it to tell the agent how this project works"
