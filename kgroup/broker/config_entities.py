"""The config entities besides topics, behind one interface with two backends: dynamic broker
configs (resource name "" for the cluster default, or a node id), group configs and client-metrics
subscriptions. On a single node the backend is the files they have always been kept in (the topic
registry's ``kgroup-topics.json``, ``kgroup-client-metrics.json``); in a cluster it is ZooKeeper's
``/config/brokers``, ``/config/groups`` and ``/config/client-metrics`` with change notifications,
as Kafka 3.9's AdminZkClient.changeConfigs (kgroup/cluster/zk_config_store.py). AlterConfigs and
IncrementalAlterConfigs validate, then ``write`` the resource's complete new set; the backend makes
it durable and then ``install``s it, as every other broker does when it is told."""
from __future__ import annotations

BROKERS, GROUPS, CLIENT_METRICS = "brokers", "groups", "client-metrics"     # Kafka's ConfigType names


class LocalConfigBackend:
    def write(self, entities: "ConfigEntities", entity_type: str, name: str, configs: dict[str, str]) -> None:
        entities.install(entity_type, name, configs)


class ConfigEntities:
    def __init__(self, broker):
        self.broker = broker
        self.backend = LocalConfigBackend()

    def write(self, entity_type: str, name: str, configs: dict[str, str]) -> None:
        self.backend.write(self, entity_type, name, {k: v for k, v in configs.items() if v is not None})

    def install(self, entity_type: str, name: str, configs: dict[str, str]) -> None:
        """Hold ``configs`` as the entity's set and apply them (kept on disk as on a single node)."""
        b = self.broker
        if entity_type == BROKERS:
            if name not in ("", str(b.config.node_id)):
                return                  # another broker's own configs
            b.metadata.set_broker_configs(name, configs)
            from .admin import apply_dynamic_broker_configs
            apply_dynamic_broker_configs(b)
        elif entity_type == GROUPS:
            b.metadata.set_group_configs(name, configs)
            if getattr(b, "group_coordinator", None) is not None:
                b.group_coordinator.on_group_configs_changed(name)
        elif entity_type == CLIENT_METRICS:
            if configs or name in b.metadata.client_metrics.subscriptions:
                b.metadata.client_metrics.set_configs(name, configs)

    def replace_all(self, entity_type: str, by_name: dict[str, dict[str, str]]) -> None:
        """The entities of a type are exactly ``by_name`` (a cluster's at start-up)."""
        b = self.broker
        current = {BROKERS: b.metadata.broker_configs, GROUPS: b.metadata.group_configs,
                   CLIENT_METRICS: b.metadata.client_metrics.subscriptions}[entity_type]
        for name in set(current) - set(by_name):
            self.install(entity_type, name, {})
        for name, configs in by_name.items():
            if current.get(name, {}) != configs:
                self.install(entity_type, name, configs)
