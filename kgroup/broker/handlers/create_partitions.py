"""CreatePartitions (37) v0-3: raise a topic's partition count (with optional manual
assignments onto this node), ``validate_only``. Clients see the new partitions through
Metadata; a classic group's leader notices the change on its metadata refresh and rejoins,
as with Kafka. In a cluster (kgroup/cluster/): the new partitions placed as Kafka's
AdminZkClient.addPartitions places them (or as assigned), written to ZooKeeper and answered once
led."""
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages.create_partitions import CreatePartitionsResponse
from .. import admin
from ..authorization import ALTER, RT_TOPIC, allowed

Result = CreatePartitionsResponse.CreatePartitionsTopicResult


def handle(broker, ctx, req, version):
    resp = CreatePartitionsResponse(throttle_time_ms=0, results=[])
    names = [t.name for t in req.topics]
    cluster_requests = []
    for t in req.topics:
        if names.count(t.name) > 1:
            resp.results.append(Result(name=t.name, error_code=ErrorCode.INVALID_REQUEST,
                                       error_message="Duplicate topic name."))
            continue
        if broker.authorizer is not None and not allowed(broker, ctx, ALTER, RT_TOPIC, t.name):   # ALTER on the topic
            resp.results.append(Result(name=t.name, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                       error_message=None))
            continue
        if broker.cluster is not None:
            cluster_requests.append((len(resp.results), t))
            resp.results.append(Result(name=t.name, error_code=0, error_message=None))
            continue
        try:
            admin.create_partitions(broker, t.name, t.count, t.assignments, req.validate_only)
            resp.results.append(Result(name=t.name, error_code=0, error_message=None))
        except KafkaError as e:
            resp.results.append(Result(name=t.name, error_code=e.code, error_message=str(e)))
    if cluster_requests:
        return broker.cluster.answer_later(_in_cluster(broker, req, resp, cluster_requests))
    return resp


async def _in_cluster(broker, req, resp, cluster_requests):
    timeout_s = max(req.timeout_ms, 0) / 1000.0
    for i, t in cluster_requests:
        try:
            await broker.cluster.create_partitions(t.name, t.count, t.assignments, req.validate_only, timeout_s)
        except KafkaError as e:
            resp.results[i] = Result(name=t.name, error_code=e.code, error_message=str(e))
    return resp
