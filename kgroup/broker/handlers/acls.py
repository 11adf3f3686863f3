"""DescribeAcls (29), CreateAcls (30), DeleteAcls (31), as Kafka's AclApis: CLUSTER DESCRIBE /
ALTER first (the whole request fails with CLUSTER_AUTHORIZATION_FAILED), SECURITY_DISABLED
without an authorizer, INVALID_REQUEST per binding or filter Kafka refuses."""
from ...protocol.errors import ErrorCode
from ...protocol.messages.create_acls import CreateAclsResponse
from ...protocol.messages.delete_acls import DeleteAclsResponse
from ...protocol.messages.describe_acls import DescribeAclsResponse
from ..admin import after_writes, unknown_server_error
from ...security.acl import ALTER, CLUSTER_NAME, DESCRIBE, RT_CLUSTER, AclBinding, AclBindingFilter

_NO_AUTHORIZER = "No Authorizer is configured."


def handle_describe(broker, ctx, req, version):
    authorizer = broker.authorizer
    if authorizer is not None and not authorizer.authorize(ctx, DESCRIBE, RT_CLUSTER, CLUSTER_NAME):
        return DescribeAclsResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                    error_message=None, resources=[])
    if authorizer is None:
        return DescribeAclsResponse(error_code=ErrorCode.SECURITY_DISABLED,
                                    error_message="No Authorizer is configured on the broker", resources=[])
    f = AclBindingFilter(req.resource_type_filter, req.resource_name_filter, req.pattern_type_filter,
                         req.principal_filter, req.host_filter, req.operation, req.permission_type)
    err = f.unknown_error()
    if err is not None:
        return DescribeAclsResponse(error_code=ErrorCode.INVALID_REQUEST, error_message=err, resources=[])
    R = DescribeAclsResponse
    resources: dict[tuple, list] = {}
    for a in broker.security.acls.describe(f):
        resources.setdefault((a.resource_type, a.resource_name, a.pattern_type), []).append(
            R.AclDescription(principal=a.principal, host=a.host, operation=a.operation,
                             permission_type=a.permission_type))
    return R(error_code=0, error_message=None, resources=[
        R.DescribeAclsResource(resource_type=t, resource_name=n, pattern_type=p, acls=acls)
        for (t, n, p), acls in resources.items()])


def handle_create(broker, ctx, req, version):
    authorizer = broker.authorizer
    R = CreateAclsResponse
    if authorizer is not None and not authorizer.authorize(ctx, ALTER, RT_CLUSTER, CLUSTER_NAME):
        return R(results=[R.AclCreationResult(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                              error_message=None) for _ in req.creations])
    if authorizer is None:
        return R(results=[R.AclCreationResult(error_code=ErrorCode.SECURITY_DISABLED, error_message=_NO_AUTHORIZER)
                          for _ in req.creations])
    bindings = [AclBinding(c.resource_type, c.resource_name, c.resource_pattern_type, c.principal, c.host,
                           c.operation, c.permission_type) for c in req.creations]
    resp = R(results=[R.AclCreationResult(error_code=0 if err is None else ErrorCode.INVALID_REQUEST,
                                          error_message=err)
                      for err in broker.security.acls.create(bindings)])
    # answered once the ACLs are durable (the cluster's too); a failed ZooKeeper write fails the
    # bindings it was for (AclAuthorizer.createAcls: ApiError.fromThrowable of the exception)
    return after_writes(broker, resp, lambda failed: unknown_server_error(resp.results))


def handle_delete(broker, ctx, req, version):
    authorizer = broker.authorizer
    R = DeleteAclsResponse
    if authorizer is not None and not authorizer.authorize(ctx, ALTER, RT_CLUSTER, CLUSTER_NAME):
        return R(filter_results=[R.DeleteAclsFilterResult(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                                          error_message=None, matching_acls=[])
                                 for _ in req.filters])
    if authorizer is None:
        return R(filter_results=[R.DeleteAclsFilterResult(error_code=ErrorCode.SECURITY_DISABLED,
                                                          error_message=_NO_AUTHORIZER, matching_acls=[])
                                 for _ in req.filters])
    filters = [AclBindingFilter(f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter,
                                f.principal_filter, f.host_filter, f.operation, f.permission_type)
               for f in req.filters]
    out = []
    for err, deleted in broker.security.acls.delete(filters):
        out.append(R.DeleteAclsFilterResult(
            error_code=0 if err is None else ErrorCode.INVALID_REQUEST, error_message=err,
            matching_acls=[R.DeleteAclsMatchingAcl(
                error_code=0, error_message=None, resource_type=a.resource_type, resource_name=a.resource_name,
                pattern_type=a.pattern_type, principal=a.principal, host=a.host, operation=a.operation,
                permission_type=a.permission_type) for a in deleted]))
    # AclAuthorizer.deleteAcls: a failed ZooKeeper write is the error of each binding it was to delete
    return after_writes(broker, R(filter_results=out), lambda failed: unknown_server_error(
        [a for r in out for a in r.matching_acls]))
