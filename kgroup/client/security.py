"""The client's TLS and SASL, configured with the Java client's keys: ``security.protocol``
(PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL), ``ssl.truststore.*`` / ``ssl.keystore.*`` in PEM form,
``ssl.endpoint.identification.algorithm``, ``sasl.mechanism`` (PLAIN, SCRAM-SHA-256,
SCRAM-SHA-512) and ``sasl.jaas.config`` (``PlainLoginModule`` / ``ScramLoginModule`` with
``username`` and ``password``). ``authenticate`` runs SaslHandshake v1 + SaslAuthenticate on a
fresh connection, as Java's SaslClientAuthenticator."""
from __future__ import annotations

import os
import ssl
import tempfile

from kgroup.protocol.errors import ErrorCode, KafkaError
from kgroup.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from kgroup.protocol.messages.sasl_handshake import SaslHandshakeRequest
from kgroup.security import scram
from kgroup.security.jaas import login_options
from kgroup.security.plain import plain_client_token

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


class SaslAuthenticationError(KafkaError):
    """Java's SaslAuthenticationException: not retriable."""

    def __init__(self, message: str):
        super().__init__(ErrorCode.SASL_AUTHENTICATION_FAILED, message)


class ClientSecurity:
    def __init__(self, config):
        protocol = str(config.get("security.protocol") or "PLAINTEXT").upper()
        if protocol not in PROTOCOLS:
            raise ValueError(f"Invalid value {protocol} for configuration security.protocol")
        self.protocol = protocol
        self.ssl_context = _ssl_context(config) if protocol in ("SSL", "SASL_SSL") else None
        self.mechanism = None
        if protocol.startswith("SASL_"):
            self.mechanism = str(config.get("sasl.mechanism") or "GSSAPI").upper()
            if self.mechanism not in MECHANISMS:
                raise ValueError(f"sasl.mechanism={self.mechanism} is not supported by kgroup's client "
                                 f"({', '.join(MECHANISMS)})")
            options = login_options(config.get("sasl.jaas.config"))
            if "username" not in options or "password" not in options:
                raise ValueError("sasl.jaas.config must give username and password")
            self.username, self.password = options["username"], options["password"]

    @property
    def enabled(self) -> bool:
        return self.protocol != "PLAINTEXT"

    async def authenticate(self, conn) -> None:
        """SaslHandshake v1 then SaslAuthenticate until the mechanism completes."""
        resp = await conn.send(SaslHandshakeRequest(mechanism=self.mechanism), version=1)
        if resp.error_code:
            raise KafkaError(ErrorCode(resp.error_code),
                             f"SASL mechanism {self.mechanism} not enabled by the broker; enabled: {resp.mechanisms}")
        version = conn.api_version(36)
        if self.mechanism == "PLAIN":
            await self._exchange(conn, version, plain_client_token(self.username, self.password))
            return
        client = scram.ScramClient(scram.MECHANISMS[self.mechanism], self.username, self.password)
        token = client.first()
        while True:
            challenge = await self._exchange(conn, version, token)
            token = client.evaluate(challenge)
            if client.complete:
                return
            if token is None:
                raise SaslAuthenticationError("SCRAM exchange ended early")

    @staticmethod
    async def _exchange(conn, version: int, token: bytes) -> bytes:
        resp = await conn.send(SaslAuthenticateRequest(auth_bytes=token), version=version)
        if resp.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED:
            raise SaslAuthenticationError(resp.error_message or "SASL authentication failed")
        if resp.error_code:
            raise KafkaError(ErrorCode(resp.error_code), resp.error_message or "")
        return resp.auth_bytes


def _pem_file(text: str) -> str:
    fd, path = tempfile.mkstemp(prefix="kgroup-client-", suffix=".pem")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return path


def _ssl_context(config) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    cafile, cadata = config.get("ssl.truststore.location"), config.get("ssl.truststore.certificates")
    if cafile or cadata:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        if cafile:
            ctx.load_verify_locations(cafile=cafile)
        if cadata:
            ctx.load_verify_locations(cadata=cadata)
    ctx.check_hostname = bool(config.get("ssl.endpoint.identification.algorithm") or "")
    password = config.get("ssl.key.password") or config.get("ssl.keystore.password")
    location = config.get("ssl.keystore.location")
    chain, key = config.get("ssl.keystore.certificate.chain"), config.get("ssl.keystore.key")
    if chain and key:
        paths = [_pem_file(chain), _pem_file(key)]
        try:
            ctx.load_cert_chain(paths[0], paths[1], password=password)
        finally:
            for p in paths:
                os.unlink(p)
    elif location:
        ctx.load_cert_chain(location, password=password)
    return ctx
