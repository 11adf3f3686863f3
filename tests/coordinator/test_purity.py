"""docs/architecture.md's rule 2 (pure core): the coordinator core does no I/O and reads no clock. Walks the
imports of every module under kgroup/coordinator (and, transitively, the kgroup modules they
import)."""
from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
FORBIDDEN = {"asyncio", "socket", "time", "threading", "selectors", "subprocess"}


def _imports(path: pathlib.Path, package: str):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
                if node.module is None:
                    for alias in node.names:
                        yield f"{mod}.{alias.name}"
                    continue
                yield mod
            else:
                yield node.module


def _module_path(name: str):
    p = ROOT.joinpath(*name.split("."))
    if (p / "__init__.py").exists():
        return p / "__init__.py", name
    if p.with_suffix(".py").exists():
        return p.with_suffix(".py"), name.rsplit(".", 1)[0]
    return None, None


def walk_imports(modules):
    """Walk the imports of ``modules`` and, transitively, of the kgroup modules they import:
    (every module seen, [(module, forbidden import)])."""
    todo, seen, bad = list(modules), set(), []
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        path, package = _module_path(name)
        if path is None:
            continue
        if path.name == "__init__.py":
            package = name
        for imp in _imports(path, package):
            if imp.split(".")[0] in FORBIDDEN:
                bad.append((name, imp))
            elif imp.startswith("kgroup"):
                todo.append(imp)
    return seen, bad


def package_modules(package: str) -> list[str]:
    """The modules directly in a kgroup package (``kgroup.coordinator`` -> its *.py)."""
    folder = ROOT.joinpath(*package.split("."))
    return [package if p.stem == "__init__" else f"{package}.{p.stem}" for p in folder.glob("*.py")]


def test_coordinator_imports_no_io_and_no_clock():
    seen, bad = walk_imports(package_modules("kgroup.coordinator"))
    assert not bad, bad
    assert "kgroup.coordinator.shard" in seen and "kgroup.protocol.schema" in seen


def test_share_coordinator_imports_no_io_and_no_clock():
    seen, bad = walk_imports(package_modules("kgroup.share_coordinator")
                             + package_modules("kgroup.coordinator.share_group"))
    assert not bad, bad
    assert "kgroup.share_coordinator.shard" in seen and "kgroup.coordinator.share_group.manager" in seen
