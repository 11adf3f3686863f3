"""The cluster-wide settings' znodes (zk_config_data.py) against Kafka 3.9's: ACL resource znodes and
change notifications (ZkData's ResourceZNode, LiteralAclChangeStore, ExtendedAclChangeStore, AclEntry),
config entities and their notifications (ConfigEntityZNode, ConfigEntityChangeNotificationSequenceZNode,
Sanitizer, <default>), SCRAM credentials (ScramCredentialUtils) and /feature (FeatureZNode): what Kafka
writes decodes, what kgroup writes is Kafka's layout, and everything round-trips."""
import base64
import json

import pytest
from hypothesis import given, strategies as st

from kgroup.cluster import zk_config_data as zc
from kgroup.security import acl as A
from kgroup.security.scram import ScramCredential


def test_kafka_acl_znode_decodes():
    # ZkData's own example, and the Pascal-case / upper-case names SecurityUtils accepts
    kafka = (b'{"version": 1, "acls": [ { "host":"host1", "permissionType": "Allow","operation": "Read",'
             b'"principal": "User:alice"}, {"host":"*","permissionType":"DENY","operation":"IdempotentWrite",'
             b'"principal":"User:*"}, {"host":"*","permissionType":"Allow","operation":"DESCRIBE_CONFIGS",'
             b'"principal":"User:bob"}]}')
    assert zc.decode_acls(kafka) == {("User:alice", "host1", A.READ, A.ALLOW),
                                     ("User:*", "*", A.IDEMPOTENT_WRITE, A.DENY),
                                     ("User:bob", "*", A.DESCRIBE_CONFIGS, A.ALLOW)}
    assert zc.decode_acls(b'{"version":1,"acls":[{"host":"*","permissionType":"ALLOW","operation":"CLUSTERACTION",'
                          b'"principal":"User:c"}]}') == {("User:c", "*", A.CLUSTER_ACTION, A.ALLOW)}
    assert zc.decode_acls(b"") == set()
    with pytest.raises(ValueError):
        zc.decode_acls(b'{"version":2,"acls":[]}')


def test_acl_znode_layout():
    doc = json.loads(zc.encode_acls({("User:alice", "*", A.CLUSTER_ACTION, A.ALLOW),
                                     ("User:bob", "10.0.0.1", A.ALL, A.DENY)}))
    assert doc["version"] == 1
    assert sorted(doc["acls"], key=lambda a: a["principal"]) == [
        {"principal": "User:alice", "permissionType": "Allow", "operation": "ClusterAction", "host": "*"},
        {"principal": "User:bob", "permissionType": "Deny", "operation": "All", "host": "10.0.0.1"}]


def test_acl_paths():
    assert zc.acl_resource_path(A.RT_TOPIC, "orders", A.LITERAL) == "/kafka-acl/Topic/orders"
    assert zc.acl_resource_path(A.RT_CLUSTER, "kafka-cluster", A.LITERAL) == "/kafka-acl/Cluster/kafka-cluster"
    assert zc.acl_resource_path(A.RT_GROUP, "group-1", A.PREFIXED) == "/kafka-acl-extended/prefixed/Group/group-1"
    assert zc.acl_resource_path(A.RT_TRANSACTIONAL_ID, "tx", A.LITERAL) == "/kafka-acl/TransactionalId/tx"
    assert zc.acl_resource_path(A.RT_DELEGATION_TOKEN, "t", A.LITERAL) == "/kafka-acl/DelegationToken/t"
    assert zc.resource_type_from_path_name("TransactionalId") == A.RT_TRANSACTIONAL_ID
    assert zc.acl_change_path(A.LITERAL) == "/kafka-acl-changes"
    assert zc.acl_change_path(A.PREFIXED) == "/kafka-acl-extended-changes"


def test_acl_change_notifications():
    # LiteralAclChangeStore: ResourceType.toString (the enum name) ":" name
    assert zc.encode_acl_change(A.RT_TOPIC, "orders", A.LITERAL) == b"TOPIC:orders"
    assert zc.decode_acl_change(zc.LITERAL_ACL_CHANGES, b"TOPIC:a:b") == (A.RT_TOPIC, "a:b", A.LITERAL)
    assert zc.decode_acl_change(zc.LITERAL_ACL_CHANGES, b"Group:g") == (A.RT_GROUP, "g", A.LITERAL)
    assert zc.decode_acl_change(zc.LITERAL_ACL_CHANGES, b"TRANSACTIONAL_ID:t") == (A.RT_TRANSACTIONAL_ID, "t", A.LITERAL)
    with pytest.raises(ValueError):
        zc.decode_acl_change(zc.LITERAL_ACL_CHANGES, b"orders")
    # ExtendedAclChangeStore: an ExtendedAclChangeEvent
    assert json.loads(zc.encode_acl_change(A.RT_GROUP, "g-", A.PREFIXED)) == {
        "version": 1, "resourceType": "GROUP", "name": "g-", "patternType": "PREFIXED"}
    kafka = b'{"version":1,"resourceType":"TRANSACTIONAL_ID","name":"tx-","patternType":"PREFIXED"}'
    assert zc.decode_acl_change(zc.EXTENDED_ACL_CHANGES, kafka) == (A.RT_TRANSACTIONAL_ID, "tx-", A.PREFIXED)
    with pytest.raises(ValueError):
        zc.decode_acl_change(zc.EXTENDED_ACL_CHANGES, b'{"version":2,"resourceType":"TOPIC","name":"x",'
                                                      b'"patternType":"PREFIXED"}')


