"""SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802 / RFC 7677) as Kafka's ``ScramSaslServer``,
``ScramFormatter`` and ``ScramMessages``; also the client side, for kgroup's own client and the
``kgroup configs --entity-type users`` tool (which salts the password itself, as
``kafka-configs.sh`` does before AlterUserScramCredentials)."""
from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
from typing import NamedTuple

from .sasl import SaslAuthenticationError, SaslError


class ScramMechanism(NamedTuple):
    mechanism_name: str
    hash_name: str
    type_code: int          # AlterUserScramCredentials / DescribeUserScramCredentials' mechanism byte
    min_iterations: int


SCRAM_SHA_256 = ScramMechanism("SCRAM-SHA-256", "sha256", 1, 4096)
SCRAM_SHA_512 = ScramMechanism("SCRAM-SHA-512", "sha512", 2, 4096)
MECHANISMS = {m.mechanism_name: m for m in (SCRAM_SHA_256, SCRAM_SHA_512)}
BY_TYPE = {m.type_code: m for m in (SCRAM_SHA_256, SCRAM_SHA_512)}
MAX_ITERATIONS = 16384      # ScramControlManager.MAX_ITERATIONS


class ScramCredential(NamedTuple):
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def _hmac(mech: ScramMechanism, key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, mech.hash_name).digest()


