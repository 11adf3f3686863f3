"""KIP-368 re-authentication (connections.max.reauth.ms) and OAUTHBEARER with unsecured tokens."""
from __future__ import annotations

import asyncio
import time

import pytest

from kgroup.client.config import AdminConfig
from kgroup.client.connection import BrokerConnection
from kgroup.client.errors import KafkaConnectionError
from kgroup.client.security import ClientSecurity, SaslAuthenticationError
from kgroup.protocol.messages.metadata import MetadataRequest
from kgroup.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from kgroup.protocol.messages.sasl_handshake import SaslHandshakeRequest
from kgroup.security.oauthbearer import client_initial_response, unsecured_token
from kgroup.testing.broker import KafkaBroker

USERS = {"alice": "alice-secret", "bob": "bob-secret"}
REAUTH_MS = 1500


@pytest.fixture(scope="module")
def secure(tmp_path_factory):
    with KafkaBroker(tmp_path_factory.mktemp("reauth") / "data", security=True, users=USERS,
                     overrides={"connections.max.reauth.ms": str(REAUTH_MS)}) as b:
        yield b


async def _connect(secure, user, mechanism="SCRAM-SHA-256"):
    sec = ClientSecurity(AdminConfig(secure.security_config("SASL_PLAINTEXT", user, mechanism)))
    conn = BrokerConnection("127.0.0.1", secure.port_of("SASL_PLAINTEXT"), node_id=1, client_id="reauth",
                            security=sec)
    await conn.connect()
    return conn, sec


def test_session_lifetime_expiry_and_reauthentication(secure):
    async def run():
        conn, sec = await _connect(secure, "alice")
        # SaslAuthenticate v1+ told the client its session lifetime; re-authenticate within it
        await asyncio.sleep(REAUTH_MS / 2000)
        await sec.authenticate(conn)
        await asyncio.sleep(REAUTH_MS / 2000 + 0.3)     # past the first session's end, inside the second
        assert (await conn.send(MetadataRequest(topics=[]), version=1)).brokers
        # a different principal may not take over the connection
        bob = ClientSecurity(AdminConfig(secure.security_config("SASL_PLAINTEXT", "bob", "SCRAM-SHA-256")))
        with pytest.raises(SaslAuthenticationError, match="Cannot change principals during re-authentication"):
            await bob.authenticate(conn)
        conn.close()
        # without re-authentication the broker closes the connection at its next request
        conn, _ = await _connect(secure, "alice")
        await asyncio.sleep(REAUTH_MS / 1000 + 0.3)
        with pytest.raises(KafkaConnectionError):
            await conn.send(MetadataRequest(topics=[]), version=1)
    asyncio.run(run())


def test_oauthbearer_unsecured_tokens(secure):
    async def run(token, expect_ok):
        conn = BrokerConnection("127.0.0.1", secure.port_of("SASL_PLAINTEXT"), node_id=1, client_id="oauth")
        await conn.connect()
        try:
            hs = await conn.send(SaslHandshakeRequest(mechanism="OAUTHBEARER"), version=1)
            assert hs.error_code == 0 and "OAUTHBEARER" in hs.mechanisms
            resp = await conn.send(SaslAuthenticateRequest(auth_bytes=client_initial_response(token)), version=2)
            if expect_ok:
                assert resp.error_code == 0
                assert 0 < resp.session_lifetime_ms <= REAUTH_MS      # min(max.reauth, the token's lifetime)
                assert (await conn.send(MetadataRequest(topics=[]), version=1)).brokers
                got = secure.call(lambda b: {str(c.principal) for c in b.connections if c.listener.name == "SASL_PLAINTEXT"})
                assert "User:carol" in got
            else:
                assert resp.error_code == 0 and resp.auth_bytes == b'{"status":"invalid_token"}'
                resp = await conn.send(SaslAuthenticateRequest(auth_bytes=b"\x01"), version=2)
                assert resp.error_code == 58 and resp.error_message == '{"status":"invalid_token"}'
        finally:
            conn.close()
    asyncio.run(run(unsecured_token("carol", 3600), True))
    asyncio.run(run(unsecured_token("carol", -10, now=time.time()), False))


def test_confluent_kafka_oauthbearer(secure):
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": secure.bootstrap("SASL_PLAINTEXT"), "security.protocol": "sasl_plaintext",
                  "sasl.mechanisms": "OAUTHBEARER", "enable.sasl.oauthbearer.unsecure.jwt": True,
                  "sasl.oauthbearer.config": "principal=erin scope=any lifeSeconds=3600"})
    md = p.list_topics(timeout=10)
    assert md.brokers
