"""Kafka's controller cap on what one request may create (QuorumController
MAX_RECORDS_PER_USER_OP): the records a CreateTopics request would make (CreatePartitions, once served, is
checked the same way: one PartitionRecord per new partition)
are counted before anything is created, and a request over the cap fails as a whole."""
from ...protocol.errors import ErrorCode, KafkaError

MAX_RECORDS_PER_USER_OP = 10_000
# EventHandlerExceptionInfo's answer to a BoundedListTooLongException
TOO_LARGE = "Unable to perform excessively large batch operation."


def check_create_topics_records(broker, topics) -> None:
    """Raise POLICY_VIOLATION if creating ``topics`` would take more than the controller's cap of
    records: per topic one TopicRecord, one PartitionRecord per partition and one ConfigRecord
    per config (ReplicationControlManager.createTopics gathers them in one bounded list)."""
    total = 0
    default_partitions = broker.config["num.partitions"]
    for t in topics:
        if t.assignments:
            partitions = len(t.assignments)
        elif t.num_partitions == -1:
            partitions = default_partitions
        else:
            partitions = max(t.num_partitions, 0)
        total += 1 + partitions + len(t.configs)
        if total > MAX_RECORDS_PER_USER_OP:
            raise KafkaError(ErrorCode.POLICY_VIOLATION, TOO_LARGE)

