import pathlib

import pytest

# The repository's root. Everything the tests read lives below it: the project stands alone.
ROOT = pathlib.Path(__file__).resolve().parent.parent


def pytest_addoption(parser):
    parser.addoption("--long", action="store_true", help="run the long soak/chaos tests")


def pytest_collection_modifyitems(config, items):
    """Long soak/chaos runs are deselected unless --long (make test-long) asks for them."""
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
