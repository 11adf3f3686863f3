"""Fixtures of the storage tests."""
from __future__ import annotations

import pytest

from tests.storage.helpers import FakeClock


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()
