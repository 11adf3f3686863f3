"""Several kgroup brokers as one Kafka cluster, with cluster metadata in ZooKeeper as Kafka 3.9's
ZooKeeper mode keeps it (docs/cluster.md): the znode layout (zk_data), KafkaZkClient over kazoo
(zk_client), replica placement (replica_placement), the controller (controller), the broker's
view of the cluster (metadata_cache) and the broker's membership (zk_broker)."""
