"""StandardAuthorizer's rule (kgroup/security/acl.py) without a broker: super users, DENY before
ALLOW, LITERAL / PREFIXED / wildcard resources, wildcard principal and hosts, implied operations,
allow.everyone.if.no.acl.found, authorizeByResourceType, filters and CreateAcls' validation."""
from __future__ import annotations

from types import SimpleNamespace

from kgroup.security import acl as A
from kgroup.security.principal import KafkaPrincipal


def ctx(user="alice", host="10.0.0.1"):
    return SimpleNamespace(principal=KafkaPrincipal("User", user), client_host=host)


def allow(rt, name, op, principal="User:alice", host="*", pt=A.LITERAL):
    return A.AclBinding(rt, name, pt, principal, host, op, A.ALLOW)


def deny(rt, name, op, principal="User:alice", host="*", pt=A.LITERAL):
    return A.AclBinding(rt, name, pt, principal, host, op, A.DENY)


def auth(*acls, **kw):
    a = A.StandardAuthorizer(**kw)
    a.set_acls(acls)
    return a


def test_literal_prefixed_wildcard():
    a = auth(allow(A.RT_TOPIC, "orders", A.READ), allow(A.RT_TOPIC, "log-", A.WRITE, pt=A.PREFIXED),
             allow(A.RT_GROUP, "*", A.READ))
    c = ctx()
    assert a.authorize(c, A.READ, A.RT_TOPIC, "orders")
    assert not a.authorize(c, A.READ, A.RT_TOPIC, "orders2")        # LITERAL is exact
    assert a.authorize(c, A.WRITE, A.RT_TOPIC, "log-app")
    assert not a.authorize(c, A.WRITE, A.RT_TOPIC, "lo")
    assert a.authorize(c, A.READ, A.RT_GROUP, "any-group")          # the wildcard resource
    assert not a.authorize(ctx("bob"), A.READ, A.RT_TOPIC, "orders")


def test_deny_wins_and_implied_operations():
    a = auth(allow(A.RT_TOPIC, "t", A.ALL), deny(A.RT_TOPIC, "t", A.WRITE))
    assert a.authorize(ctx(), A.READ, A.RT_TOPIC, "t")
    assert not a.authorize(ctx(), A.WRITE, A.RT_TOPIC, "t")
    b = auth(allow(A.RT_TOPIC, "t", A.WRITE), allow(A.RT_TOPIC, "t", A.ALTER_CONFIGS))
    assert b.authorize(ctx(), A.DESCRIBE, A.RT_TOPIC, "t")            # WRITE implies DESCRIBE
    assert b.authorize(ctx(), A.DESCRIBE_CONFIGS, A.RT_TOPIC, "t")    # ALTER_CONFIGS implies DESCRIBE_CONFIGS
    assert not b.authorize(ctx(), A.READ, A.RT_TOPIC, "t")
    c = auth(allow(A.RT_TOPIC, "t", A.ALL), deny(A.RT_TOPIC, "t", A.READ))
    assert c.authorize(ctx(), A.DESCRIBE, A.RT_TOPIC, "t")            # a DENY implies nothing
    d = auth(allow(A.RT_TOPIC, "t", A.READ), deny(A.RT_TOPIC, "t", A.ALL, pt=A.PREFIXED))
    assert not d.authorize(ctx(), A.READ, A.RT_TOPIC, "t")


def test_principals_hosts_super_users_and_no_acl_default():
    a = auth(allow(A.RT_TOPIC, "t", A.READ, principal="User:*", host="10.0.0.1"),
             super_users="User:admin;User:ops")
    assert a.authorize(ctx("anyone"), A.READ, A.RT_TOPIC, "t")
    assert not a.authorize(ctx("anyone", "10.0.0.2"), A.READ, A.RT_TOPIC, "t")
    assert a.authorize(ctx("ops"), A.DELETE, A.RT_CLUSTER, A.CLUSTER_NAME)
    assert not a.authorize(ctx(), A.READ, A.RT_TOPIC, "other")
    e = auth(allow(A.RT_TOPIC, "t", A.READ, principal="User:bob"), allow_if_no_acl=True)
    assert e.authorize(ctx(), A.READ, A.RT_TOPIC, "free")             # no ACL on the resource
    assert not e.authorize(ctx(), A.READ, A.RT_TOPIC, "t")            # ACLs exist, none for alice


def test_authorized_operations_and_by_resource_type():
    a = auth(allow(A.RT_GROUP, "g", A.READ), allow(A.RT_TOPIC, "p-", A.WRITE, pt=A.PREFIXED))
    assert a.authorized_operations(ctx(), A.RT_GROUP, "g") == (1 << A.READ) | (1 << A.DESCRIBE)
    assert a.authorize_by_resource_type(ctx(), A.WRITE, A.RT_TOPIC)
    assert not a.authorize_by_resource_type(ctx("bob"), A.WRITE, A.RT_TOPIC)
    b = auth(allow(A.RT_TOPIC, "p-x", A.WRITE), deny(A.RT_TOPIC, "p-", A.WRITE, pt=A.PREFIXED))
    assert not b.authorize_by_resource_type(ctx(), A.WRITE, A.RT_TOPIC)


def test_filters_and_validation():
    acl = allow(A.RT_TOPIC, "log-", A.READ, pt=A.PREFIXED)
    f = A.AclBindingFilter
    assert f(A.RT_ANY, None, A.PT_ANY, None, None, A.ANY, A.PERM_ANY).matches(acl)
    assert f(A.RT_TOPIC, "log-app", A.PT_MATCH, None, None, A.ANY, A.PERM_ANY).matches(acl)
    assert not f(A.RT_TOPIC, "log-app", A.LITERAL, None, None, A.ANY, A.PERM_ANY).matches(acl)
    assert not f(A.RT_TOPIC, None, A.PT_ANY, "User:bob", None, A.ANY, A.PERM_ANY).matches(acl)
    assert f(A.RT_UNKNOWN, None, A.PT_ANY, None, None, A.ANY, A.PERM_ANY).unknown_error() == "Resource type is UNKNOWN."
    assert A.validate_new_acl(allow(A.RT_CLUSTER, "x", A.ALTER)).startswith("The only valid name for the CLUSTER")
    assert A.validate_new_acl(allow(A.RT_TOPIC, "", A.READ)) == "Invalid empty resource name"
    assert A.validate_new_acl(allow(A.RT_TOPIC, "t", A.ANY)) == "Invalid operation ANY"
    assert A.validate_new_acl(allow(A.RT_TOPIC, "t", A.READ, pt=A.PT_MATCH)) == "Invalid patternType MATCH"
    assert "no colon" in A.validate_new_acl(allow(A.RT_TOPIC, "t", A.READ, principal="alice"))
    assert A.validate_new_acl(acl) is None
