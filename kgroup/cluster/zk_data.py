"""Kafka's ZooKeeper layout and JSON (Kafka 3.9's kafka.zk.ZkData), so that zkCli and Kafka's own
ZooKeeper tools see a familiar tree:

    /cluster/id                                   {"version":"1","id":"<cluster id>"}
    /controller                                   ephemeral {"version":2,"brokerid":1,"timestamp":"..","kraftControllerEpoch":-1}
    /controller_epoch                             "3"
    /brokers/ids/<id>                             ephemeral broker registration (version 5: endpoints, rack, features)
    /brokers/topics/<topic>                       {"version":3,"partitions":{"0":[1,2,3]},"topic_id":"..",
                                                   "adding_replicas":{},"removing_replicas":{}}
    /brokers/topics/<topic>/partitions/<p>/state  {"version":1,"leader":1,"leader_epoch":0,"isr":[1,2,3],
                                                   "controller_epoch":3}
    /config/topics/<topic>                        {"version":1,"config":{...}}
    /config/changes/config_change_<seq>           {"version":2,"entity_path":"topics/<topic>"}
    /admin/reassign_partitions                    {"version":1,"partitions":[{"topic":..,"partition":..,"replicas":[..]}]}
    /admin/delete_topics/<topic>                  a topic marked for deletion
    /isr_change_notification/isr_change_<seq>     {"version":1,"partitions":[{"topic":..,"partition":..}]}
    /latest_producer_id_block                     {"version":1,"broker":2,"block_start":"1000","block_end":"1999"}

and one kgroup node, for the controlled shutdown that Kafka asks for over its ControlledShutdown
RPC (docs/cluster.md says why ZooKeeper carries it here):

    /kgroup/controlled_shutdown/<id>              ephemeral {"version":1,"broker_epoch":..,"done":false}

Pure functions: bytes in, values out; no kazoo."""
from __future__ import annotations

import base64
import json
import time
from dataclasses import dataclass

CLUSTER_ID = "/cluster/id"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
BROKER_IDS = "/brokers/ids"
TOPICS = "/brokers/topics"
CONFIG_TOPICS = "/config/topics"
CONFIG_CHANGES = "/config/changes"
DELETE_TOPICS = "/admin/delete_topics"
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
CONTROLLED_SHUTDOWN = "/kgroup/controlled_shutdown"
# the persistent paths Kafka's KafkaZkClient.createTopLevelPaths creates at start-up
PERSISTENT_PATHS = ("/consumers", BROKER_IDS, TOPICS, CONFIG_CHANGES, CONFIG_TOPICS, "/config/clients",
                    "/config/users", "/config/brokers", "/config/ips", DELETE_TOPICS, "/brokers/seqid", ISR_CHANGE_NOTIFICATION, "/latest_producer_id_block",  # PRODUCER_ID_BLOCK
                    "/log_dir_event_notification", CONTROLLED_SHUTDOWN)

NO_LEADER = -1          # LeaderAndIsr.NoLeader
INITIAL_LEADER_EPOCH = 0


def encode_json(doc) -> bytes:
    """Json.encodeAsBytes: the compact JSON every znode of Kafka's layout holds."""
    return json.dumps(doc, separators=(",", ":")).encode()


def decode_json(data: bytes | None):
    if not data:
        return None
    return json.loads(data.decode())


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{TOPICS}/{topic}/partitions"


def partition_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}"


