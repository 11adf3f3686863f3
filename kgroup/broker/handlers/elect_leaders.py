"""ElectLeaders (43) v0-2: preferred (election type 0; v0 always) or unclean (1) leader elections,
for the partitions named or, with null, every partition (then only those whose election was
needed are listed, every topic named, as ReplicationControlManager.electLeaders answers).
ALTER on the CLUSTER, else CLUSTER_AUTHORIZATION_FAILED (KafkaApis.handleElectLeaders).

In a cluster (kgroup/cluster/) the controller elects (KafkaController.electLeaders): a broker that
is not the controller answers NOT_CONTROLLER per partition, as Kafka 3.9's brokers did (clients
send ElectLeaders to the controller Metadata names). On a single node every partition is led by
its only, preferred, replica: ELECTION_NOT_NEEDED."""
import asyncio

from ...protocol.errors import ErrorCode
from ...protocol.messages.elect_leaders import ElectLeadersResponse
from ..authorization import ALTER, CLUSTER_NAME, RT_CLUSTER, allowed

TopicResult = ElectLeadersResponse.ReplicaElectionResult
PartitionResult = TopicResult.PartitionResult
PREFERRED, UNCLEAN = 0, 1


def handle(broker, ctx, req, version):
    election_type = req.election_type if version >= 1 else PREFERRED
    asked = None if req.topic_partitions is None else [(t.topic, p) for t in req.topic_partitions for p in t.partitions]
    if election_type not in (PREFERRED, UNCLEAN):
        return _answer(asked, {}, ErrorCode.INVALID_REQUEST,
                       lambda tp: (ErrorCode.INVALID_REQUEST, f"Unknown election type {election_type}"))
    if broker.authorizer is not None and not allowed(broker, ctx, ALTER, RT_CLUSTER, CLUSTER_NAME):
        return _answer(asked, {}, ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                       lambda tp: (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None))
    if broker.cluster is None:
        return _single_node(broker, asked)
    controller = broker.cluster.controller
    if not controller.active:
        return _answer(asked, {}, ErrorCode.NONE, lambda tp: (ErrorCode.NOT_CONTROLLER, None))
    fut = controller.elect_leaders(asked, election_type == UNCLEAN)

    async def wait():
        try:
            got = await asyncio.wait_for(asyncio.wrap_future(fut), max(req.timeout_ms, 0) / 1000.0)
        except asyncio.TimeoutError:
            return _answer(asked, {}, ErrorCode.NONE, lambda tp: (ErrorCode.REQUEST_TIMED_OUT, None))
        if got is None:
            return _answer(asked, {}, ErrorCode.NONE, lambda tp: (ErrorCode.NOT_CONTROLLER, None))
        every, results = got
        if asked is None:       # every partition: those already led as asked are left out
            topics = {tp[0]: [] for tp in every}
            for tp in every:
                if results[tp][0] != ErrorCode.ELECTION_NOT_NEEDED:
                    topics[tp[0]].append(tp)
            return ElectLeadersResponse(throttle_time_ms=0, error_code=0, replica_election_results=[
                TopicResult(topic=t, partition_result=[_partition(tp, results[tp]) for tp in tps])
                for t, tps in topics.items()])
        return _answer(asked, results, ErrorCode.NONE, None)
    return broker.cluster.answer_later(wait())


def _single_node(broker, asked):
    md = broker.metadata
    if asked is None:
        return ElectLeadersResponse(throttle_time_ms=0, error_code=0, replica_election_results=[
            TopicResult(topic=name, partition_result=[]) for name in md.topics])

    def result(tp):
        topic = md.get(tp[0])
        if topic is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such topic as {tp[0]}"
        if not 0 <= tp[1] < topic.num_partitions:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such partition as {tp[0]}-{tp[1]}"
        return ErrorCode.ELECTION_NOT_NEEDED, ErrorCode.ELECTION_NOT_NEEDED.message
    return _answer(asked, {}, ErrorCode.NONE, result)


def _partition(tp, result):
    code, message = result
    return PartitionResult(partition_id=tp[1], error_code=int(code), error_message=message)


def _answer(asked, results, error, result_of):
    """Results per topic in the request's order; an unasked-for-everything request gets none."""
    resp = ElectLeadersResponse(throttle_time_ms=0, error_code=int(error), replica_election_results=[])
    if asked is None:
        return resp
    by_topic: dict[str, TopicResult] = {}
    for tp in asked:
        t = by_topic.get(tp[0])
        if t is None:
            t = by_topic[tp[0]] = TopicResult(topic=tp[0], partition_result=[])
            resp.replica_election_results.append(t)
        t.partition_result.append(_partition(tp, results[tp] if result_of is None else result_of(tp)))
    return resp
