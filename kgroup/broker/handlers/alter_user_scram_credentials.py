"""AlterUserScramCredentials (51): upsert (salt + salted password, as kafka-configs.sh sends)
and delete SCRAM credentials, durably, with Kafka's ScramControlManager checks; ALTER on the
cluster when an authorizer is set."""
from ...protocol.errors import ErrorCode
from ...protocol.messages.alter_user_scram_credentials import AlterUserScramCredentialsResponse as R
from ..admin import after_writes
from ...security.acl import ALTER, CLUSTER_NAME, RT_CLUSTER


def handle(broker, ctx, req, version):
    authorizer = broker.authorizer
    if authorizer is not None and not authorizer.authorize(ctx, ALTER, RT_CLUSTER, CLUSTER_NAME):
        users = dict.fromkeys([d.name for d in req.deletions] + [u.name for u in req.upsertions])
        return R(results=[R.AlterUserScramCredentialsResult(
            user=u, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message=None) for u in users])
    results = broker.security.credentials.alter(
        [(d.name, d.mechanism) for d in req.deletions],
        [(u.name, u.mechanism, u.iterations, u.salt, u.salted_password) for u in req.upsertions])
    resp = R(results=[R.AlterUserScramCredentialsResult(user=u, error_code=c, error_message=m) for u, c, m in results])

    def failed(_errors):
        """ZkAdminManager.alterUserScramCredentials: a user whose znode could not be written gets
        Errors.forException of the exception, with that error's own message."""
        for r in resp.results:
            if r.error_code == 0:
                r.error_code = int(ErrorCode.UNKNOWN_SERVER_ERROR)
                r.error_message = ErrorCode.UNKNOWN_SERVER_ERROR.message
    return after_writes(broker, resp, failed)
