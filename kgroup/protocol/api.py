"""The API registry and request/response framing (sans-IO).

``API_BY_KEY`` maps a Kafka API key to its declared request/response classes. ``parse_request``
turns one frame (without its 4-byte length prefix) into ``(header, body)``; ``encode_response``
builds the bytes of a response frame, length prefix included, as a list of pieces so large
record sets are never copied.

Header versions (KIP-482): a request at a flexible version carries header v2 (tagged fields)
and gets response header v1; otherwise request header v1 and response header v0. The
ApiVersions response always uses response header v0 so a client can parse it before it knows
which versions the broker speaks.
"""
from __future__ import annotations

import enum
import struct
from typing import NamedTuple

from .header_defs import RequestHeader, ResponseHeader
from .messages import (add_offsets_to_txn, add_partitions_to_txn, alter_configs, api_versions,
                       consumer_group_describe, consumer_group_heartbeat, create_partitions,
                       create_topics, delete_groups, delete_records, delete_topics,
                       describe_cluster, describe_configs, describe_groups, describe_transactions,
                       end_txn, fetch, find_coordinator, heartbeat, incremental_alter_configs,
                       init_producer_id, join_group, leave_group, list_groups, list_offsets,
                       list_transactions, metadata, offset_commit, offset_delete, offset_fetch,
                       produce, sync_group, txn_offset_commit, write_txn_markers)
from .messages import (delete_share_group_state, initialize_share_group_state, read_share_group_state,
                       read_share_group_state_summary, share_acknowledge, share_fetch, share_group_describe,
                       share_group_heartbeat, write_share_group_state)
from .messages import alter_share_group_offsets, delete_share_group_offsets, describe_share_group_offsets
from .messages import (alter_user_scram_credentials, create_acls, delete_acls, describe_acls,  # security
                       describe_user_scram_credentials, sasl_authenticate, sasl_handshake)
from .messages import (describe_producers, describe_topic_partitions, get_telemetry_subscriptions,
                       list_config_resources, offset_for_leader_epoch, push_telemetry, update_features)
from .messages import elect_leaders     # the cluster's controller (kgroup/cluster/)
from .messages import describe_log_dirs
from .messages import alter_partition_reassignments, list_partition_reassignments   # the cluster's controller
from .primitives import DecodeError
from .schema import DECODE_FAILURES, Message, is_flexible

_INT32 = struct.Struct(">i")
_KEY_VERSION = struct.Struct(">hh")
_SIZE_CORRELATION = struct.Struct(">ii")                 # length prefix, response header v0
_SIZE_CORRELATION_NO_TAGS = struct.Struct(">iix")        # ... v1: no tagged fields (a 0 byte)


