"""One small handler per API: take the decoded request, call the broker core once, build the
response. ``HANDLERS`` is also the advertised ApiVersions table: an API is listed here only when
it works end to end, with exactly the versions it handles.
"""
from __future__ import annotations

from ...protocol.api import ApiKey
from . import consumer_group_describe, consumer_group_heartbeat
from . import share_acknowledge, share_fetch, share_group_describe, share_group_heartbeat, share_group_state
from . import alter_share_group_offsets, delete_share_group_offsets, describe_share_group_offsets
from . import (api_versions, create_topics, delete_groups, delete_topics, describe_cluster,
               describe_configs, describe_groups, fetch, find_coordinator, heartbeat, init_producer_id,
               join_group, leave_group, list_groups, list_offsets, metadata, offset_commit, offset_delete,
               offset_fetch, produce, sync_group)
from . import alter_configs, create_partitions, delete_records, incremental_alter_configs, update_features
from . import (add_offsets_to_txn, add_partitions_to_txn, describe_transactions, end_txn,  # transactions
               list_transactions, txn_offset_commit, write_txn_markers)
from . import describe_producers, describe_topic_partitions, list_config_resources, offset_for_leader_epoch
from . import get_telemetry_subscriptions, push_telemetry
from . import describe_log_dirs, elect_leaders, partition_reassignments
from . import (acls, alter_user_scram_credentials, describe_user_scram_credentials,  # security
               sasl_authenticate, sasl_handshake)

