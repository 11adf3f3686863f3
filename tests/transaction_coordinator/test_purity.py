"""The transaction coordinator core does no I/O and reads no clock (same walk as the group
coordinator's test, over kgroup/transaction_coordinator and what it imports)."""
from tests.coordinator.test_purity import FORBIDDEN, ROOT, _imports, _module_path


def test_transaction_coordinator_imports_no_io_and_no_clock():
    todo = [f"kgroup.transaction_coordinator.{p.stem}" if p.stem != "__init__" else "kgroup.transaction_coordinator"
            for p in (ROOT / "kgroup" / "transaction_coordinator").glob("*.py")]
    seen, bad = set(), []
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
    assert len(seen) > 5 and not bad, bad