def partition_state_path(topic: str, partition: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{partition}/state"


def topic_config_path(topic: str) -> str:
    return f"{CONFIG_TOPICS}/{topic}"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{topic}"


def controlled_shutdown_path(broker_id: int) -> str:
    return f"{CONTROLLED_SHUTDOWN}/{broker_id}"


# -- uuids as Kafka prints them (Uuid.toString: url-safe base64, no padding) ----------------------
def uuid_to_str(b: bytes) -> str:
    return base64.urlsafe_b64encode(b).decode().rstrip("=")


def uuid_from_str(s: str) -> bytes:
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


# -- /cluster/id -------------------------------------------------------------------------------
def encode_cluster_id(cluster_id: str) -> bytes:
    return encode_json({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    return decode_json(data)["id"]


# -- /controller, /controller_epoch --------------------------------------------------------------
def encode_controller(broker_id: int, timestamp_ms: int | None = None) -> bytes:
    ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    return encode_json({"version": 2, "brokerid": broker_id, "timestamp": str(ts), "kraftControllerEpoch": -1})


def decode_controller(data: bytes | None) -> int | None:
    doc = decode_json(data)
    return None if doc is None else int(doc["brokerid"])


def encode_controller_epoch(epoch: int) -> bytes:
    return str(epoch).encode()


def decode_controller_epoch(data: bytes) -> int:
    return int(data.decode())


# -- /brokers/ids/<id> ---------------------------------------------------------------------------
@dataclass(frozen=True)
class EndPoint:
    listener: str
    host: str
    port: int
    security_protocol: str

    @property
    def connection_string(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener}://{host}:{self.port}"


@dataclass(frozen=True)
class BrokerRegistration:
    broker_id: int
    endpoints: tuple[EndPoint, ...]
    rack: str | None = None
    czxid: int = -1         # the znode's creation zxid: Kafka's broker epoch

    def endpoint(self, listener: str | None = None) -> EndPoint | None:
        if listener is None:
            return self.endpoints[0] if self.endpoints else None
        for e in self.endpoints:
            if e.listener == listener:
                return e
        return None


def encode_broker(endpoints, rack: str | None, features: dict | None = None,
                  timestamp_ms: int | None = None) -> bytes:
    """BrokerIdZNode.encode at version 5: top-level host/port of the first PLAINTEXT endpoint
    (for old clients; "" and -1 without one), endpoints, the listener protocol map, features."""
    plain = next((e for e in endpoints if e.security_protocol == "PLAINTEXT"), None)
    doc = {"version": 5, "host": plain.host if plain else None, "port": plain.port if plain else -1,
           "endpoints": [e.connection_string for e in endpoints], "jmx_port": -1,
           "timestamp": str(int(time.time() * 1000) if timestamp_ms is None else timestamp_ms),
           "listener_security_protocol_map": {e.listener: e.security_protocol for e in endpoints},
           "features": features or {}}
    if rack is not None:
        doc["rack"] = rack
    return encode_json(doc)


def decode_broker(broker_id: int, data: bytes, czxid: int = -1) -> BrokerRegistration:
    doc = decode_json(data)
    pmap = doc.get("listener_security_protocol_map") or {}
    endpoints = []
    for s in doc.get("endpoints") or []:
        listener, rest = s.split("://", 1)
        host, port = rest.rsplit(":", 1)
        endpoints.append(EndPoint(listener, host.strip("[]"), int(port), pmap.get(listener, listener)))
    if not endpoints and doc.get("host"):
        endpoints.append(EndPoint("PLAINTEXT", doc["host"], int(doc["port"]), "PLAINTEXT"))
    return BrokerRegistration(broker_id, tuple(endpoints), doc.get("rack"), czxid)


# -- /brokers/topics/<topic> -----------------------------------------------------------------------
def encode_topic(assignment: dict[int, list[int]], topic_id: bytes | None,
                 adding: dict[int, list[int]] | None = None, removing: dict[int, list[int]] | None = None) -> bytes:
    """TopicZNode.encode: RS per partition, and AR / RR of the partitions being reassigned."""
    doc = {"version": 3, "partitions": {str(p): list(r) for p, r in sorted(assignment.items())},
           "adding_replicas": {str(p): list(r) for p, r in sorted((adding or {}).items()) if r},
           "removing_replicas": {str(p): list(r) for p, r in sorted((removing or {}).items()) if r}}
    if topic_id is not None:
        doc["topic_id"] = uuid_to_str(topic_id)
    return encode_json(doc)


def decode_topic(data: bytes) -> tuple[dict[int, tuple[int, ...]], bytes | None]:
    """(partition -> replicas, topic id or None)."""
    doc = decode_json(data) or {}
    assignment = {int(p): tuple(r) for p, r in (doc.get("partitions") or {}).items()}
    tid = doc.get("topic_id")
    return assignment, (uuid_from_str(tid) if tid else None)


def decode_topic_reassignment(data: bytes) -> tuple[dict[int, tuple[int, ...]], dict[int, tuple[int, ...]]]:
    """(partition -> adding replicas, partition -> removing replicas) of a topic znode."""
    doc = decode_json(data) or {}
    return ({int(p): tuple(r) for p, r in (doc.get("adding_replicas") or {}).items() if r},
            {int(p): tuple(r) for p, r in (doc.get("removing_replicas") or {}).items() if r})


# -- /admin/reassign_partitions (ReassignPartitionsZNode: reassignments written to ZooKeeper) --------
REASSIGN_PARTITIONS = "/admin/reassign_partitions"


def encode_reassign_partitions(reassignments: dict[tuple[str, int], list[int]]) -> bytes:
    return encode_json({"version": 1, "partitions": [{"topic": t, "partition": p, "replicas": list(r)}
                                                for (t, p), r in reassignments.items()]})


def decode_reassign_partitions(data: bytes | None) -> dict[tuple[str, int], tuple[int, ...]]:
    doc = decode_json(data) or {}
    return {(e["topic"], int(e["partition"])): tuple(e["replicas"]) for e in doc.get("partitions") or []}


# -- /brokers/topics/<topic>/partitions/<p>/state ----------------------------------------------------
@dataclass(frozen=True)
class LeaderAndIsr:
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    zk_version: int = -1        # the state znode's version: the partition epoch

    def new_leader_and_isr(self, leader: int, isr) -> "LeaderAndIsr":
        """Kafka's LeaderAndIsr.newLeaderAndIsr: a controller's change bumps the leader epoch."""
        return LeaderAndIsr(leader, self.leader_epoch + 1, tuple(isr), self.controller_epoch, self.zk_version)


def encode_partition_state(state: LeaderAndIsr, controller_epoch: int) -> bytes:
    return encode_json({"version": 1, "leader": state.leader, "leader_epoch": state.leader_epoch,
                   "controller_epoch": controller_epoch, "isr": list(state.isr)})


def decode_partition_state(data: bytes | None, zk_version: int = -1) -> LeaderAndIsr | None:
    doc = decode_json(data)
    if doc is None:
        return None
    return LeaderAndIsr(int(doc["leader"]), int(doc["leader_epoch"]), tuple(doc["isr"]),
                        int(doc["controller_epoch"]), zk_version)


# -- /config/topics/<topic>, /config/changes ---------------------------------------------------------
def encode_topic_config(configs: dict[str, str]) -> bytes:
    return encode_json({"version": 1, "config": dict(configs)})


def decode_topic_config(data: bytes | None) -> dict[str, str]:
    doc = decode_json(data) or {}
    return dict(doc.get("config") or {})


def encode_config_change(entity_path: str) -> bytes:
    return encode_json({"version": 2, "entity_path": entity_path})


# -- /isr_change_notification ---------------------------------------------------------------------
def encode_isr_change(partitions) -> bytes:
    return encode_json({"version": 1, "partitions": [{"topic": t, "partition": p} for t, p in partitions]})


# -- /kgroup/controlled_shutdown/<id> ---------------------------------------------------------------
def encode_controlled_shutdown(broker_epoch: int, done: bool = False, remaining: int = 0) -> bytes:
    return encode_json({"version": 1, "broker_epoch": broker_epoch, "done": done, "partitions_remaining": remaining})


def decode_controlled_shutdown(data: bytes | None) -> dict:
    return decode_json(data) or {}


# -- /latest_producer_id_block ---------------------------------------------------------------------
PRODUCER_ID_BLOCK = "/latest_producer_id_block"


def encode_producer_id_block(broker_id: int, first: int, last: int) -> bytes:
    return encode_json({"version": 1, "broker": broker_id, "block_start": str(first), "block_end": str(last)})


def decode_producer_id_block(data: bytes | None) -> tuple[int, int, int] | None:
    """(broker, first producer id, last producer id), or None for the empty znode."""
    doc = decode_json(data)
    if doc is None:
        return None
    return int(doc["broker"]), int(doc["block_start"]), int(doc["block_end"])
