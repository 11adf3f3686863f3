"""The share coordinator's APIs (KIP-932; Kafka's KafkaApis handlers of the ShareCoordinator):
InitializeShareGroupState (83), ReadShareGroupState (84), WriteShareGroupState (85) v0-1,
DeleteShareGroupState (86), ReadShareGroupStateSummary (87) v0-1, each split by share-partition
onto the ``__share_group_state`` partition that owns it (broker/share_coordinator_runtime.py).
They are inter-broker APIs: with an authorizer they need CLUSTER_ACTION on the cluster."""
from ...share_coordinator.shard import (delete_answer, initialize_answer, read_answer, summary_answer,
                                        write_answer)
from ..authorization import CLUSTER_ACTION, CLUSTER_AUTHORIZATION_FAILED, CLUSTER_NAME, RT_CLUSTER, allowed

_ANSWERS = {"initialize": initialize_answer, "read": read_answer, "write": write_answer, "delete": delete_answer,
            "summary": summary_answer}


def _run(api, broker, ctx, req, version):
    if broker.authorizer is not None and not allowed(broker, ctx, CLUSTER_ACTION, RT_CLUSTER, CLUSTER_NAME):
        # every share-partition it names fails (Kafka's getErrorResponse)
        answer = _ANSWERS[api]
        out = None
        for t in req.topics:
            part = answer(t.topic_id, 0, CLUSTER_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED.message)
            part.results[0].partitions = [
                answer(t.topic_id, p.partition, CLUSTER_AUTHORIZATION_FAILED,
                       CLUSTER_AUTHORIZATION_FAILED.message).results[0].partitions[0] for p in t.partitions]
            if out is None:
                out = part
            else:
                out.results.extend(part.results)
        return out if out is not None else answer(b"\0" * 16, 0).__class__(results=[])
    return broker.share_coordinator.execute(api, req, version)


def initialize(broker, ctx, req, version):
    return _run("initialize", broker, ctx, req, version)


def read(broker, ctx, req, version):
    return _run("read", broker, ctx, req, version)


def write(broker, ctx, req, version):
    return _run("write", broker, ctx, req, version)


def delete(broker, ctx, req, version):
    return _run("delete", broker, ctx, req, version)


def read_summary(broker, ctx, req, version):
    return _run("summary", broker, ctx, req, version)
