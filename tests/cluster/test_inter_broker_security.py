"""The inter-broker listener and the broker's client credentials, resolved and validated as Kafka
3.9's KafkaConfig and ChannelBuilders do (pure: no broker is started)."""
import ssl

import pytest

from kgroup.broker.config import BrokerConfig, ConfigError
from kgroup.broker.inter_broker import client_properties, client_security
from kgroup.testing.certs import TestCertificates

ZK = {"zookeeper.connect": "127.0.0.1:2181"}
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" '
              'password="broker-secret" user_broker="broker-secret" user_alice="alice-secret";')


def cfg(**kw):
    return BrokerConfig({k.replace("_", "."): str(v) for k, v in kw.items()})


def test_default_is_the_plaintext_listener():
    c = BrokerConfig({"listeners": "PLAINTEXT://:9092", **ZK})
    assert c.inter_broker_listener() == ("PLAINTEXT", "PLAINTEXT")
    assert client_properties(c) is None and client_security(c) is None


def test_listener_name_and_protocol_are_mutually_exclusive():
    with pytest.raises(ConfigError, match="Only one of inter.broker.listener.name and "
                                          "security.inter.broker.protocol should be set."):
        BrokerConfig({"listeners": "PLAINTEXT://:9092", "inter.broker.listener.name": "PLAINTEXT",
                      "security.inter.broker.protocol": "PLAINTEXT"})


def test_security_protocol_names_the_listener():
    c = BrokerConfig({"listeners": "PLAINTEXT://:9092,SSL://:9093", "security.inter.broker.protocol": "SSL",
                      "ssl.keystore.location": "/nonexistent.pem", **ZK})
    assert c.inter_broker_listener() == ("SSL", "SSL")
    with pytest.raises(ConfigError, match="Invalid security protocol `TLS` defined in security.inter.broker.protocol"):
        BrokerConfig({"listeners": "PLAINTEXT://:9092", "security.inter.broker.protocol": "TLS"})


def test_the_listener_must_be_advertised_in_a_cluster():
    # a cluster whose only listener is SASL_SSL and that names no inter-broker listener: Kafka's
    # default PLAINTEXT is not among its listeners
    base = {"listeners": "SASL_SSL://:9093", "ssl.keystore.location": "/k.pem",
            "sasl.enabled.mechanisms": "PLAIN"}
    with pytest.raises(ConfigError, match="inter.broker.listener.name must be a listener name defined in "
                                          "advertised.listeners. The valid options based on currently "
                                          "configured listeners are SASL_SSL"):
        BrokerConfig({**base, **ZK})
    BrokerConfig(base)      # a single node has no inter-broker traffic
    with pytest.raises(ConfigError, match="valid options .* are INTERNAL"):
        BrokerConfig({"listeners": "INTERNAL://:9092,EXTERNAL://:9093", "advertised.listeners": "INTERNAL://h:9092",
                      "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
                      "inter.broker.listener.name": "EXTERNAL", **ZK})
    with pytest.raises(ConfigError, match="Listener with name OTHER defined in inter.broker.listener.name not "
                                          "found in listener.security.protocol.map."):
        BrokerConfig({"listeners": "PLAINTEXT://:9092", "inter.broker.listener.name": "other"})


