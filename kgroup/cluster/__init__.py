"""The kgroup cluster: several brokers agreeing on metadata through ZooKeeper (Kafka 3.9's ZK mode)."""
