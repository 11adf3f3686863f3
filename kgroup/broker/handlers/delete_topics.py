"""DeleteTopics (20) v1-6 (v0 removed by KIP-896): by name (v0-5 ``topic_names``), by name or topic id (v6 ``topics``).
In a cluster (kgroup/cluster/): the topic is marked in /admin/delete_topics, the controller deletes
it, and the answer waits until this broker's metadata cache no longer has it (DelayedDeleteTopics)."""
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages.delete_topics import DeleteTopicsResponse
from ..authorization import DELETE, RT_TOPIC, allowed

Result = DeleteTopicsResponse.DeletableTopicResult


def handle(broker, ctx, req, version):
    md = broker.metadata
    resp = DeleteTopicsResponse(throttle_time_ms=0, responses=[])
    if version >= 6:
        targets = [(t.name, t.topic_id) for t in req.topics]
    else:
        targets = [(n, None) for n in req.topic_names]
    deletions = []      # (index in responses, name): in a cluster, answered once deleted
    for name, topic_id in targets:
        if not broker.config["delete.topic.enable"]:
            resp.responses.append(Result(name=name, error_code=ErrorCode.TOPIC_DELETION_DISABLED))
            continue
        if name is None:
            topic = md.by_id(topic_id)
            if topic is None:
                resp.responses.append(Result(name=None, topic_id=topic_id, error_code=ErrorCode.UNKNOWN_TOPIC_ID,
                                             error_message=ErrorCode.UNKNOWN_TOPIC_ID.message))
                continue
            if broker.authorizer is not None and not allowed(broker, ctx, DELETE, RT_TOPIC, topic.name):
                resp.responses.append(Result(name=None, topic_id=topic_id,
                                             error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                             error_message=ErrorCode.TOPIC_AUTHORIZATION_FAILED.message))
                continue
        else:
            topic = md.get(name)
            if broker.authorizer is not None and not allowed(broker, ctx, DELETE, RT_TOPIC, name):
                # DELETE on the topic; its existence is not revealed to whom may not delete it
                resp.responses.append(Result(name=name, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                             error_message=ErrorCode.TOPIC_AUTHORIZATION_FAILED.message))
                continue
            if topic is None:
                resp.responses.append(Result(name=name, error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                             error_message=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION.message))
                continue
        if broker.cluster is not None:
            deletions.append((len(resp.responses), topic.name))
        else:
            broker.delete_topic(topic.name)
        resp.responses.append(Result(name=topic.name, topic_id=topic.topic_id, error_code=0))
    if deletions:
        return broker.cluster.answer_later(_delete_in_cluster(broker, req, resp, deletions))
    return resp


async def _delete_in_cluster(broker, req, resp, deletions):
    timeout_s = max(req.timeout_ms, 0) / 1000.0
    for i, name in deletions:
        try:
            await broker.cluster.delete_topic(name, timeout_s)
        except KafkaError as e:
            resp.responses[i].error_code = e.code
            resp.responses[i].error_message = str(e)
    return resp
