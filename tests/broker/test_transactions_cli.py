"""``kgroup transactions`` as kafka-transactions.sh: list (with KIP-1152's pattern), describe, and
find-hanging / abort --start-offset on a transaction its coordinator never knew (written with
transaction verification off, the way a hanging transaction arises), which DescribeProducers
finds and WriteTxnMarkers aborts."""
import time

from kgroup.protocol.messages.list_offsets import ListOffsetsRequest
from kgroup.protocol.messages.produce import ProduceRequest
from kgroup.protocol.records import Record, build_batch
from tests.broker.test_cli import kgroup
from tests.broker.test_topics import create
from tests.harness import BrokerProcess, RawClient

TPD = ProduceRequest.TopicProduceData


def _lso(c, topic):
    r = c.request(ListOffsetsRequest(replica_id=-1, isolation_level=1, topics=[ListOffsetsRequest.ListOffsetsTopic(
        name=topic, partitions=[ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1)])]), 7)
    return r.topics[0].partitions[0].offset


def test_transactions_commands(tmp_path):
    from kgroup.client.sync import KafkaProducer
    b = BrokerProcess(tmp_path / "d", ["transaction.partition.verification.enable=false"]).start()
    try:
        bs = b.bootstrap
        c = RawClient(b.port)
        create(c, "ht", 1)
        p = KafkaProducer(bootstrap_servers=bs, transactional_id="app-1")
        try:
            p.init_transactions()
            p.begin_transaction()
            p.send("ht", b"in-a-transaction", partition=0)
            p.flush()
            r = kgroup("transactions", "--bootstrap-server", bs, "list")
            assert r.returncode == 0, r.stderr
            lines = r.stdout.splitlines()
            assert lines[0].split() == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
            assert [line.split()[0::3] for line in lines[1:]] == [["app-1", "Ongoing"]]
            r = kgroup("transactions", "--bootstrap-server", bs, "list", "--transactional-id-pattern", "other.*")
            assert r.stdout.splitlines()[1:] == []
            r = kgroup("transactions", "--bootstrap-server", bs, "describe", "--transactional-id", "app-1")
            head, row = [line.split("\t") for line in r.stdout.splitlines()]
            assert [h.strip() for h in head][:5] == ["CoordinatorId", "TransactionalId", "ProducerId",
                                                     "ProducerEpoch", "TransactionState"]
            assert row[1].strip() == "app-1" and row[4].strip() == "Ongoing" and row[8].strip() == "ht-0"
            p.commit_transaction()
        finally:
            p.close()
        # a transaction no coordinator knows: producer 4242, written an hour ago
        old = int(time.time() * 1000) - 3600_000
        batch = build_batch([Record(value=b"lost", timestamp=old)], producer_id=4242, producer_epoch=0,
                            base_sequence=0, is_transactional=True)
        resp = c.request(ProduceRequest(transactional_id="ghost", acks=-1, timeout_ms=5000, topic_data=[
            TPD(name="ht", partition_data=[TPD.PartitionProduceData(index=0, records=batch)])]), 9)
        start = resp.responses[0].partition_responses[0].base_offset
        assert start >= 0 and _lso(c, "ht") == start
        r = kgroup("transactions", "--bootstrap-server", bs, "find-hanging", "--topic", "ht")
        assert r.returncode == 0, r.stderr
        rows = [line.split() for line in r.stdout.splitlines()]
        assert rows[0] == ["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
                           "LastTimestamp", "Duration(min)"]
        assert [row[:6] for row in rows[1:]] == [["ht", "0", "4242", "0", "-1", str(start)]]
        assert int(rows[1][7]) >= 59
        r = kgroup("transactions", "--bootstrap-server", bs, "find-hanging")
        assert r.returncode == 1 and "requires either --topic or --broker-id" in r.stderr
        r = kgroup("transactions", "--bootstrap-server", bs, "abort", "--topic", "ht", "--partition", "0",
                   "--start-offset", str(start + 50))
        assert r.returncode == 1 and "Could not find any open transactions starting at offset" in r.stderr
        r = kgroup("transactions", "--bootstrap-server", bs, "abort", "--topic", "ht", "--partition", "0",
                   "--start-offset", str(start))
        assert r.returncode == 0, r.stderr
        assert _lso(c, "ht") == start + 2               # the ABORT marker ends it
        r = kgroup("transactions", "--bootstrap-server", bs, "find-hanging", "--broker-id", "1")
        assert r.returncode == 0 and r.stdout.splitlines()[1:] == []
    finally:
        b.stop()
