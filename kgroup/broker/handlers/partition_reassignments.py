"""AlterPartitionReassignments (45) v0-1 and ListPartitionReassignments (46) v0 (KIP-455; v1's
AllowReplicationFactorChange is KIP-860).

ALTER on the CLUSTER for the first, DESCRIBE on the CLUSTER for the second, else
CLUSTER_AUTHORIZATION_FAILED at the top level and for every partition asked (the requests'
getErrorResponse, as Kafka's ControllerApis answers). In a cluster (kgroup/cluster/) the
controller runs them (reassignment.py has the rules and the per-partition answers, Kafka 4.3's
ReplicationControlManager's); a broker that is not the controller answers NOT_CONTROLLER at the
top level, as Kafka 3.9's did, and clients send these to the controller Metadata names. A single
node answers as a one-broker Kafka: its only broker is the only valid replica set, a
reassignment to it completes at once, and none is ever in progress."""
import asyncio

from ...cluster.reassignment import ReplicaAssignment, validate_target
from ...protocol.errors import ErrorCode
from ...protocol.messages.alter_partition_reassignments import AlterPartitionReassignmentsResponse
from ...protocol.messages.list_partition_reassignments import ListPartitionReassignmentsResponse
from ..authorization import ALTER, CLUSTER_NAME, DESCRIBE, RT_CLUSTER, allowed

AlterTopic = AlterPartitionReassignmentsResponse.ReassignableTopicResponse
AlterPartition = AlterTopic.ReassignablePartitionResponse
ListTopic = ListPartitionReassignmentsResponse.OngoingTopicReassignment
ListPartition = ListTopic.OngoingPartitionReassignment


def handle_alter(broker, ctx, req, version):
    allow_rf_change = req.allow_replication_factor_change if version >= 1 else True
    asked = {}
    for t in req.topics:
        for p in t.partitions:
            asked[(t.name, p.partition_index)] = None if p.replicas is None else tuple(p.replicas)
    if broker.authorizer is not None and not allowed(broker, ctx, ALTER, RT_CLUSTER, CLUSTER_NAME):
        code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return _alter_answer(req, allow_rf_change, code, code.message, {tp: (code, code.message) for tp in asked})
    if broker.cluster is None:
        return _alter_answer(req, allow_rf_change, ErrorCode.NONE, None,
                             {tp: _single_node_alter(broker, tp, target, allow_rf_change)
                              for tp, target in asked.items()})
    controller = broker.cluster.controller
    if not controller.active:
        return _alter_answer(req, allow_rf_change, ErrorCode.NOT_CONTROLLER, ErrorCode.NOT_CONTROLLER.message, None)
    fut = controller.alter_partition_reassignments(asked, allow_rf_change)

    async def wait():
        try:
            got = await asyncio.wait_for(asyncio.wrap_future(fut), max(req.timeout_ms, 0) / 1000.0)
        except asyncio.TimeoutError:
            code = ErrorCode.REQUEST_TIMED_OUT
            return _alter_answer(req, allow_rf_change, code, code.message, None)
        if got is None:
            code = ErrorCode.NOT_CONTROLLER
            return _alter_answer(req, allow_rf_change, code, code.message, None)
        return _alter_answer(req, allow_rf_change, ErrorCode.NONE, None, got)
    return broker.cluster.answer_later(wait())


def _single_node_alter(broker, tp, target, allow_rf_change):
    topic = broker.metadata.get(tp[0])
    if topic is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {tp[0]}."
    if not 0 <= tp[1] < topic.num_partitions:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {tp[0]}:{tp[1]}."
    if target is None:
        return ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, ErrorCode.NO_REASSIGNMENT_IN_PROGRESS.message
    node = broker.config.node_id
    return validate_target(ReplicaAssignment((node,)), target, {node}, allow_rf_change) or (ErrorCode.NONE, None)


def _alter_answer(req, allow_rf_change, code, message, results):
    """Per topic and partition in the request's order; none with a top-level error from the
    controller (``results`` None)."""
    resp = AlterPartitionReassignmentsResponse(throttle_time_ms=0, allow_replication_factor_change=allow_rf_change,
                                               error_code=int(code), error_message=message, responses=[])
    if results is None:
        return resp
    for t in req.topics:
        resp.responses.append(AlterTopic(name=t.name, partitions=[
            AlterPartition(partition_index=p.partition_index, error_code=int(results[(t.name, p.partition_index)][0]),
                           error_message=results[(t.name, p.partition_index)][1]) for p in t.partitions]))
    return resp


def handle_list(broker, ctx, req, version):
    asked = None if req.topics is None else [(t.name, p) for t in req.topics for p in t.partition_indexes]
    if broker.authorizer is not None and not allowed(broker, ctx, DESCRIBE, RT_CLUSTER, CLUSTER_NAME):
        code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        return ListPartitionReassignmentsResponse(
            throttle_time_ms=0, error_code=int(code), error_message=code.message,
            topics=[ListTopic(name=t.name, partitions=[ListPartition(partition_index=p) for p in t.partition_indexes])
                    for t in req.topics or []])
    if broker.cluster is None:
        return _list_answer(ErrorCode.NONE, {})
    controller = broker.cluster.controller
    if not controller.active:
        return _list_answer(ErrorCode.NOT_CONTROLLER, None)
    fut = controller.list_partition_reassignments(asked)

    async def wait():
        try:
            got = await asyncio.wait_for(asyncio.wrap_future(fut), max(req.timeout_ms, 0) / 1000.0)
        except asyncio.TimeoutError:
            return _list_answer(ErrorCode.REQUEST_TIMED_OUT, None)
        return _list_answer(ErrorCode.NOT_CONTROLLER if got is None else ErrorCode.NONE, got)
    return broker.cluster.answer_later(wait())


def _list_answer(code, ongoing):
    """The partitions being reassigned, per topic (only topics with one)."""
    resp = ListPartitionReassignmentsResponse(throttle_time_ms=0, error_code=int(code),
                                              error_message=None if code == ErrorCode.NONE else code.message, topics=[])
    by_topic: dict[str, ListTopic] = {}
    for (topic, p), ra in sorted((ongoing or {}).items()):
        t = by_topic.get(topic)
        if t is None:
            t = by_topic[topic] = ListTopic(name=topic, partitions=[])
            resp.topics.append(t)
        t.partitions.append(ListPartition(partition_index=p, replicas=list(ra.replicas),
                                          adding_replicas=list(ra.adding), removing_replicas=list(ra.removing)))
    return resp
