"""Group commit in the data path, in process: waiters are answered only after their logs were
made durable, one fsync per log (or one syncfs for several logs) serves every waiter of a loop
iteration, a syncfs runs on its own thread while the loop goes on, and an fsync failure fails
the waiters instead of acknowledging (the data stays dirty and the next flush retries it)."""
import asyncio
import os
import threading

import pytest

from kgroup.broker import data_path as data_path_module
from kgroup.broker.config import BrokerConfig
from kgroup.broker.data_path import DataPath
from kgroup.protocol.records import Record, build_batch
from kgroup.storage import fs
from tests.broker.support import response_of


def _dp(tmp_path):
    dp = DataPath(BrokerConfig({"log.dirs": str(tmp_path)}), str(tmp_path), {})
    dp.create_partitions("t", 2, {})
    return dp


def _count_syncs(monkeypatch):
    """Record every fsync and syncfs (both still happen)."""
    calls = {"fsync": 0, "syncfs": 0}
    real_fsync, real_syncfs = os.fsync, fs.syncfs

    def fsync(fd):
        calls["fsync"] += 1
        real_fsync(fd)

    def syncfs(fd):
        calls["syncfs"] += 1
        real_syncfs(fd)
    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(data_path_module, "syncfs", syncfs)
    return calls


def _append_and_wait(dp, logs_and_counts):
    """Appends in one loop iteration, each with a waiter; checks none is answered early."""
    waiters = []
    for plog, n in logs_and_counts:
        for i in range(n):
            plog.append(build_batch([Record(value=b"%d" % i, timestamp=1)]))
            waiters.append(dp.wait_flushed({plog}))
    assert not any(w.answered for w in waiters)  # nothing acknowledged before the sync
    return asyncio.gather(*map(response_of, waiters))


def test_one_fsync_for_all_waiters_of_a_loop_iteration(tmp_path, monkeypatch):
    calls = _count_syncs(monkeypatch)

    async def main():
        dp = _dp(tmp_path)
        a = dp.log("t", 0)
        await _append_and_wait(dp, [(a, 10)])  # ten acks=-1 appends in one iteration
        assert a.recovery_point == 10
        assert calls == {"fsync": 1, "syncfs": 0}
        dp.close()

    asyncio.run(main())


@pytest.mark.skipif(not fs.syncfs_available(), reason="syncfs(2) is Linux-only")
def test_one_syncfs_replaces_the_fsyncs_of_several_logs(tmp_path, monkeypatch):
    calls = _count_syncs(monkeypatch)

    async def main():
        dp = _dp(tmp_path)
        a, b = dp.log("t", 0), dp.log("t", 1)
        await _append_and_wait(dp, [(a, 10), (b, 1)])
        assert (a.recovery_point, b.recovery_point) == (10, 1)
        assert calls == {"fsync": 0, "syncfs": 1}
        assert not a.active_segment.dirty and not b.active_segment.dirty
        dp.close()

    asyncio.run(main())


@pytest.mark.skipif(not fs.syncfs_available(), reason="syncfs(2) is Linux-only")
def test_the_loop_goes_on_during_a_syncfs_and_later_appends_wait_for_the_next_one(tmp_path, monkeypatch):
    entered = [threading.Event(), threading.Event()]
    release = [threading.Event(), threading.Event()]
    threads = []

    def held_syncfs(fd):       # each call waits until the test lets it finish
        n = len(threads)
        threads.append(threading.current_thread().name)
        entered[n].set()
        assert release[n].wait(10)
        fs.syncfs(fd)
    monkeypatch.setattr(data_path_module, "syncfs", held_syncfs)

    async def until(event):
        for _ in range(5000):
            if event.is_set():
                return
            await asyncio.sleep(0.001)     # the loop is free while the sync thread is busy
        raise AssertionError("the sync never started")

    async def main():
        dp = _dp(tmp_path)
        a, b = dp.log("t", 0), dp.log("t", 1)
        first = _append_and_wait(dp, [(a, 2), (b, 1)])
        await until(entered[0])
        second = _append_and_wait(dp, [(a, 1), (b, 1)])     # appended while the first sync runs
        await asyncio.sleep(0.05)
        assert not first.done() and not second.done() and len(threads) == 1   # one sync at a time
        assert (a.recovery_point, b.recovery_point) == (0, 0)
        release[0].set()
        await first
        assert (a.recovery_point, b.recovery_point) == (2, 1)   # what the first sync covered
        assert a.active_segment.dirty and not second.done()     # the rest waits for the second
        await until(entered[1])
        release[1].set()
        await second
        assert (a.recovery_point, b.recovery_point) == (3, 2) and not a.active_segment.dirty
        assert all(name.startswith("kgroup-syncfs") for name in threads)
        dp.close()

    asyncio.run(main())


