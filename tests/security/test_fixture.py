"""kgroup.testing's ``kafka_broker_secure`` fixture, as a user's test would use it."""
import pytest

from kgroup.protocol.errors import KafkaError


@pytest.mark.kafka_broker_config({"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                                  "super.users": "User:admin;User:ANONYMOUS"})
def test_secure_fixture(kafka_broker_secure):
    b = kafka_broker_secure
    b.create_topic("orders")
    admin = b.security_config("SASL_SSL", "admin", "SCRAM-SHA-512")
    assert len(b.produce("orders", [b"1"], **admin)) == 1
    alice = b.security_config("SASL_SSL", "alice", "SCRAM-SHA-256")
    with pytest.raises(KafkaError):     # authenticated, not authorized
        b.consume("orders", 1, group="g", timeout=3, **alice)
    # the mutual-TLS principal is the client certificate's name; grant it READ on the topic
    from kgroup.security import acl as A
    cert_principal = "User:CN=client,OU=test,O=kgroup"
    b.call(lambda br: br.security.acls.create([A.AclBinding(A.RT_TOPIC, "orders", A.LITERAL, cert_principal, "*",
                                                            A.READ, A.ALLOW)]))
    assert [r.value for r in b.consume("orders", 1, **b.security_config("SSL"))] == [b"1"]