# api key -> (handler, min version, max version)
HANDLERS = {
    ApiKey.PRODUCE: (produce.handle, 3, 13),
    ApiKey.FETCH: (fetch.handle, 4, 18),
    ApiKey.LIST_OFFSETS: (list_offsets.handle, 1, 11),
    ApiKey.INIT_PRODUCER_ID: (init_producer_id.handle, 0, 5),
    ApiKey.FIND_COORDINATOR: (find_coordinator.handle, 0, 6),
    ApiKey.JOIN_GROUP: (join_group.handle, 0, 9),
    ApiKey.SYNC_GROUP: (sync_group.handle, 0, 5),
    ApiKey.HEARTBEAT: (heartbeat.handle, 0, 4),
    ApiKey.LEAVE_GROUP: (leave_group.handle, 0, 5),
    ApiKey.OFFSET_COMMIT: (offset_commit.handle, 2, 10),
    ApiKey.OFFSET_FETCH: (offset_fetch.handle, 1, 10),
    ApiKey.DESCRIBE_GROUPS: (describe_groups.handle, 0, 6),
    ApiKey.LIST_GROUPS: (list_groups.handle, 0, 5),
    ApiKey.DELETE_GROUPS: (delete_groups.handle, 0, 2),
    ApiKey.OFFSET_DELETE: (offset_delete.handle, 0, 0),
    ApiKey.API_VERSIONS: (api_versions.handle, 0, 4),
    ApiKey.METADATA: (metadata.handle, 0, 13),
    ApiKey.CREATE_TOPICS: (create_topics.handle, 2, 7),
    ApiKey.DELETE_TOPICS: (delete_topics.handle, 1, 6),
    ApiKey.DESCRIBE_CONFIGS: (describe_configs.handle, 1, 4),
    ApiKey.DESCRIBE_CLUSTER: (describe_cluster.handle, 0, 2),
    ApiKey.DELETE_RECORDS: (delete_records.handle, 0, 2),
    ApiKey.ALTER_CONFIGS: (alter_configs.handle, 0, 2),
    ApiKey.CREATE_PARTITIONS: (create_partitions.handle, 0, 3),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (incremental_alter_configs.handle, 0, 1),
    ApiKey.UPDATE_FEATURES: (update_features.handle, 0, 2),
    # the consumer group protocol (KIP-848)
    ApiKey.CONSUMER_GROUP_HEARTBEAT: (consumer_group_heartbeat.handle, 0, 1),
    ApiKey.CONSUMER_GROUP_DESCRIBE: (consumer_group_describe.handle, 0, 1),
    # share groups (KIP-932)
    ApiKey.SHARE_GROUP_HEARTBEAT: (share_group_heartbeat.handle, 1, 1),
    ApiKey.SHARE_GROUP_DESCRIBE: (share_group_describe.handle, 1, 1),
    ApiKey.SHARE_FETCH: (share_fetch.handle, 1, 2),
    ApiKey.SHARE_ACKNOWLEDGE: (share_acknowledge.handle, 1, 2),
    ApiKey.INITIALIZE_SHARE_GROUP_STATE: (share_group_state.initialize, 0, 0),
    ApiKey.READ_SHARE_GROUP_STATE: (share_group_state.read, 0, 0),
    ApiKey.WRITE_SHARE_GROUP_STATE: (share_group_state.write, 0, 1),
    ApiKey.DELETE_SHARE_GROUP_STATE: (share_group_state.delete, 0, 0),
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: (share_group_state.read_summary, 0, 1),
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: (describe_share_group_offsets.handle, 0, 1),
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: (alter_share_group_offsets.handle, 0, 0),
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: (delete_share_group_offsets.handle, 0, 0),
    # transactions (the transaction coordinator, broker/transaction_runtime.py)
    ApiKey.ADD_PARTITIONS_TO_TXN: (add_partitions_to_txn.handle, 0, 5),
    ApiKey.ADD_OFFSETS_TO_TXN: (add_offsets_to_txn.handle, 0, 4),
    ApiKey.END_TXN: (end_txn.handle, 0, 5),
    ApiKey.WRITE_TXN_MARKERS: (write_txn_markers.handle, 1, 2),
    ApiKey.TXN_OFFSET_COMMIT: (txn_offset_commit.handle, 0, 5),
    ApiKey.DESCRIBE_TRANSACTIONS: (describe_transactions.handle, 0, 0),
    ApiKey.LIST_TRANSACTIONS: (list_transactions.handle, 0, 2),
    ApiKey.DESCRIBE_PRODUCERS: (describe_producers.handle, 0, 0),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (offset_for_leader_epoch.handle, 2, 4),
    ApiKey.LIST_CONFIG_RESOURCES: (list_config_resources.handle, 0, 1),
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: (describe_topic_partitions.handle, 0, 0),
    ApiKey.ELECT_LEADERS: (elect_leaders.handle, 0, 2),       # the cluster's controller (kgroup/cluster/)
    ApiKey.DESCRIBE_LOG_DIRS: (describe_log_dirs.handle, 1, 5),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (partition_reassignments.handle_alter, 0, 1),   # the controller
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (partition_reassignments.handle_list, 0, 0),
    # client metrics (KIP-714): advertised only with a metrics listener (api_versions.py)
    ApiKey.GET_TELEMETRY_SUBSCRIPTIONS: (get_telemetry_subscriptions.handle, 0, 0),
    ApiKey.PUSH_TELEMETRY: (push_telemetry.handle, 0, 0),
    # security (SASL on a SASL listener is handled by broker/authentication.py before these)
    ApiKey.SASL_HANDSHAKE: (sasl_handshake.handle, 0, 1),
    ApiKey.SASL_AUTHENTICATE: (sasl_authenticate.handle, 0, 2),
    ApiKey.DESCRIBE_ACLS: (acls.handle_describe, 1, 3),
    ApiKey.CREATE_ACLS: (acls.handle_create, 1, 3),
    ApiKey.DELETE_ACLS: (acls.handle_delete, 1, 3),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (describe_user_scram_credentials.handle, 0, 0),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (alter_user_scram_credentials.handle, 0, 0),
}


def advertised() -> list[tuple[int, int, int]]:
    return sorted((int(k), lo, hi) for k, (_, lo, hi) in HANDLERS.items())


# (api key, version) -> handler, for every version we serve: the server's one lookup per request
HANDLER_BY_KEY_VERSION = {(int(k), v): h for k, (h, lo, hi) in HANDLERS.items() for v in range(lo, hi + 1)}

