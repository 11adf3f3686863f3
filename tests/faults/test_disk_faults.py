"""A failed write or fsync on the data directory, injected without touching
the broker's code (an LD_PRELOAD shim compiled here with gcc; a small tmpfs that fills up). As
Kafka: the log directory goes offline and, being the only one, the broker stops (exit code 1)
with "Shutdown broker because all log dirs in ... have failed"; the requests in flight get
Kafka's error codes (KAFKA_STORAGE_ERROR, NOT_COORDINATOR for the group coordinator's writes);
and nothing reported failed is served or returned by OffsetFetch after a restart, while
everything acknowledged is."""
import contextlib
import os
import shutil
import subprocess
import time

import pytest

from kgroup.protocol.errors import ErrorCode
from kgroup.protocol.messages.create_topics import CreateTopicsRequest
from kgroup.protocol.messages.offset_commit import OffsetCommitRequest
from kgroup.protocol.messages.offset_fetch import OffsetFetchRequest
from kgroup.protocol.records import Record, build_batch, decode_records, iter_batches
from tests.broker.test_data_path import fetch_request, produce_request
from tests.harness import BrokerProcess, RawClient

HERE = os.path.dirname(os.path.abspath(__file__))
CT = CreateTopicsRequest.CreatableTopic
OT = OffsetCommitRequest.OffsetCommitRequestTopic
OP = OT.OffsetCommitRequestPartition
FT = OffsetFetchRequest.OffsetFetchRequestTopic


@pytest.fixture(scope="session")
def shim(tmp_path_factory):
    out = tmp_path_factory.mktemp("shim") / "eio_shim.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-o", str(out), os.path.join(HERE, "eio_shim.c"), "-ldl"],
                   check=True)
    return str(out)


def faulty_broker(shim, data_dir, trigger, ops="sync", errno=5):
    return BrokerProcess(data_dir, env={"LD_PRELOAD": shim, "KGROUP_FAULT_DIR": str(data_dir),
                                        "KGROUP_FAULT_TRIGGER": str(trigger), "KGROUP_FAULT_OPS": ops,
                                        "KGROUP_FAULT_ERRNO": str(errno)})


def produce(c, topic, values):
    records = build_batch([Record(value=v, timestamp=int(time.time() * 1000)) for v in values])
    return c.request(produce_request(topic, records), 9).responses[0].partition_responses[0]


def values_in(c, topic):
    values, offset = [], 0
    while True:
        pd = c.request(fetch_request(topic, offset), 12).responses[0].partitions[0]
        assert pd.error_code == 0
        got = [r for _, h, b in iter_batches(memoryview(pd.records or b"")) for r in decode_records(b, h)]
        if not got:
            return values
        values += [r.value for r in got]
        offset = got[-1].offset + 1


def commit(c, group, topic, offset):
    r = c.request(OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="",
                                      retention_time_ms=-1, topics=[OT(name=topic, partitions=[
                                          OP(partition_index=0, committed_offset=offset, committed_leader_epoch=-1,
                                             committed_metadata="")])]), 8)
    return r.topics[0].partitions[0].error_code


def committed(c, group, topic):
    r = c.request(OffsetFetchRequest(group_id=group, topics=[FT(name=topic, partition_indexes=[0])]), 7)
    assert r.error_code == 0
    return r.topics[0].partitions[0].committed_offset


def set_up(b):
    c = RawClient(b.port)
    r = c.request(CreateTopicsRequest(topics=[CT(name="t", num_partitions=1, replication_factor=1)]), 7)
    assert r.topics[0].error_code == 0
    assert produce(c, "t", [b"a1", b"a2"]).error_code == 0
    assert commit(c, "g", "t", 5) == 0
    return c


def assert_stopped_for_the_log_dir(b, data_dir):
    assert b.proc.wait(20) == 1
    log = b.log_text()
    assert f"Shutdown broker because all log dirs in {data_dir} have failed" in log, log[-3000:]
    assert "Traceback" not in log, log[-3000:]