class ApiKey(enum.IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    OFFSET_DELETE = 47
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    UPDATE_FEATURES = 57
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    CONSUMER_GROUP_HEARTBEAT = 68
    CONSUMER_GROUP_DESCRIBE = 69
    GET_TELEMETRY_SUBSCRIPTIONS = 71
    PUSH_TELEMETRY = 72
    LIST_CONFIG_RESOURCES = 74
    DESCRIBE_TOPIC_PARTITIONS = 75
    SHARE_GROUP_HEARTBEAT = 76
    SHARE_GROUP_DESCRIBE = 77
    SHARE_FETCH = 78
    SHARE_ACKNOWLEDGE = 79
    INITIALIZE_SHARE_GROUP_STATE = 83
    READ_SHARE_GROUP_STATE = 84
    WRITE_SHARE_GROUP_STATE = 85
    DELETE_SHARE_GROUP_STATE = 86
    READ_SHARE_GROUP_STATE_SUMMARY = 87
    DESCRIBE_SHARE_GROUP_OFFSETS = 90
    ALTER_SHARE_GROUP_OFFSETS = 91
    DELETE_SHARE_GROUP_OFFSETS = 92


class Api(NamedTuple):
    key: ApiKey
    request: type[Message]
    response: type[Message]


def _api(key, module, name):
    return Api(key, getattr(module, name + "Request"), getattr(module, name + "Response"))


API_BY_KEY: dict[int, Api] = {a.key: a for a in (
    _api(ApiKey.PRODUCE, produce, "Produce"),
    _api(ApiKey.FETCH, fetch, "Fetch"),
    _api(ApiKey.LIST_OFFSETS, list_offsets, "ListOffsets"),
    _api(ApiKey.METADATA, metadata, "Metadata"),
    _api(ApiKey.OFFSET_COMMIT, offset_commit, "OffsetCommit"),
    _api(ApiKey.OFFSET_FETCH, offset_fetch, "OffsetFetch"),
    _api(ApiKey.FIND_COORDINATOR, find_coordinator, "FindCoordinator"),
    _api(ApiKey.JOIN_GROUP, join_group, "JoinGroup"),
    _api(ApiKey.HEARTBEAT, heartbeat, "Heartbeat"),
    _api(ApiKey.LEAVE_GROUP, leave_group, "LeaveGroup"),
    _api(ApiKey.SYNC_GROUP, sync_group, "SyncGroup"),
    _api(ApiKey.DESCRIBE_GROUPS, describe_groups, "DescribeGroups"),
    _api(ApiKey.LIST_GROUPS, list_groups, "ListGroups"),
    _api(ApiKey.API_VERSIONS, api_versions, "ApiVersions"),
    _api(ApiKey.CREATE_TOPICS, create_topics, "CreateTopics"),
    _api(ApiKey.DELETE_TOPICS, delete_topics, "DeleteTopics"),
    _api(ApiKey.INIT_PRODUCER_ID, init_producer_id, "InitProducerId"),
    _api(ApiKey.ADD_PARTITIONS_TO_TXN, add_partitions_to_txn, "AddPartitionsToTxn"),
    _api(ApiKey.ADD_OFFSETS_TO_TXN, add_offsets_to_txn, "AddOffsetsToTxn"),
    _api(ApiKey.END_TXN, end_txn, "EndTxn"),
    _api(ApiKey.WRITE_TXN_MARKERS, write_txn_markers, "WriteTxnMarkers"),
    _api(ApiKey.TXN_OFFSET_COMMIT, txn_offset_commit, "TxnOffsetCommit"),
    _api(ApiKey.DESCRIBE_CONFIGS, describe_configs, "DescribeConfigs"),
    _api(ApiKey.DELETE_GROUPS, delete_groups, "DeleteGroups"),
    _api(ApiKey.OFFSET_DELETE, offset_delete, "OffsetDelete"),
    _api(ApiKey.DESCRIBE_CLUSTER, describe_cluster, "DescribeCluster"),
    _api(ApiKey.DELETE_RECORDS, delete_records, "DeleteRecords"),
    _api(ApiKey.ALTER_CONFIGS, alter_configs, "AlterConfigs"),
    _api(ApiKey.CREATE_PARTITIONS, create_partitions, "CreatePartitions"),
    _api(ApiKey.INCREMENTAL_ALTER_CONFIGS, incremental_alter_configs, "IncrementalAlterConfigs"),
    _api(ApiKey.DESCRIBE_TRANSACTIONS, describe_transactions, "DescribeTransactions"),
    _api(ApiKey.LIST_TRANSACTIONS, list_transactions, "ListTransactions"),
    # KIP-848: declared (and conformance-checked) ahead of their handlers; ApiVersions advertises
    # only what the handler table answers, so these stay unadvertised until the coordinator serves them.
    _api(ApiKey.CONSUMER_GROUP_HEARTBEAT, consumer_group_heartbeat, "ConsumerGroupHeartbeat"),
    _api(ApiKey.CONSUMER_GROUP_DESCRIBE, consumer_group_describe, "ConsumerGroupDescribe"),
    # KIP-932 share groups, in Kafka 4.3's versions
    _api(ApiKey.SHARE_GROUP_HEARTBEAT, share_group_heartbeat, "ShareGroupHeartbeat"),
    _api(ApiKey.SHARE_GROUP_DESCRIBE, share_group_describe, "ShareGroupDescribe"),
    _api(ApiKey.SHARE_FETCH, share_fetch, "ShareFetch"),
    _api(ApiKey.SHARE_ACKNOWLEDGE, share_acknowledge, "ShareAcknowledge"),
    _api(ApiKey.INITIALIZE_SHARE_GROUP_STATE, initialize_share_group_state, "InitializeShareGroupState"),
    _api(ApiKey.READ_SHARE_GROUP_STATE, read_share_group_state, "ReadShareGroupState"),
    _api(ApiKey.WRITE_SHARE_GROUP_STATE, write_share_group_state, "WriteShareGroupState"),
    _api(ApiKey.DELETE_SHARE_GROUP_STATE, delete_share_group_state, "DeleteShareGroupState"),
    _api(ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, read_share_group_state_summary, "ReadShareGroupStateSummary"),
    _api(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, describe_share_group_offsets, "DescribeShareGroupOffsets"),
    _api(ApiKey.ALTER_SHARE_GROUP_OFFSETS, alter_share_group_offsets, "AlterShareGroupOffsets"),
    _api(ApiKey.DELETE_SHARE_GROUP_OFFSETS, delete_share_group_offsets, "DeleteShareGroupOffsets"),
    # security: SASL, ACLs, SCRAM credentials
    _api(ApiKey.SASL_HANDSHAKE, sasl_handshake, "SaslHandshake"),
    _api(ApiKey.SASL_AUTHENTICATE, sasl_authenticate, "SaslAuthenticate"),
    _api(ApiKey.DESCRIBE_ACLS, describe_acls, "DescribeAcls"),
    _api(ApiKey.CREATE_ACLS, create_acls, "CreateAcls"),
    _api(ApiKey.DELETE_ACLS, delete_acls, "DeleteAcls"),
    _api(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, describe_user_scram_credentials, "DescribeUserScramCredentials"),
    _api(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, alter_user_scram_credentials, "AlterUserScramCredentials"),
    _api(ApiKey.OFFSET_FOR_LEADER_EPOCH, offset_for_leader_epoch, "OffsetForLeaderEpoch"),
    _api(ApiKey.UPDATE_FEATURES, update_features, "UpdateFeatures"),
    _api(ApiKey.DESCRIBE_PRODUCERS, describe_producers, "DescribeProducers"),
    _api(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, get_telemetry_subscriptions, "GetTelemetrySubscriptions"),
    _api(ApiKey.PUSH_TELEMETRY, push_telemetry, "PushTelemetry"),
    _api(ApiKey.LIST_CONFIG_RESOURCES, list_config_resources, "ListConfigResources"),
    _api(ApiKey.DESCRIBE_TOPIC_PARTITIONS, describe_topic_partitions, "DescribeTopicPartitions"),
    _api(ApiKey.ELECT_LEADERS, elect_leaders, "ElectLeaders"),
    _api(ApiKey.DESCRIBE_LOG_DIRS, describe_log_dirs, "DescribeLogDirs"),
    _api(ApiKey.ALTER_PARTITION_REASSIGNMENTS, alter_partition_reassignments, "AlterPartitionReassignments"),
    _api(ApiKey.LIST_PARTITION_REASSIGNMENTS, list_partition_reassignments, "ListPartitionReassignments"),
)}


def request_header_version(api_key: int, api_version: int) -> int:
    api = API_BY_KEY[api_key]
    return 2 if is_flexible(api.request, api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    if api_key == ApiKey.API_VERSIONS:
        return 0
    return 1 if is_flexible(API_BY_KEY[api_key].response, api_version) else 0


# Per (api key, version), worked out once: the request's header and body decoders, and the
# response's length-prefix + header layout (v0: correlation id; v1: plus an empty tagged-field
# section), so a request costs two dict lookups here rather than a chain of small calls.
_REQUEST_DECODERS: dict[tuple[int, int], tuple] = {}
_RESPONSE_PREFIX: dict[tuple[int, int], tuple[struct.Struct, int]] = {}
for _api_entry in API_BY_KEY.values():
    for _v in range(_api_entry.request.VERSIONS[0], _api_entry.request.VERSIONS[1] + 1):
        _REQUEST_DECODERS[_api_entry.key, _v] = (
            RequestHeader._DECODERS[request_header_version(_api_entry.key, _v)],
            _api_entry.request._DECODERS[_v], _api_entry.request)
        _RESPONSE_PREFIX[_api_entry.key, _v] = (
            (_SIZE_CORRELATION, 4) if response_header_version(_api_entry.key, _v) == 0
            else (_SIZE_CORRELATION_NO_TAGS, 5))


def peek_key_version(frame) -> tuple[int, int]:
    """The (api key, api version) at the start of every request header, before any parsing."""
    if len(frame) < 8:
        raise DecodeError("request frame shorter than a request header")
    return _KEY_VERSION.unpack_from(frame, 0)


def parse_request(frame: bytes | memoryview, key_version: tuple[int, int] | None = None):
    """Decode a request frame (length prefix removed) into (header, body).

    The caller has checked with ``peek_key_version`` that the key and version are supported
    (and may pass what it returned).
    """
    if key_version is None:
        key_version = peek_key_version(frame)
    decoders = _REQUEST_DECODERS.get(key_version)
    if decoders is None:
        raise DecodeError("no request api key %d version %d" % key_version)
    decode_header, decode_body, request_type = decoders
    try:
        header, pos = decode_header(frame, 0)
        # Bytes after the body are ignored, as Kafka's generated readers do: librdkafka 2.16 sends
        # MetadataRequest v12 with 3 bytes past the end of the message.
        body, _ = decode_body(frame, pos)
    except DecodeError:
        raise
    except DECODE_FAILURES as e:
        raise DecodeError(f"cannot decode {request_type.__name__} v{key_version[1]}: {e}") from None
    return header, body


def encode_request(body, version: int, correlation_id: int, client_id: str | None) -> list:
    """A request frame (length prefix included), as our client and tests send it."""
    key = type(body).API_KEY
    header = RequestHeader(request_api_key=key, request_api_version=version,
                           correlation_id=correlation_id, client_id=client_id)
    pieces = header.encode(request_header_version(key, version))
    pieces += body.encode(version)
    return _framed(pieces)


def encode_response(api_key: int, version: int, correlation_id: int, body) -> list:
    """A response frame (length prefix included) as a list of bytes-like pieces."""
    pieces: list = []
    type(body)._ENCODERS[version](body, pieces)
    prefix, header_size = _RESPONSE_PREFIX[api_key, version]
    pieces.insert(0, prefix.pack(header_size + sum(map(len, pieces)), correlation_id))
    return pieces


def _framed(pieces: list) -> list:
    pieces.insert(0, _INT32.pack(sum(map(len, pieces))))
    return pieces


def parse_response(api_key: int, version: int, frame):
    """Decode a response frame (length prefix removed): (correlation id, body)."""
    buf = memoryview(frame)
    header, pos = ResponseHeader.decode(buf, response_header_version(api_key, version))
    body, end = API_BY_KEY[api_key].response.decode(buf, version, pos)
    if end != len(buf):
        raise DecodeError(f"response v{version} for API {api_key}: {len(buf) - end} trailing bytes")
    return header.correlation_id, body
