"""The transaction coordinator core does no I/O and reads no clock (the group coordinator's
import walk, over kgroup/transaction_coordinator and what it imports)."""
from tests.coordinator.test_purity import package_modules, walk_imports


def test_transaction_coordinator_imports_no_io_and_no_clock():
    seen, bad = walk_imports(package_modules("kgroup.transaction_coordinator"))
    assert len(seen) > 5 and not bad, bad