def test_a_failed_syncfs_falls_back_to_fsync_per_log(tmp_path, monkeypatch, caplog):
    calls = _count_syncs(monkeypatch)

    def broken(fd):
        calls["syncfs"] += 1
        raise OSError(38, "Function not implemented")
    monkeypatch.setattr(data_path_module, "syncfs", broken)
    monkeypatch.setattr(data_path_module, "syncfs_available", lambda: True)

    async def main():
        dp = _dp(tmp_path)
        a, b = dp.log("t", 0), dp.log("t", 1)
        await _append_and_wait(dp, [(a, 3), (b, 2)])
        assert (a.recovery_point, b.recovery_point) == (3, 2)
        assert calls == {"fsync": 2, "syncfs": 1}
        dp.close()

    asyncio.run(main())
    assert "syncfs of" in caplog.text


def test_logs_on_another_filesystem_are_fsynced_one_by_one(tmp_path, monkeypatch):
    calls = _count_syncs(monkeypatch)
    monkeypatch.setattr(data_path_module, "syncfs_available", lambda: True)

    async def main():
        dp = _dp(tmp_path)
        a, b = dp.log("t", 0), dp.log("t", 1)
        dp._device_of[b.directory] = dp._data_device + 1     # as if b's directory were mounted elsewhere
        await _append_and_wait(dp, [(a, 1), (b, 1)])
        assert (a.recovery_point, b.recovery_point) == (1, 1)
        assert calls == {"fsync": 2, "syncfs": 0}           # one log left here: no syncfs for it
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
            await response_of(dp.wait_flushed({a}))
        assert a.recovery_point == 0
        monkeypatch.undo()
        await response_of(dp.wait_flushed({a}))  # the failed data is retried, not forgotten
        assert a.recovery_point == 1
        dp.close()

    asyncio.run(main())


@pytest.mark.parametrize("use_syncfs", [False, True])
def test_a_log_closing_fails_only_its_own_waiters(tmp_path, monkeypatch, use_syncfs):
    """A topic deleted while its appends wait for the group commit fails only its own waiters:
    another topic's acks=-1 produce whose records are durable is acknowledged, a DeleteGroups
    keeps its connection."""
    monkeypatch.setattr(data_path_module, "syncfs_available", lambda: use_syncfs)

    async def main():
        dp = _dp(tmp_path)
        dp.create_partitions("doomed", 1, {})
        a, b, doomed = dp.log("t", 0), dp.log("t", 1), dp.log("doomed", 0)
        waiters = {}
        for name, plog in (("a", a), ("b", b), ("doomed", doomed)):
            plog.append(build_batch([Record(value=name.encode(), timestamp=1)]))
            waiters[name] = dp.wait_flushed({plog})
        doomed.append(build_batch([Record(value=b"x", timestamp=1)]))
        both = dp.wait_flushed({a, doomed})
        dp.delete_partitions("doomed", 1)           # before the round runs
        await asyncio.gather(response_of(waiters["a"]), response_of(waiters["b"]))
        assert (a.recovery_point, b.recovery_point) == (1, 1)
        for w in (waiters["doomed"], both):         # those waiting on the deleted log fail
            with pytest.raises(ValueError, match="is closed"):
                await response_of(w)
        dp.close()

    asyncio.run(main())


