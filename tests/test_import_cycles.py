"""No import circles in kgroup/: the graph of kgroup's own module-level imports (type-only ones
included) must have no cycle. A circle means two modules each need the other, which the one-way
layering (docs/architecture.md's rules) forbids: e.g. the log cleaner imports the log and never the reverse, the
consumer group's records and its model both import TopicMetadata from its own module."""
from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _is_module(name: str) -> bool:
    p = ROOT.joinpath(*name.split("."))
    return (p / "__init__.py").exists() or p.with_suffix(".py").exists()


def _module_level_imports(tree: ast.Module):
    """The module's import statements outside functions: module level, inside if/try blocks
    (``if TYPE_CHECKING:`` too: a circle of types is still a circle) and class bodies. An import
    inside a function is a deliberate late binding and not followed."""
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If):
            todo.extend(node.body + node.orelse)
        elif isinstance(node, ast.Try):
            todo.extend(node.body + node.orelse + node.finalbody + [s for h in node.handlers for s in h.body])
        elif isinstance(node, ast.ClassDef):
            todo.extend(node.body)


def module_graph() -> dict[str, set[str]]:
    """kgroup module -> the kgroup modules it imports (outside functions)."""
    graph: dict[str, set[str]] = {}
    for path in sorted((ROOT / "kgroup").rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        name = ".".join(parts)
        package = parts if is_package else parts[:-1]
        edges = graph.setdefault(name, set())
        for node in _module_level_imports(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                base = ".".join(package[:len(package) - node.level + 1]) if node.level else ""
                mod = ".".join(p for p in (base, node.module or "") if p)
                # ``from pkg import x`` needs the module pkg.x when there is one, else pkg itself
                targets = [f"{mod}.{a.name}" if _is_module(f"{mod}.{a.name}") else mod for a in node.names]
            for t in targets:
                if t.startswith("kgroup") and _is_module(t) and t != name:
                    edges.add(t)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_cycle_finder_finds_a_circle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_graph_sees_the_layering():
    graph = module_graph()
    assert "kgroup.storage.log" in graph["kgroup.storage.cleaner"]
    assert "kgroup.coordinator.topic_metadata" in graph["kgroup.coordinator.consumer_group.group"]


def test_kgroup_has_no_import_circles():
    assert cycles(module_graph()) == []
