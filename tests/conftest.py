import pathlib

import pytest

# The repository's root. Everything the tests read lives below it: the project stands alone.
ROOT = pathlib.Path(__file__).resolve().parent.parent


def pytest_addoption(parser):
    parser.addoption("--long", action="store_true", help="run the long soak/chaos tests")


# `make test` runs the suite on pytest-xdist workers with --dist loadgroup. Each file is one unit of
# work, so its module fixtures (a broker, a cluster, a matrix run) start once; files that share a
# session fixture (Spark's JVM and broker) or that each load the whole machine (the compatibility
# matrix runs every client at once) form one unit, so they never run beside each other.
SHARED_UNITS = {"tests/spark/": "spark", "tests/interop/test_matrix_": "matrix"}


def xdist_unit(nodeid: str) -> str:
    path = nodeid.split("::", 1)[0]
    return next((unit for prefix, unit in SHARED_UNITS.items() if path.startswith(prefix)), path)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Long soak/chaos runs are deselected unless --long (make test-long) asks for them; every test
    is marked with its xdist unit (read by xdist's own hook, which runs after this one)."""
    for item in items:
        item.add_marker(pytest.mark.xdist_group(xdist_unit(item.nodeid)))
    if config.getoption("--long"):
        return
    long_runs = [i for i in items if "long" in i.keywords]
    if long_runs:
        config.hook.pytest_deselected(items=long_runs)
        items[:] = [i for i in items if "long" not in i.keywords]


@pytest.fixture
def broker(tmp_path):
    from tests.harness import BrokerProcess
    b = BrokerProcess(tmp_path / "data").start()
    yield b
    b.stop()