def test_config_entities_and_notifications():
    assert zc.entity_path("brokers", "") == "/config/brokers/<default>"
    assert zc.entity_path("brokers", "3") == "/config/brokers/3"
    assert zc.entity_path("groups", "billing") == "/config/groups/billing"
    assert zc.entity_path("client-metrics", "all") == "/config/client-metrics/all"
    assert zc.entity_path("users", "alice@example.com") == "/config/users/alice%40example.com"
    assert json.loads(zc.encode_config_change("brokers", "")) == {"version": 2, "entity_path": "brokers/<default>"}
    assert json.loads(zc.encode_config_change("users", "a b")) == {"version": 2, "entity_path": "users/a%20b"}
    assert zc.decode_config_change(b'{"version":2,"entity_path":"brokers/<default>"}') == ("brokers", "")
    assert zc.decode_config_change(b'{"version":2,"entity_path":"users/a%2A"}') == ("users", "a*")
    assert zc.decode_config_change(b'{"version":2,"entity_path":"users/u/clients/c"}') is None
    with pytest.raises(ValueError):
        zc.decode_config_change(b'{"version":1,"entity_type":"topics","entity_name":"t"}')
    kafka = b'{"version":1,"config":{"log.cleaner.threads":"2","num.io.threads":"4"}}'
    assert zc.decode_entity_config(kafka) == {"log.cleaner.threads": "2", "num.io.threads": "4"}
    assert json.loads(zc.encode_entity_config({"a": "1"})) == {"version": 1, "config": {"a": "1"}}


def test_sanitizer_is_kafkas():
    # Sanitizer.sanitize: URLEncoder, then * as %2A and + (a space) as %20
    assert zc.sanitize("user*") == "user%2A"
    assert zc.sanitize("a b+c") == "a%20b%2Bc"
    assert zc.sanitize("CN=x,O=y") == "CN%3Dx%2CO%3Dy"
    assert zc.sanitize("a-b_c.d~") == "a-b_c.d%7E"
    assert zc.sanitize("é") == "%C3%A9"


@given(st.text(min_size=1, max_size=30))
def test_sanitize_round_trips(name):
    assert zc.desanitize(zc.sanitize(name)) == name
    assert "/" not in zc.sanitize(name)


def test_scram_credential_string():
    c = ScramCredential(b"salt-bytes", b"s" * 32, b"k" * 32, 4096)
    text = zc.credential_to_string(c)
    assert text == (f"salt={base64.b64encode(b'salt-bytes').decode()},stored_key={base64.b64encode(b's' * 32).decode()},"
                    f"server_key={base64.b64encode(b'k' * 32).decode()},iterations=4096")
    assert zc.credential_from_string(text) == c
    with pytest.raises(ValueError):
        zc.credential_from_string("salt=AA==,iterations=4096")


@given(st.binary(min_size=1, max_size=64), st.binary(min_size=32, max_size=64), st.binary(min_size=32, max_size=64),
       st.integers(4096, 16384))
def test_scram_credential_round_trips(salt, stored, server, iterations):
    c = ScramCredential(salt, stored, server, iterations)
    assert zc.credential_from_string(zc.credential_to_string(c)) == c


def test_feature_znode():
    # Kafka's v2 (3.3+) and v1 forms decode; kgroup writes v2, enabled, without level-0 features
    assert zc.decode_features(b'{"features":{"group.version":{"max_version_level":1}},"version":2,"status":1}') == \
        {"group.version": 1}
    assert zc.decode_features(b'{"version":1,"status":1,"features":{"f":{"min_version_level":1,'
                              b'"max_version_level":3}}}') == {"f": 3}
    assert json.loads(zc.encode_features({"group.version": 1, "share.version": 0, "metadata.version": 30})) == {
        "version": 2, "status": 1,
        "features": {"group.version": {"max_version_level": 1}, "metadata.version": {"max_version_level": 30}}}
    for bad in (b'{"version":3,"status":1,"features":{}}', b'{"version":2,"features":{}}',
                b'{"version":2,"status":7,"features":{}}', b'{"version":1,"status":1,"features":{"f":{"max_version_level":1}}}',
                b'{"version":2,"status":1,"features":{"f":{"max_version_level":0}}}'):
        with pytest.raises(ValueError):
            zc.decode_features(bad)


_entries = st.sets(st.tuples(st.sampled_from(["User:alice", "User:*", "User:CN=x,O=y"]),
                             st.sampled_from(["*", "10.0.0.1"]),
                             st.sampled_from([op for op in A.OPERATION_NAMES if op not in (A.ANY, A.UNKNOWN)]),
                             st.sampled_from([A.ALLOW, A.DENY])), max_size=8)


@given(_entries)
def test_acl_entries_round_trip(entries):
    assert zc.decode_acls(zc.encode_acls(entries)) == entries


@given(st.sampled_from([A.RT_TOPIC, A.RT_GROUP, A.RT_CLUSTER, A.RT_TRANSACTIONAL_ID, A.RT_DELEGATION_TOKEN, A.RT_USER]),
       st.text(alphabet=st.characters(blacklist_characters="/", blacklist_categories=("Cs",)), min_size=1, max_size=20),
       st.sampled_from([A.LITERAL, A.PREFIXED]))
def test_acl_changes_round_trip(rtype, name, pattern):
    data = zc.encode_acl_change(rtype, name, pattern)
    assert zc.decode_acl_change(zc.acl_change_path(pattern), data) == (rtype, name, pattern)


@given(st.dictionaries(st.sampled_from(["group.version", "share.version", "transaction.version", "metadata.version"]),
                       st.integers(1, 30)))
def test_features_round_trip(finalized):
    assert zc.decode_features(zc.encode_features(finalized)) == finalized
