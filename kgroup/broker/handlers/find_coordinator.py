"""FindCoordinator (10) v0-6: this node coordinates every group (it owns every
``__consumer_offsets`` partition); the topic is created on first use. Loading errors come from
the group APIs, as in Kafka. Transactional ids (key type 1): this node too, ``__transaction_state``
created on first use. Batched keys from v4.

In a cluster (kgroup/cluster/): the leader of the key's partition of the coordinator topic, from
the metadata cache; COORDINATOR_NOT_AVAILABLE while it has none, or while the topic is being
created (in ZooKeeper, with its replication factor capped by the live brokers), as Kafka answers.

Share keys (type 2, v6+, "groupId:topicId:partition": brokers looking for the share coordinator
of a share-partition's state): the leader of the owning ``__share_group_state`` partition in a
cluster, this node on one; CLUSTER_ACTION on the cluster; INVALID_REQUEST below v6 or for a
malformed key (KafkaApis.getCoordinator, SharePartitionKey.validate)."""
import base64
import binascii

from ...protocol.errors import ErrorCode
from ...protocol.messages.find_coordinator import FindCoordinatorResponse
from ..authorization import CLUSTER_ACTION, CLUSTER_NAME, DESCRIBE, RT_CLUSTER, RT_GROUP, RT_TRANSACTIONAL_ID, allowed

Coordinator = FindCoordinatorResponse.Coordinator
GROUP, TRANSACTION, SHARE = 0, 1, 2


def share_partition_key(key: str):
    """(group id, topic id bytes, partition) of a share coordinator key, None when malformed
    (parsed from the right: the group id may hold colons)."""
    tokens = (key or "").split(":")
    if len(tokens) < 3 or not ":".join(tokens[:-2]).strip():
        return None
    try:
        topic_id = base64.urlsafe_b64decode(tokens[-2] + "=" * (-len(tokens[-2]) % 4))
        partition = int(tokens[-1])
    except (ValueError, binascii.Error):
        return None
    if len(topic_id) != 16:
        return None
    return ":".join(tokens[:-2]), topic_id, partition


def handle(broker, ctx, req, version):
    node = broker.config.node_id
    host, port = broker.advertised_listener(ctx.listener_name)
    keys = req.coordinator_keys if version >= 4 else [req.key]
    if req.key_type == SHARE:
        return _share(broker, ctx, version, keys)
    if broker.cluster is not None and req.key_type in (GROUP, TRANSACTION):
        return _cluster(broker, ctx, req, version, keys)
    if req.key_type == GROUP:
        broker.group_coordinator.ensure_offsets_topic()
        error, message = ErrorCode.NONE, None
    elif req.key_type == TRANSACTION:
        broker.transaction_coordinator.ensure_topic()
        error, message = ErrorCode.NONE, None
    else:
        error, message = ErrorCode.INVALID_REQUEST, f"Unknown key type {req.key_type}"
    found = error == ErrorCode.NONE
    if broker.authorizer is not None and found:   # KafkaApis: DESCRIBE on the group / transactional id
        rt, code = ((RT_GROUP, ErrorCode.GROUP_AUTHORIZATION_FAILED) if req.key_type == GROUP else
                    (RT_TRANSACTIONAL_ID, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
        denied = {k for k in keys if not allowed(broker, ctx, DESCRIBE, rt, k)}
        if denied:
            if version < 4:
                return FindCoordinatorResponse(throttle_time_ms=0, error_code=code, error_message=None,
                                               node_id=-1, host="", port=-1)
            return FindCoordinatorResponse(throttle_time_ms=0, coordinators=[
                Coordinator(key=k, node_id=-1, host="", port=-1, error_code=code, error_message=None) if k in denied
                else Coordinator(key=k, node_id=node, host=host, port=port, error_code=0, error_message=None)
                for k in keys])
    if version >= 4:
        return FindCoordinatorResponse(throttle_time_ms=0, coordinators=[
            Coordinator(key=k, node_id=node if found else -1, host=host if found else "",
                        port=port if found else -1, error_code=error, error_message=message) for k in keys])
    return FindCoordinatorResponse(throttle_time_ms=0, error_code=error, error_message=message,
                                   node_id=node if found else -1, host=host if found else "",
                                   port=port if found else -1)


def _cluster(broker, ctx, req, version, keys):
    runtime = broker.group_coordinator if req.key_type == GROUP else broker.transaction_coordinator
    if req.key_type == GROUP:
        runtime.ensure_offsets_topic()
    else:
        runtime.ensure_topic()
    cache = broker.cluster.cache
    rt, denied_code = ((RT_GROUP, ErrorCode.GROUP_AUTHORIZATION_FAILED) if req.key_type == GROUP else
                       (RT_TRANSACTIONAL_ID, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
    out = []
    for k in keys:
        if broker.authorizer is not None and not allowed(broker, ctx, DESCRIBE, rt, k):
            out.append((k, -1, "", -1, denied_code, None))
            continue
        endpoint = None
        leader = None
        if cache.is_ready(runtime.topic):
            leader = cache.leader(runtime.topic, runtime.shard_for(k))
            if leader is not None:
                endpoint = cache.endpoint(leader, ctx.listener_name)
        if endpoint is None:
            out.append((k, -1, "", -1, ErrorCode.COORDINATOR_NOT_AVAILABLE, None))
        else:
            out.append((k, leader, endpoint[0], endpoint[1], ErrorCode.NONE, None))
    if version >= 4:
        return FindCoordinatorResponse(throttle_time_ms=0, coordinators=[
            Coordinator(key=k, node_id=n, host=h, port=p, error_code=e, error_message=m) for k, n, h, p, e, m in out])
    _k, n, h, p, e, m = out[0]
    return FindCoordinatorResponse(throttle_time_ms=0, error_code=e, error_message=m, node_id=n, host=h, port=p)


def _share(broker, ctx, version, keys):
    node = broker.config.node_id
    host, port = broker.advertised_listener(ctx.listener_name)
    if version < 6:
        out = [(k, -1, "", -1, ErrorCode.INVALID_REQUEST, None) for k in keys]
    elif broker.authorizer is not None and not allowed(broker, ctx, CLUSTER_ACTION, RT_CLUSTER, CLUSTER_NAME):
        out = [(k, -1, "", -1, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None) for k in keys]
    else:
        runtime = broker.share_coordinator
        runtime.ensure_topic()
        out = []
        for k in keys:
            parsed = share_partition_key(k)
            if parsed is None:
                out.append((k, -1, "", -1, ErrorCode.INVALID_REQUEST, None))
                continue
            if broker.cluster is None:
                out.append((k, node, host, port, ErrorCode.NONE, None))
                continue
            cache = broker.cluster.cache
            endpoint = leader = None
            if cache.is_ready(runtime.topic):
                leader = cache.leader(runtime.topic, runtime.partition_for(*parsed))
                if leader is not None:
                    endpoint = cache.endpoint(leader, ctx.listener_name)
            out.append((k, -1, "", -1, ErrorCode.COORDINATOR_NOT_AVAILABLE, None) if endpoint is None
                       else (k, leader, endpoint[0], endpoint[1], ErrorCode.NONE, None))
    if version >= 4:
        return FindCoordinatorResponse(throttle_time_ms=0, coordinators=[
            Coordinator(key=k, node_id=n, host=h, port=p, error_code=e, error_message=m) for k, n, h, p, e, m in out])
    _k, n, h, p, e, m = out[0]
    return FindCoordinatorResponse(throttle_time_ms=0, error_code=e, error_message=m, node_id=n, host=h, port=p)
