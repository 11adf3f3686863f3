"""Share-partitions (KIP-932) as a deterministic core: records acquired, acknowledged, released and
archived per share group and partition (Kafka's SharePartition), and share sessions (Kafka's
ShareSessionCache). The broker glue is kgroup/broker/share_partition_manager.py."""