@pytest.mark.skipif(not fs.syncfs_available(), reason="syncfs(2) is Linux-only")
def test_the_sync_thread_keeps_one_descriptor_and_close_waits_for_the_sync_in_flight(tmp_path, monkeypatch):
    """The sync thread opens the data directory once (not per sync); close() lets the sync in
    flight finish, then the thread ends and its descriptor is closed."""
    fds, entered, release = [], threading.Event(), threading.Event()

    def recording_syncfs(fd):
        fds.append(fd)
        if len(fds) == 4:           # the fourth waits for the test
            entered.set()
            assert release.wait(10)
        fs.syncfs(fd)
    monkeypatch.setattr(data_path_module, "syncfs", recording_syncfs)

    async def main():
        dp = _dp(tmp_path)
        a, b = dp.log("t", 0), dp.log("t", 1)
        for _ in range(3):
            await _append_and_wait(dp, [(a, 1), (b, 1)])
        assert len(fds) == 3 and len(set(fds)) == 1
        assert os.path.samefile(f"/proc/self/fd/{fds[0]}", tmp_path)
        thread = dp._syncer._thread
        last = _append_and_wait(dp, [(a, 1), (b, 1)])
        for _ in range(5000):
            if entered.is_set():
                break
            await asyncio.sleep(0.001)
        assert entered.is_set()
        threading.Timer(0.1, release.set).start()
        dp.close()                  # waits for the held sync, then stops the thread
        assert release.is_set() and not thread.is_alive()
        assert not os.path.exists(f"/proc/self/fd/{fds[0]}") or not os.path.samefile(
            f"/proc/self/fd/{fds[0]}", tmp_path)
        await asyncio.wait_for(asyncio.gather(last, return_exceptions=True), 10)   # answered or failed

    asyncio.run(main())


@pytest.mark.skipif(not fs.syncfs_available(), reason="syncfs(2) is Linux-only")
def test_what_a_finished_sync_leads_to_joins_the_next_round(tmp_path, monkeypatch):
    """An answer of a finished sync that appends again at once (the transaction coordinator
    writes the markers once the Prepare record is durable, from a loop callback) joins the round
    that gathered during that sync instead of waiting for one more sync after it."""
    entered = [threading.Event() for _ in range(3)]
    release = [threading.Event() for _ in range(3)]
    calls = []

    def held_syncfs(fd):
        n = len(calls)
        calls.append(n)
        entered[n].set()
        assert release[n].wait(10)
        fs.syncfs(fd)
    monkeypatch.setattr(data_path_module, "syncfs", held_syncfs)

    async def until(event):
        for _ in range(5000):
            if event.is_set():
                return
            await asyncio.sleep(0.001)
        raise AssertionError("the sync never started")

    async def main():
        loop = asyncio.get_running_loop()
        dp = _dp(tmp_path)
        a, b = dp.log("t", 0), dp.log("t", 1)
        follow_up = loop.create_future()

        def append_next(_):         # as the marker path: a loop callback appends and waits
            b.append(build_batch([Record(value=b"marker", timestamp=1)]))
            w = dp.wait_flushed({a, b})
            w.listen(lambda p: follow_up.set_result(None) if p.error is None else follow_up.set_exception(p.error))
        a.append(build_batch([Record(value=b"1", timestamp=1)]))
        b.append(build_batch([Record(value=b"1", timestamp=1)]))
        dp.wait_flushed({a, b}).listen(lambda p: loop.call_soon(append_next, p))
        await until(entered[0])
        meanwhile = _append_and_wait(dp, [(a, 1), (b, 1)])      # gathered during the first sync
        release[0].set()
        await until(entered[1])
        release[1].set()
        await asyncio.wait_for(asyncio.gather(meanwhile, follow_up), 10)
        assert len(calls) == 2 and (a.recovery_point, b.recovery_point) == (2, 3)
        release[2].set()
        dp.close()

    asyncio.run(main())
