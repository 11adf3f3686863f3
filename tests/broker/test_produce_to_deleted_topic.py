"""A produce whose partition is deleted while its append waits for the group-commit fsync, in
process and deterministic (the delete-in-flight probe of tests/faults meets it a few rounds in
forty): the flush of the closed log is no disk fault (nothing logged as an error, no log
directory offline) and the produce is answered UNKNOWN_TOPIC_OR_PARTITION, as Kafka answers a
partition it no longer hosts, never KAFKA_STORAGE_ERROR."""
import asyncio
import logging

import pytest

from kgroup.broker.handlers.produce import _after_flush
from kgroup.protocol.errors import ErrorCode
from kgroup.protocol.messages.produce import ProduceResponse
from kgroup.protocol.records import Record, build_batch
from kgroup.storage.errors import LogClosedError
from tests.broker.support import response_of
from tests.broker.test_group_commit import _dp

TR = ProduceResponse.TopicProduceResponse
PR = TR.PartitionProduceResponse


def test_a_closed_log_raises_log_closed_error(tmp_path):
    dp = _dp(tmp_path)
    plog = dp.log("t", 0)
    dp.delete_partitions("t", 2)
    for call in (plog.flush, plog.sync_mark, lambda: plog.append(build_batch([Record(value=b"x", timestamp=1)]))):
        with pytest.raises(LogClosedError) as raised:
            call()
        assert raised.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    dp.close()


def test_produce_waiting_for_the_fsync_of_a_deleted_partition(tmp_path, caplog):
    offline = []

    async def main():
        dp = _dp(tmp_path)
        dp.on_io_error = lambda *a: offline.append(a)
        doomed, kept = dp.log("t", 0), dp.log("t", 1)
        doomed.append(build_batch([Record(value=b"doomed", timestamp=1)]))
        kept.append(build_batch([Record(value=b"kept", timestamp=1)]))
        flushed = dp.wait_flushed({doomed})
        other = dp.wait_flushed({kept})
        resp = ProduceResponse(responses=[TR(name="t", partition_responses=[PR(index=0, error_code=0, base_offset=0)])])
        answered = _after_flush(flushed, resp)
        dp.delete_partitions("t", 1)         # partition 0 deleted before the round's fsync
        assert (await response_of(answered)).responses[0].partition_responses[0].error_code == \
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert isinstance(flushed.error, LogClosedError)
        await response_of(other)              # the other partition's waiter is answered
        assert kept.recovery_point == 1
        dp.close()

    with caplog.at_level(logging.DEBUG, logger="kgroup"):
        asyncio.run(main())
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
    assert offline == []
