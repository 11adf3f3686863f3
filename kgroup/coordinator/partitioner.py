"""Which ``__consumer_offsets`` partition owns a group: ``Utils.abs(groupId.hashCode()) % n``
(Java's ``String.hashCode`` and Kafka's ``Utils.abs`` are in ``kgroup.java_compat``)."""
from __future__ import annotations

from functools import lru_cache

from ..java_compat import string_hash_code, utils_abs


@lru_cache(maxsize=65536)
def group_partition(group_id: str, n: int = 50) -> int:
    # Cached: every transactional request and marker looks its id's shard up again, and the
    # hash walks the id's UTF-16 code units in Python.
    return utils_abs(string_hash_code(group_id)) % n
