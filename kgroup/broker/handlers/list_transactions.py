"""ListTransactions (66) v0-2: every shard's transactions (state, producer id, v1 duration and v2
transactional id pattern filters, KIP-994 and KIP-1152); the first shard error wins, as Kafka
reports a loading partition. A pattern RE2 refuses is the whole request's
INVALID_REGULAR_EXPRESSION."""
from ...protocol.errors import KafkaError
from ...protocol.messages.list_transactions import ListTransactionsResponse
from ...transaction_coordinator import TransactionCoordinatorShard as Shard
from ...transaction_coordinator.shard import transactional_id_pattern

from ..authorization import DESCRIBE, RT_TRANSACTIONAL_ID, allowed


def _merge(rs):
    return ListTransactionsResponse(
        throttle_time_ms=0, error_code=next((r.error_code for r in rs if r.error_code), 0),
        unknown_state_filters=rs[0].unknown_state_filters if rs else [],
        transaction_states=[s for r in rs if not r.error_code for s in r.transaction_states])


def handle(broker, ctx, req, version):
    if version >= 2:
        try:
            transactional_id_pattern(req.transactional_id_pattern)
        except KafkaError as e:
            return ListTransactionsResponse(throttle_time_ms=0, error_code=int(e.code))
    if broker.authorizer is not None:   # KafkaApis: only the transactional ids the principal may DESCRIBE
        def merge(rs):
            resp = _merge(rs)
            resp.transaction_states = [s for s in resp.transaction_states
                                       if allowed(broker, ctx, DESCRIBE, RT_TRANSACTIONAL_ID, s.transactional_id)]
            return resp
        return broker.transaction_coordinator.execute_split(req, None, Shard.handle_list_transactions, version, merge)
    return broker.transaction_coordinator.execute_split(req, None, Shard.handle_list_transactions, version, _merge)