def salted_password(mech: ScramMechanism, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(mech.hash_name, password.encode(), salt, iterations)


def client_key(mech: ScramMechanism, salted: bytes) -> bytes:
    return _hmac(mech, salted, b"Client Key")


def stored_key(mech: ScramMechanism, ckey: bytes) -> bytes:
    return hashlib.new(mech.hash_name, ckey).digest()


def server_key(mech: ScramMechanism, salted: bytes) -> bytes:
    return _hmac(mech, salted, b"Server Key")


def credential_from_salted(mech: ScramMechanism, salt: bytes, salted: bytes, iterations: int) -> ScramCredential:
    """What the controller keeps of an upsertion (ScramControlManager.finishUpsertion)."""
    return ScramCredential(salt, stored_key(mech, client_key(mech, salted)), server_key(mech, salted), iterations)


def generate_credential(mech: ScramMechanism, password: str, iterations: int) -> ScramCredential:
    salt = os.urandom(mech_salt_len(mech))
    return credential_from_salted(mech, salt, salted_password(mech, password, salt, iterations), iterations)


def mech_salt_len(mech: ScramMechanism) -> int:
    return 32 if mech is SCRAM_SHA_256 else 64


def secure_nonce() -> str:
    """ScramFormatter.secureRandomString: printable, no commas."""
    return base64.b64encode(os.urandom(24)).decode().replace("=", "").replace("+", "-").replace("/", "_")


def username(sasl_name: str) -> str:
    """ScramFormatter.username: "=2C" is ",", "=3D" is "="; any other "=" is invalid."""
    name = sasl_name.replace("=2C", ",")
    if re.search(r"=(?!3D)", name):
        raise SaslError("Invalid username: " + sasl_name)
    return name.replace("=3D", "=")


def sasl_name(user: str) -> str:
    return user.replace("=", "=3D").replace(",", "=2C")


_VALUE = r"[\x01-\x2b\x2d-\x7f]+"     # printable without ','
_CLIENT_FIRST = re.compile(
    r"n,(a=(?P<authzid>" + _VALUE.replace("+", "*") + r"))?,(?P<bare>n=(?P<saslname>" + _VALUE
    + r"),r=(?P<nonce>" + _VALUE + r")(?P<extensions>(,[A-Za-z]+=" + _VALUE + r")*))\Z")
_CLIENT_FINAL = re.compile(r"(?P<without_proof>c=(?P<channel>[A-Za-z0-9+/=]+),r=(?P<nonce>" + _VALUE
                           + r")(?P<extensions>(,[A-Za-z]+=" + _VALUE + r")*)),p=(?P<proof>[A-Za-z0-9+/=]+)\Z")
_SERVER_FIRST = re.compile(r"(m=[^,]*,)?r=(?P<nonce>" + _VALUE + r"),s=(?P<salt>[A-Za-z0-9+/=]+),i=(?P<iterations>\d+)"
                           r"(,[A-Za-z]+=[^,]*)*\Z")
_SERVER_FINAL = re.compile(r"(e=(?P<error>[^,]*)|v=(?P<signature>[A-Za-z0-9+/=]+))(,[A-Za-z]+=[^,]*)*\Z")


class ScramServer:
    """One SCRAM exchange on the broker: client-first → server-first → client-final →
    server-final. ``lookup(user)`` gives the user's ScramCredential or None."""

    def __init__(self, mech: ScramMechanism, lookup):
        self.mech = mech
        self.lookup = lookup
        self.state = 0          # 0: client-first expected, 1: client-final expected, 2: complete, 3: failed
        self.authorization_id: str | None = None
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self._client_nonce = ""
        self._credential: ScramCredential | None = None
        self.token_authenticated = False

    @property
    def complete(self) -> bool:
        return self.state == 2

    def evaluate(self, token: bytes) -> bytes:
        try:
            if self.state == 0:
                return self._client_first(token)
            if self.state == 1:
                return self._client_final(token)
            raise SaslError(f"Unexpected challenge in Sasl server state {'COMPLETE' if self.state == 2 else 'FAILED'}")
        except SaslError:
            self.state = 3
            self._credential = None
            raise

    def _client_first(self, token: bytes) -> bytes:
        m = _CLIENT_FIRST.match(token.decode("utf-8", "replace"))
        if m is None:
            raise SaslError("Invalid SCRAM client first message format: " + token.decode("utf-8", "replace"))
        user = username(m.group("saslname"))
        extensions = dict(e.split("=", 1) for e in m.group("extensions").split(",") if e)
        if extensions.get("tokenauth", "false").lower() == "true":
            raise SaslError("Token Authentication failed: Invalid tokenId : " + user)   # no delegation tokens
        cred = self.lookup(user)
        if cred is None:
            raise SaslError("Authentication failed: Invalid user credentials")
        authzid = m.group("authzid") or ""
        if authzid and authzid != user:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username")
        if cred.iterations < self.mech.min_iterations:
            raise SaslError(f"Iterations {cred.iterations} is less than the minimum "
                            f"{self.mech.min_iterations} for {self.mech.mechanism_name}")
        self.authorization_id = user
        self._credential = cred
        self._client_first_bare = m.group("bare")
        self._client_nonce = m.group("nonce")
        self._nonce = self._client_nonce + secure_nonce()
        self._server_first = f"r={self._nonce},s={base64.b64encode(cred.salt).decode()},i={cred.iterations}"
        self.state = 1
        return self._server_first.encode()

    def _client_final(self, token: bytes) -> bytes:
        m = _CLIENT_FINAL.match(token.decode("utf-8", "replace"))
        if m is None:
            raise SaslError("Invalid SCRAM client final message format: " + token.decode("utf-8", "replace"))
        nonce = m.group("nonce")
        # Kafka 4.x compares the nonce exactly (RFC 5802). librdkafka before 2.6.1 sends the
        # client nonce once more in front of the server's (librdkafka#4895), which Kafka 3.8.1-3.9
        # accepted (an endsWith check); kgroup accepts exactly that form too, so Debian's kcat
        # (librdkafka 2.0.2) can log in: it still carries the whole server nonce.
        if nonce != self._nonce and nonce != self._client_nonce + self._nonce:
            raise SaslError("Invalid client nonce in the final client message.")
        cred = self._credential
        auth_message = f"{self._client_first_bare},{self._server_first},{m.group('without_proof')}".encode()
        signature = _hmac(self.mech, cred.stored_key, auth_message)
        try:
            proof = base64.b64decode(m.group("proof"), validate=True)
        except ValueError:
            raise SaslError("Invalid client credentials") from None
        if len(proof) != len(signature):
            raise SaslError("Invalid client credentials")
        computed = stored_key(self.mech, bytes(a ^ b for a, b in zip(proof, signature)))
        if not hmac.compare_digest(computed, cred.stored_key):
            raise SaslError("Invalid client credentials")
        server_signature = _hmac(self.mech, cred.server_key, auth_message)
        self._credential = None
        self.state = 2
        return b"v=" + base64.b64encode(server_signature)


class ScramClient:
    """The client side of one exchange (Kafka's ScramSaslClient)."""

    def __init__(self, mech: ScramMechanism, user: str, password: str):
        self.mech = mech
        self.user = user
        self.password = password
        self._nonce = secure_nonce()
        self._client_first_bare = f"n={sasl_name(user)},r={self._nonce}"
        self._expected_signature = b""
        self.state = 0

    def first(self) -> bytes:
        self.state = 1
        return ("n,," + self._client_first_bare).encode()

    def evaluate(self, challenge: bytes) -> bytes | None:
        text = challenge.decode("utf-8", "replace")
        if self.state == 1:
            m = _SERVER_FIRST.match(text)
            if m is None:
                raise SaslError("Invalid SCRAM server first message format: " + text)
            nonce = m.group("nonce")
            if not nonce.startswith(self._nonce):
                raise SaslError("Invalid server nonce: does not start with client nonce")
            iterations = int(m.group("iterations"))
            if iterations < self.mech.min_iterations:
                raise SaslError(f"Requested iterations {iterations} is less than the minimum "
                                f"{self.mech.min_iterations} for {self.mech.mechanism_name}")
            salt = base64.b64decode(m.group("salt"))
            salted = salted_password(self.mech, self.password, salt, iterations)
            without_proof = f"c=biws,r={nonce}"
            auth_message = f"{self._client_first_bare},{text},{without_proof}".encode()
            ckey = client_key(self.mech, salted)
            signature = _hmac(self.mech, stored_key(self.mech, ckey), auth_message)
            proof = bytes(a ^ b for a, b in zip(ckey, signature))
            self._expected_signature = _hmac(self.mech, server_key(self.mech, salted), auth_message)
            self.state = 2
            return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()
        if self.state == 2:
            m = _SERVER_FINAL.match(text)
            if m is None:
                raise SaslError("Invalid SCRAM server final message format: " + text)
            if m.group("error"):
                raise SaslAuthenticationError("Sasl authentication using " + self.mech.mechanism_name
                                              + " failed with error: " + m.group("error"))
            if not hmac.compare_digest(base64.b64decode(m.group("signature")), self._expected_signature):
                raise SaslError("Invalid server signature in server final message")
            self.state = 3
            return None
        raise SaslError("Unexpected SCRAM challenge")

    @property
    def complete(self) -> bool:
        return self.state == 3