def assert_only_acknowledged_after_restart(tmp_path, data_dir):
    b = BrokerProcess(data_dir).start()
    try:
        c = RawClient(b.port)
        assert values_in(c, "t") == [b"a1", b"a2"]
        assert committed(c, "g", "t") == 5
        assert produce(c, "t", [b"c"]).base_offset == 2     # and the log goes on from there
    finally:
        b.stop()


@pytest.mark.parametrize("ops", ["sync", "write"])
def test_a_failed_fsync_or_write_under_produce(tmp_path, shim, ops):
    data_dir, trigger = tmp_path / "d", tmp_path / "fail-now"
    b = faulty_broker(shim, data_dir, trigger, ops).start()
    try:
        c = set_up(b)
        trigger.touch()
        r = produce(c, "t", [b"b-never-durable"])
        assert r.error_code == ErrorCode.KAFKA_STORAGE_ERROR
        assert_stopped_for_the_log_dir(b, data_dir)
    finally:
        b.stop()
    trigger.unlink()
    assert_only_acknowledged_after_restart(tmp_path, data_dir)


def test_a_failed_fsync_under_offset_commit(tmp_path, shim):
    """The commit is answered NOT_COORDINATOR (its connection stays open) and OffsetFetch never
    returns it."""
    data_dir, trigger = tmp_path / "d", tmp_path / "fail-now"
    b = faulty_broker(shim, data_dir, trigger, "sync").start()
    try:
        c = set_up(b)
        trigger.touch()
        assert commit(c, "g", "t", 9) == ErrorCode.NOT_COORDINATOR
        assert_stopped_for_the_log_dir(b, data_dir)
    finally:
        b.stop()
    trigger.unlink()
    assert_only_acknowledged_after_restart(tmp_path, data_dir)


@contextlib.contextmanager
def small_filesystem(tmp_path, shim, kind):
    """A 3 MiB tmpfs (as root, as in CI) or, for other users, the shim failing writes with
    ENOSPC once a trigger is set: yields (data_dir, fill, broker factory, free)."""
    where = tmp_path / "small"
    where.mkdir()
    if kind == "tmpfs" and os.geteuid() == 0:
        data_dir = where / "d"        # the mount point itself: the broker's log stays outside
        data_dir.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(data_dir)], check=True)
        try:
            yield data_dir, lambda: None, lambda: BrokerProcess(data_dir), lambda: None
        finally:
            subprocess.run(["umount", str(data_dir)], check=True)
    else:
        data_dir, trigger = where / "d", where / "full"
        yield (data_dir, trigger.touch, lambda: faulty_broker(shim, data_dir, trigger, "write", errno=28),
               trigger.unlink)


@pytest.mark.parametrize("kind", ["tmpfs", "enospc-shim"])
def test_a_filesystem_that_fills_up(tmp_path, shim, kind):
    with small_filesystem(tmp_path, shim, kind) as (data_dir, fill, make_broker, free):
        b = make_broker().start()
        try:
            c = set_up(b)
            fill()
            acknowledged, failed = [], None
            for i in range(200):            # 100 KB a time until the disk is full
                value = b"%06d" % i + b"x" * 100_000
                r = produce(c, "t", [value])
                if r.error_code:
                    failed = r.error_code
                    break
                acknowledged.append(value)
            assert failed == ErrorCode.KAFKA_STORAGE_ERROR
            assert_stopped_for_the_log_dir(b, data_dir)
        finally:
            b.stop()
        free()
        if kind == "tmpfs" and os.geteuid() == 0:       # the full tmpfs: restart on a copy of it with room
            shutil.copytree(data_dir, tmp_path / "copy")
            data_dir = tmp_path / "copy"
        b = BrokerProcess(data_dir).start()
        try:
            c = RawClient(b.port)
            assert values_in(c, "t") == [b"a1", b"a2"] + acknowledged
            assert committed(c, "g", "t") == 5
        finally:
            b.stop()
