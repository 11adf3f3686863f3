"""``kgroup acls`` and ``kgroup configs --entity-type users`` as kafka-acls.sh / kafka-configs.sh,
run as the CLI runs them, against a broker with ACLs; ACLs and SCRAM credentials survive a
restart (durable in the metadata directory)."""
from __future__ import annotations

import pytest

from kgroup.cli import main
from kgroup.protocol.errors import ErrorCode
from kgroup.client.security import SaslAuthenticationError
from kgroup.testing.broker import KafkaBroker

USERS = {"admin": "admin-secret"}


@pytest.fixture
def secure(tmp_path):
    with KafkaBroker(tmp_path / "data", security=True, users=USERS,
                     overrides={"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                                "super.users": "User:admin"}) as b:
        yield b


def _admin_properties(secure, tmp_path) -> str:
    path = tmp_path / "admin.properties"
    cfg = secure.security_config("SASL_SSL", "admin", "SCRAM-SHA-512")
    cfg.pop("bootstrap.servers")
    path.write_text("".join(f"{k}={v}\n" for k, v in cfg.items()))
    return str(path)


def test_scram_user_and_acls_end_to_end(secure, tmp_path, capsys):
    props = _admin_properties(secure, tmp_path)
    bootstrap = secure.bootstrap("SASL_SSL")
    assert main(["configs", "--bootstrap-server", bootstrap, "--command-config", props, "--alter",
                 "--entity-type", "users", "--entity-name", "carol",
                 "--add-config", "SCRAM-SHA-512=[iterations=8192,password=carol-secret]"]) == 0
    assert "Completed updating config for user carol." in capsys.readouterr().out
    assert main(["configs", "--bootstrap-server", bootstrap, "--command-config", props, "--describe",
                 "--entity-type", "users", "--entity-name", "carol"]) == 0
    assert "SCRAM credential configs for user-principal 'carol' are SCRAM-SHA-512=iterations=8192" in \
        capsys.readouterr().out
    from kgroup.client.admin import NewTopic
    from kgroup.client.sync import KafkaAdmin
    with KafkaAdmin(secure.security_config("SASL_SSL", "admin", "SCRAM-SHA-512")) as admin:
        assert admin.create_topics([NewTopic("orders", 1, -1, {})]) == {"orders": None}
    carol = secure.security_config("SASL_SSL", "carol", "SCRAM-SHA-512", password="carol-secret")
    # authenticated, but not authorized yet: the write is refused
    with pytest.raises(Exception) as e:
        secure.produce("orders", [b"x"], **{**carol, "max.block.ms": 3000, "delivery.timeout.ms": 3000,
                                            "request.timeout.ms": 2000})
    # Metadata answers TOPIC_AUTHORIZATION_FAILED for it: the producer fails at once, as Java's
    # raises TopicAuthorizationException
    assert e.value.code == ErrorCode.TOPIC_AUTHORIZATION_FAILED and "Not authorized to access topics: [orders]" in str(e.value)
    assert main(["acls", "--bootstrap-server", bootstrap, "--command-config", props, "--add",
                 "--allow-principal", "User:carol", "--producer", "--topic", "orders"]) == 0
    out = capsys.readouterr().out
    assert "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`" in out
    assert "(principal=User:carol, host=*, operation=WRITE, permissionType=ALLOW)" in out
    assert main(["acls", "--bootstrap-server", bootstrap, "--command-config", props, "--add",
                 "--allow-principal", "User:carol", "--consumer", "--topic", "orders", "--group", "cg",
                 "--resource-pattern-type", "prefixed"]) == 0
    capsys.readouterr()
    assert len(secure.produce("orders", [b"a", b"b"], **carol)) == 2
    # consumer ACLs are PREFIXED on "orders" and "cg": a group named cg-1 matches
    got = secure.consume("orders", 2, group="cg-1", **carol)
    assert [r.value for r in got] == [b"a", b"b"]

    secure.restart()        # ACLs and credentials are durable
    assert main(["acls", "--bootstrap-server", bootstrap, "--command-config", props, "--list",
                 "--topic", "orders"]) == 0
    out = capsys.readouterr().out
    assert "operation=WRITE" in out and "operation=CREATE" in out
    assert len(secure.produce("orders", [b"c"], **carol)) == 1

    assert main(["acls", "--bootstrap-server", bootstrap, "--command-config", props, "--remove",
                 "--topic", "orders", "--resource-pattern-type", "literal"]) == 0
    capsys.readouterr()
    assert main(["configs", "--bootstrap-server", bootstrap, "--command-config", props, "--alter",
                 "--entity-type", "users", "--entity-name", "carol", "--delete-config", "SCRAM-SHA-512"]) == 0
    with pytest.raises(SaslAuthenticationError):
        secure.produce("orders", [b"x"], **carol)


def test_acls_refused_without_cluster_alter(secure, tmp_path, capsys):
    """An authenticated user without ALTER on the cluster cannot add ACLs (CLUSTER_AUTHORIZATION_FAILED)."""
    path = tmp_path / "nobody.properties"
    from kgroup.security import scram
    salted = scram.salted_password(scram.SCRAM_SHA_512, "dave-secret", b"s" * 16, 4096)
    secure.call(lambda b: b.security.credentials.alter([], [("dave", 2, 4096, b"s" * 16, salted)]))
    cfg = secure.security_config("SASL_PLAINTEXT", "dave", "SCRAM-SHA-512", password="dave-secret")
    cfg.pop("bootstrap.servers")
    path.write_text("".join(f"{k}={v}\n" for k, v in cfg.items()))
    assert main(["acls", "--bootstrap-server", secure.bootstrap("SASL_PLAINTEXT"), "--command-config", str(path),
                 "--add", "--allow-principal", "User:dave", "--operation", "All", "--cluster"]) == 1
    assert "Cluster authorization failed." in capsys.readouterr().err
