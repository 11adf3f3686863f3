"""Producer ids unique across the cluster: Kafka 3.9's ZkProducerIdManager. Each broker claims
blocks of ids from /latest_producer_id_block (the last block claimed, by whom) with a
conditional write, so no two brokers ever hand out the same id, and a restarted broker claims a
new block rather than reusing its last one. Same interface as the single node's
ProducerIdManager (``allocate()``); a claim is one ZooKeeper round trip per block."""
from __future__ import annotations

from kazoo.exceptions import BadVersionError, NoNodeError, NodeExistsError

from . import zk_data as zd

BLOCK_SIZE = 1000       # ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE


class ZkProducerIdManager:
    def __init__(self, zk, broker_id: int, block_size: int = BLOCK_SIZE):
        self.zk = zk            # a KafkaZkClient
        self.broker_id = broker_id
        self.block_size = block_size
        self.next_id = 0
        self.block_end = 0      # exclusive

    def claim_block(self) -> tuple[int, int]:
        """getNewProducerIdBlock: the block after the last one claimed, written conditionally
        on the znode's version (another broker's claim meanwhile: read again)."""
        z = self.zk.zk
        while True:
            try:
                data, stat = z.get(zd.PRODUCER_ID_BLOCK)
            except NoNodeError:
                try:
                    z.create(zd.PRODUCER_ID_BLOCK, b"", makepath=True)
                except NodeExistsError:
                    pass
                continue
            last = zd.decode_producer_id_block(data)
            first = 0 if last is None else last[2] + 1
            end = first + self.block_size - 1
            try:
                z.set(zd.PRODUCER_ID_BLOCK, zd.encode_producer_id_block(self.broker_id, first, end),
                      version=stat.version)
            except BadVersionError:
                continue
            return first, end

    def allocate(self) -> int:
        if self.next_id >= self.block_end:
            first, last = self.claim_block()
            self.next_id, self.block_end = first, last + 1
        pid = self.next_id
        self.next_id += 1
        return pid
