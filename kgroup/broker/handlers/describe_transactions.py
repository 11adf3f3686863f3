"""DescribeTransactions (65) v0: split across the shards owning the transactional ids."""
from ...protocol.messages.describe_transactions import DescribeTransactionsResponse
from ...transaction_coordinator import TransactionCoordinatorShard as Shard

import copy

from ..authorization import DESCRIBE, RT_TOPIC, RT_TRANSACTIONAL_ID, TRANSACTIONAL_ID_AUTHORIZATION_FAILED, allowed


def handle(broker, ctx, req, version):
    if broker.authorizer is not None:
        return _authorized(broker, ctx, req, version)
    return broker.transaction_coordinator.execute_split(
        req, "transactional_ids", Shard.handle_describe_transactions, version,
        lambda rs: DescribeTransactionsResponse(throttle_time_ms=0,
                                                transaction_states=[s for r in rs for s in r.transaction_states]))


def _authorized(broker, ctx, req, version):
    """KafkaApis.handleDescribeTransactionsRequest: DESCRIBE on each transactional id (else
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED); the topics the principal may not DESCRIBE left out."""
    S = DescribeTransactionsResponse.TransactionState
    ids = list(req.transactional_ids)
    denied = [t for t in ids if not allowed(broker, ctx, DESCRIBE, RT_TRANSACTIONAL_ID, t)]
    order = {t: i for i, t in enumerate(ids)}

    def merge(states):
        for st in states:
            st.topics = [t for t in st.topics if allowed(broker, ctx, DESCRIBE, RT_TOPIC, t.topic)]
        states += [S(error_code=TRANSACTIONAL_ID_AUTHORIZATION_FAILED, transactional_id=t, transaction_state="",
                     transaction_timeout_ms=0, transaction_start_time_ms=-1, producer_id=-1, producer_epoch=-1,
                     topics=[]) for t in denied]
        states.sort(key=lambda st: order.get(st.transactional_id, 0))
        return DescribeTransactionsResponse(throttle_time_ms=0, transaction_states=states)
    if len(denied) == len(ids):
        return merge([])
    sub = copy.copy(req)
    sub.transactional_ids = [t for t in ids if t not in denied]
    return broker.transaction_coordinator.execute_split(
        sub, "transactional_ids", Shard.handle_describe_transactions, version,
        lambda rs: merge([s for r in rs for s in r.transaction_states]))
