"""DescribeUserScramCredentials (50): the users' SCRAM mechanisms and iterations (never the
credentials), Kafka's ScramImage.describe; DESCRIBE on the cluster when an authorizer is set."""
from ...protocol.errors import ErrorCode
from ...protocol.messages.describe_user_scram_credentials import DescribeUserScramCredentialsResponse as R
from ...security.acl import CLUSTER_NAME, DESCRIBE, RT_CLUSTER


def handle(broker, ctx, req, version):
    authorizer = broker.authorizer
    if authorizer is not None and not authorizer.authorize(ctx, DESCRIBE, RT_CLUSTER, CLUSTER_NAME):
        return R(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message=None, results=[])
    users = None if req.users is None else [u.name for u in req.users]
    results = [R.DescribeUserScramCredentialsResult(
                   user=user, error_code=code, error_message=msg,
                   credential_infos=[R.CredentialInfo(mechanism=m, iterations=i) for m, i in infos])
               for user, code, msg, infos in broker.security.credentials.describe(users)]
    return R(error_code=0, error_message=None, results=results)
