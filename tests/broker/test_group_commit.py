"""Group commit in the data path, in process: waiters are answered only after their logs were
fsynced, one fsync per log serves every waiter of a loop iteration, and an fsync failure fails
the waiters instead of acknowledging (the data stays dirty and the next flush retries it)."""
import asyncio
import os

import pytest

from kgroup.broker.config import BrokerConfig
from kgroup.broker.data_path import DataPath
from kgroup.protocol.records import Record, build_batch


def _dp(tmp_path):
    dp = DataPath(BrokerConfig({"log.dirs": str(tmp_path)}), str(tmp_path), {})
    dp.create_partitions("t", 2, {})
    return dp


def test_one_fsync_per_log_for_all_waiters_of_a_loop_iteration(tmp_path, monkeypatch):
    synced = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: synced.append(fd) or real(fd))

    async def main():
        dp = _dp(tmp_path)
        a, b = dp.log("t", 0), dp.log("t", 1)
        waiters = []
        for i in range(10):  # ten acks=-1 appends in one iteration: one group commit
            a.append(build_batch([Record(value=b"%d" % i, timestamp=1)]))
            waiters.append(dp.wait_flushed({a}))
        b.append(build_batch([Record(value=b"x", timestamp=1)]))
        waiters.append(dp.wait_flushed({b}))
        assert not any(w.done() for w in waiters)  # nothing acknowledged before the fsync
        await asyncio.gather(*waiters)
        assert (a.recovery_point, b.recovery_point) == (10, 1)
        assert len(synced) == 2
        dp.close()

    asyncio.run(main())


def test_fsync_failure_fails_the_waiters(tmp_path, monkeypatch):
    def broken(fd):
        raise OSError(5, "Input/output error")

    async def main():
        dp = _dp(tmp_path)
        a = dp.log("t", 0)
        a.append(build_batch([Record(value=b"1", timestamp=1)]))
        monkeypatch.setattr(os, "fsync", broken)
        with pytest.raises(OSError):
            await dp.wait_flushed({a})
        assert a.recovery_point == 0
        monkeypatch.undo()
        await dp.wait_flushed({a})  # the failed data is retried, not forgotten
        assert a.recovery_point == 1
        dp.close()

    asyncio.run(main())
