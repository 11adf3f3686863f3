"""DescribeTransactions (65) v0: split across the shards owning the transactional ids."""
from ...protocol.messages.describe_transactions import DescribeTransactionsResponse
from ...transaction_coordinator import TransactionCoordinatorShard as Shard


def handle(broker, ctx, req, version):
    return broker.transaction_coordinator.execute_split(
        req, "transactional_ids", Shard.handle_describe_transactions, version,
        lambda rs: DescribeTransactionsResponse(throttle_time_ms=0,
                                                transaction_states=[s for r in rs for s in r.transaction_states]))
