"""A write of the cluster-wide settings that cannot reach ZooKeeper (it is stopped) within the
broker's retry window (``zookeeper.connection.timeout.ms``, short here) is answered with Kafka
3.9's ZooKeeper-mode errors, the connection kept: CreateAcls/DeleteAcls per binding
UNKNOWN_SERVER_ERROR without a message (AclAuthorizer: ApiError.fromThrowable),
AlterUserScramCredentials per user UNKNOWN_SERVER_ERROR with its message (ZkAdminManager),
IncrementalAlterConfigs/AlterConfigs per resource UNKNOWN_SERVER_ERROR (ZkAdminManager:
ApiError.fromThrowable), UpdateFeatures per feature FEATURE_UPDATE_FAILED (KafkaController).
Nothing failed is installed; with ZooKeeper back, writes go through again."""
import pytest

from kgroup.protocol.errors import ErrorCode as E
from kgroup.protocol.messages.alter_configs import AlterConfigsRequest
from kgroup.protocol.messages.alter_user_scram_credentials import AlterUserScramCredentialsRequest
from kgroup.protocol.messages.create_acls import CreateAclsRequest
from kgroup.protocol.messages.delete_acls import DeleteAclsRequest
from kgroup.protocol.messages.describe_acls import DescribeAclsRequest
from kgroup.protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
from kgroup.protocol.messages.update_features import UpdateFeaturesRequest
from kgroup.testing.cluster import KafkaCluster
from tests.harness import RawClient

pytestmark = pytest.mark.interop

TOPIC, LITERAL, READ, ALLOW, BROKER = 2, 3, 3, 3, 4
ACL = dict(resource_type=TOPIC, resource_name="t", resource_pattern_type=LITERAL, principal="User:alice",
           host="*", operation=READ, permission_type=ALLOW)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with KafkaCluster(1, tmp_path_factory.mktemp("zk-write-failures"), {
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:ANONYMOUS", "zookeeper.connection.timeout.ms": 1500}) as c:
        yield c


def _create_acl(raw, **acl):
    return raw.request(CreateAclsRequest(creations=[CreateAclsRequest.AclCreation(**{**ACL, **acl})]), 3).results


def _acls(raw):
    resp = raw.request(DescribeAclsRequest(resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
                                           principal_filter=None, host_filter=None, operation=1,
                                           permission_type=1), 3)
    return sorted((r.resource_name, a.principal) for r in resp.resources for a in r.acls)


def test_writes_that_cannot_reach_zookeeper_get_kafkas_errors(cluster):
    raw = RawClient(cluster.broker(1).port)
    try:
        assert [r.error_code for r in _create_acl(raw)] == [0]
        cluster.stop_zookeeper()
        try:
            created = _create_acl(raw, principal="User:bob")
            assert [(r.error_code, r.error_message) for r in created] == [(E.UNKNOWN_SERVER_ERROR, None)]

            F = DeleteAclsRequest.DeleteAclsFilter
            deleted = raw.request(DeleteAclsRequest(filters=[F(
                resource_type_filter=TOPIC, resource_name_filter="t", pattern_type_filter=LITERAL,
                principal_filter="User:alice", host_filter=None, operation=READ, permission_type=ALLOW)]), 3)
            r, = deleted.filter_results
            assert r.error_code == 0
            assert [(a.error_code, a.error_message, a.principal) for a in r.matching_acls] == \
                [(E.UNKNOWN_SERVER_ERROR, None, "User:alice")]

            U = AlterUserScramCredentialsRequest.ScramCredentialUpsertion
            scram = raw.request(AlterUserScramCredentialsRequest(deletions=[], upsertions=[
                U(name="carol", mechanism=1, iterations=8192, salt=b"salt", salted_password=b"p" * 32)]), 0)
            assert [(r.user, r.error_code, r.error_message) for r in scram.results] == \
                [("carol", E.UNKNOWN_SERVER_ERROR, E.UNKNOWN_SERVER_ERROR.message)]

            R = IncrementalAlterConfigsRequest.AlterConfigsResource
            C = R.AlterableConfig
            altered = raw.request(IncrementalAlterConfigsRequest(validate_only=False, resources=[
                R(resource_type=BROKER, resource_name="", configs=[
                    C(name="log.cleaner.backoff.ms", config_operation=0, value="20000")]),
                R(resource_type=BROKER, resource_name="1", configs=[
                    C(name="no.such.config", config_operation=0, value="1")])]), 1)
            assert [(r.resource_name, r.error_code, r.error_message) for r in altered.responses][0] == \
                ("", E.UNKNOWN_SERVER_ERROR, None)
            assert altered.responses[1].error_code == E.INVALID_REQUEST        # refused before any write

            AR = AlterConfigsRequest.AlterConfigsResource
            legacy = raw.request(AlterConfigsRequest(validate_only=False, resources=[AR(
                resource_type=BROKER, resource_name="", configs=[
                    AR.AlterableConfig(name="log.cleaner.backoff.ms", value="20000")])]), 2)
            assert [(r.error_code, r.error_message) for r in legacy.responses] == [(E.UNKNOWN_SERVER_ERROR, None)]

            K = UpdateFeaturesRequest.FeatureUpdateKey
            features = raw.request(UpdateFeaturesRequest(timeout_ms=5000, validate_only=False, feature_updates=[
                K(feature="transaction.version", max_version_level=1, upgrade_type=2)]), 1)
            assert features.error_code == 0
            assert [(r.feature, r.error_code, r.error_message) for r in features.results] == \
                [("transaction.version", E.FEATURE_UPDATE_FAILED, E.FEATURE_UPDATE_FAILED.message)]
            features = raw.request(UpdateFeaturesRequest(timeout_ms=5000, validate_only=False, feature_updates=[
                K(feature="transaction.version", max_version_level=1, upgrade_type=2)]), 2)
            assert (features.error_code, features.error_message) == \
                (E.FEATURE_UPDATE_FAILED, E.FEATURE_UPDATE_FAILED.message)
            # nothing failed was installed
            assert _acls(raw) == [("t", "User:alice")]
        finally:
            cluster.start_zookeeper()
        assert [r.error_code for r in _create_acl(raw, principal="User:dave")] == [0]
        assert _acls(raw) == [("t", "User:alice"), ("t", "User:dave")]
        assert cluster.zk.zk.exists("/config/users/carol") is None
    finally:
        raw.close()