def test_sasl_mechanism_must_be_enabled():
    base = {"listeners": "SASL_PLAINTEXT://:9092", "inter.broker.listener.name": "SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN", "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS}
    with pytest.raises(ConfigError, match="sasl.mechanism.inter.broker.protocol must be included in "
                                          "sasl.enabled.mechanisms when SASL is used for inter-broker communication"):
        BrokerConfig(base)      # the default mechanism is GSSAPI
    c = BrokerConfig({**base, "sasl.mechanism.inter.broker.protocol": "PLAIN"})
    assert c.inter_broker_listener() == ("SASL_PLAINTEXT", "SASL_PLAINTEXT")
    props = client_properties(c)
    assert props == {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.jaas.config": PLAIN_JAAS}
    sec = client_security(c)
    assert (sec.mechanism, sec.username, sec.password) == ("PLAIN", "broker", "broker-secret")


def test_sasl_credentials_where_kafka_takes_them():
    scram = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="b" password="s";'
    base = {"listeners": "SASL_PLAINTEXT://:9092", "inter.broker.listener.name": "SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512", "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512"}
    # the JAAS config the listener's server side reads for the mechanism; a broker-wide
    # sasl.jaas.config is not a server's (JaasContext.loadServerContext ignores it)
    c = BrokerConfig({**base, "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": scram,
                      "sasl.jaas.config": scram.replace('"b"', '"other"')})
    assert (client_security(c).username, client_security(c).password) == ("b", "s")
    with pytest.raises(ConfigError, match="Could not find a 'KafkaServer' or "
                                          "'listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config' entry"):
        client_properties(BrokerConfig({**base, "sasl.jaas.config": scram}))
    # a PLAIN JAAS with only the users a listener accepts cannot log this broker in
    no_login = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_broker="x";'
    c = BrokerConfig({**base, "sasl.enabled.mechanisms": "PLAIN", "sasl.mechanism.inter.broker.protocol": "PLAIN",
                      "listener.name.sasl_plaintext.plain.sasl.jaas.config": no_login})
    with pytest.raises(ConfigError, match="must give username and password"):
        client_properties(c)
    oauth = BrokerConfig({**base, "sasl.enabled.mechanisms": "OAUTHBEARER",
                          "sasl.mechanism.inter.broker.protocol": "OAUTHBEARER"})
    with pytest.raises(ConfigError, match="sasl.mechanism.inter.broker.protocol=OAUTHBEARER is not supported"):
        client_properties(oauth)


def test_a_cluster_broker_fails_its_start_on_missing_credentials(tmp_path):
    """BrokerSecurity resolves the client side when zookeeper.connect is set: a bad setting is a
    start-up error, not a fetcher that never authenticates."""
    from kgroup.broker.security_setup import BrokerSecurity
    c = BrokerConfig({"listeners": "SASL_PLAINTEXT://:9092", "inter.broker.listener.name": "SASL_PLAINTEXT",
                      "sasl.enabled.mechanisms": "PLAIN", "sasl.mechanism.inter.broker.protocol": "PLAIN",
                      "listener.name.sasl_plaintext.plain.sasl.jaas.config":
                          'org.apache.kafka.common.security.plain.PlainLoginModule required user_b="x";', **ZK})
    with pytest.raises(ConfigError, match="username and password"):
        BrokerSecurity(c, str(tmp_path))


def test_tls_client_side_from_the_listener_keys(tmp_path):
    certs = TestCertificates.generate(str(tmp_path / "certs"))
    c = BrokerConfig({"listeners": "INTERNAL://:9092,CLIENTS://:9093",
                      "listener.security.protocol.map": "INTERNAL:SSL,CLIENTS:SSL",
                      "inter.broker.listener.name": "INTERNAL", "ssl.keystore.type": "PEM",
                      "ssl.keystore.location": "/broker-wide.pem",
                      "listener.name.internal.ssl.keystore.location": certs.server_keystore,
                      "listener.name.internal.ssl.truststore.location": certs.ca_cert,
                      "listener.name.internal.ssl.endpoint.identification.algorithm": "",
                      "listener.name.internal.ssl.enabled.protocols": "TLSv1.3", **ZK})
    props = client_properties(c)
    assert props["security.protocol"] == "SSL"
    assert props["ssl.keystore.location"] == certs.server_keystore     # the listener's override wins
    assert props["ssl.truststore.location"] == certs.ca_cert
    assert props["ssl.endpoint.identification.algorithm"] == ""
    ctx = client_security(c).ssl_context
    assert ctx.verify_mode == ssl.CERT_REQUIRED and not ctx.check_hostname
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_3      # the listener's TLS versions, client side too
    # Kafka's default ssl.endpoint.identification.algorithm=https verifies the peer's host name
    c2 = BrokerConfig({"listeners": "SSL://:9093", "security.inter.broker.protocol": "SSL",
                       "ssl.keystore.location": certs.server_keystore, "ssl.truststore.location": certs.ca_cert, **ZK})
    assert client_security(c2).ssl_context.check_hostname
    bad = BrokerConfig({"listeners": "SSL://:9093", "security.inter.broker.protocol": "SSL",
                        "ssl.keystore.location": certs.server_keystore,
                        "ssl.truststore.location": str(tmp_path / "missing.pem"), **ZK})
    with pytest.raises(ConfigError, match="inter-broker listener SSL"):
        client_security(bad)


def test_zookeeper_tls_and_secure_acls_are_refused():
    with pytest.raises(ConfigError, match="zookeeper.set.acl is true, but ZooKeeper client TLS configuration"):
        BrokerConfig({**ZK, "zookeeper.set.acl": "true"})
    BrokerConfig({**ZK, "zookeeper.set.acl": "false"})
    with pytest.raises(ConfigError, match="zookeeper.ssl.client.enable=true: TLS to ZooKeeper is not supported"):
        BrokerConfig({**ZK, "zookeeper.ssl.client.enable": "true"})
    with pytest.raises(ConfigError, match="zookeeper.ssl.keystore.location: TLS to ZooKeeper is not supported"):
        BrokerConfig({**ZK, "zookeeper.ssl.keystore.location": "/k.jks"})
    with pytest.raises(ConfigError, match="zookeeper.clientCnxnSocket: TLS to ZooKeeper"):
        BrokerConfig({**ZK, "zookeeper.clientCnxnSocket": "org.apache.zookeeper.ClientCnxnSocketNetty"})
