"""mtplint's import graph read from its sources (every import, at module level or inside a function),
for the layering tests: which module imports which."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

from paths import ROOT

PACKAGE = ROOT / "lint"


def module_name(path: Path) -> str:
    parts = ["mtplint", *path.relative_to(PACKAGE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@cache
def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py")) if "__pycache__" not in p.parts}


def _resolve(importer: str, is_package: bool, node: ast.ImportFrom) -> list[str]:
    if node.level:
        base = importer.split(".") if is_package else importer.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    if not target.startswith("mtplint"):
        return []
    names = [f"{target}.{a.name}" for a in node.names]
    return [n for n in names if n in modules()] or [target]


@cache
def imports() -> dict[str, frozenset[str]]:
    """Module -> the mtplint modules it imports (a name imported from a package counts as the package)."""
    graph = {}
    for name, path in modules().items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                found.update(_resolve(name, path.name == "__init__.py", node))
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name.startswith("mtplint"))
        graph[name] = frozenset(m for m in found if m in modules() and m != name)
    return graph


def reachable(start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in imports()[todo.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def cycles() -> list[list[str]]:
    """Each set of modules that import one another, directly or not."""
    reach = {m: reachable(m) for m in imports()}
    found = {frozenset({m} | {o for o in reach[m] if m in reach[o]}) for m in reach if m in reach[m]}
    return sorted(sorted(c) for c in found)


def folder(module: str) -> str:
    """The folder (package) a module lives in; a package's __init__ is its own folder. The
    modules at the top of the package (`__main__`, `api`) are entry points, each its own."""
    path = modules()[module]
    if path.name == "__init__.py" or path.parent == PACKAGE:
        return module
    return module.rpartition(".")[0]


@cache
def folder_imports() -> dict[str, frozenset[str]]:
    """Folder -> the other folders its modules import (mtplint.probe.child is a folder of its own)."""
    graph: dict[str, set[str]] = {folder(m): set() for m in modules()}
    for module, targets in imports().items():
        graph[folder(module)].update(folder(t) for t in targets if folder(t) != folder(module))
    return {f: frozenset(t) for f, t in graph.items()}


def folder_cycles() -> list[list[str]]:
    """Each set of folders that import one another, directly or not."""
    graph = folder_imports()
    reach: dict[str, set[str]] = {}
    for start in graph:
        seen, todo = set(), [start]
        while todo:
            for nxt in graph[todo.pop()]:
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        reach[start] = seen
    found = {frozenset({f} | {o for o in reach[f] if f in reach[o]}) for f in reach if f in reach[f]}
    return sorted(sorted(c) for c in found)
