"""kgroup's own Kafka client: asyncio ``Consumer`` / ``ShareConsumer`` / ``Producer`` / ``Admin``, their
blocking facades (``kgroup.client.sync``), the sans-IO group membership machine and the assignors.

Imports are lazy so ``kgroup.client.assignors`` (and the sans-IO modules) load without asyncio."""

_EXPORTS = {
    "Consumer": ".consumer", "Producer": ".producer", "Admin": ".admin", "NewTopic": ".admin",
    "KafkaConsumer": ".sync", "KafkaProducer": ".sync", "KafkaAdmin": ".sync",
    "ShareConsumer": ".share_consumer", "KafkaShareConsumer": ".sync", "AcknowledgeType": ".types",
    "ConsumerRebalanceListener": ".types", "ConsumerRecord": ".types", "OffsetAndMetadata": ".types",
    "RecordMetadata": ".types", "TopicPartition": ".assignors",
    "ConsumerGroupMetadata": ".transactions", "ProducerFencedError": ".transactions",
    "TransactionAbortableError": ".transactions",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(name)
    import importlib
    return getattr(importlib.import_module(module, __name__), name)
