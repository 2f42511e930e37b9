#!/usr/bin/env python3
"""Fail when modules of a package import each other in a cycle.

Imports must point downward (frontends → engine → tools/policy/models/context/store → protocol); a
cycle means two modules cannot be understood, tested or loaded apart. Every import counts — top-level,
function-local and TYPE_CHECKING alike — so a cycle cannot be hidden by moving an import into a function.

Usage: check_import_cycles.py [SRC_DIR [PACKAGE]]   (default: src auger)
Prints each cycle (a strongly connected component of more than one module); exit 1 if any.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path


def modules(src: Path, package: str) -> dict[str, Path]:
    found = {}
    for path in sorted((src / package).rglob("*.py")):
        name = ".".join(path.relative_to(src).with_suffix("").parts)
        found[name.removesuffix(".__init__")] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The package's modules that `name` imports (the longest known prefix of each imported name)."""
    def resolve(target: str) -> str | None:
        while target and target not in known:
            target = target.rpartition(".")[0]
        return target or None

    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package[: len(package) - (node.level - 1)]
                base = ".".join([*parent, *([base] if base else [])])
            targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        for target in targets:  # `from pkg import mod` imports pkg.mod if it is a module, else pkg
            resolved = resolve(target)
            if resolved and resolved != name:
                found.add(resolved)
                break
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for succ in edges:
                if succ not in index:
                    index[succ] = low[succ] = len(index)
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted(graph[succ]))))
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def main(argv: list[str]) -> int:
    src, package = Path(argv[0] if argv else "src"), argv[1] if len(argv) > 1 else "auger"
    known = modules(src, package)
    graph = {name: imports(name, path, known) for name, path in known.items()}
    found = cycles(graph)
    for component in found:
        print("import cycle:", " ".join(component))
    print(f"{len(found)} import cycles among {len(known)} modules of {package}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
