"""Share sessions (Kafka's ShareSessionCache): open with epoch 0, the epoch sequence, incremental
partitions and ForgottenTopicsData, close with -1, the session limit and the errors."""
import pytest

from kgroup.protocol.errors import ErrorCode, KafkaError
from kgroup.share.share_session import ShareSessionCache, next_epoch

A, B = (b"a" * 16, 0), (b"b" * 16, 1)


def code(fn, *args):
    with pytest.raises(KafkaError) as e:
        fn(*args)
    return e.value.code


def test_session_life_cycle():
    c = ShareSessionCache(max_sessions=2)
    s, old = c.open("g", "m1", [A])
    assert old is None and s.epoch == 1 and list(s.partitions) == [A]
    assert code(c.check, "g", "m1", 2) == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    assert c.check("g", "m1", 1) is s
    c.update(s, [B], [A])
    assert s.epoch == 2 and list(s.partitions) == [B]
    assert code(c.check, "g", "m2", 1) == ErrorCode.SHARE_SESSION_NOT_FOUND
    c.open("g", "m2", [])
    assert code(c.open, "g", "m3", []) == ErrorCode.SHARE_SESSION_LIMIT_REACHED
    s2, old = c.open("g", "m1", [A])          # epoch 0 again: replaces the member's session
    assert old is s and s2.epoch == 1
    assert c.check("g", "m1", -1) is s2        # the final epoch closes whatever the epoch is
    assert c.close("g", "m1") is s2 and c.get("g", "m1") is None
    assert next_epoch(2**31 - 1) == 1
