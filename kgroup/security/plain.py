"""SASL/PLAIN (RFC 4616) as Kafka's ``PlainSaslServer`` with its default callback handler
(``PlainServerCallbackHandler``): the users are the ``user_<name>="<password>"`` options of the
listener's ``PlainLoginModule`` JAAS config."""
from __future__ import annotations

import hmac

from .sasl import SaslAuthenticationError, SaslError


def plain_users(jaas_options: dict[str, str]) -> dict[str, str]:
    return {k[5:]: v for k, v in jaas_options.items() if k.startswith("user_")}


class PlainServer:
    def __init__(self, users: dict[str, str]):
        self.users = users
        self.complete = False
        self.authorization_id: str | None = None

    def evaluate(self, token: bytes) -> bytes:
        if self.complete:
            raise SaslError("Unexpected challenge in Sasl server state COMPLETE")
        text = token.decode("utf-8", "replace")
        tokens = text.split("\0", 3)
        if len(tokens) != 3:
            raise SaslAuthenticationError(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(tokens)}")
        authzid, user, password = tokens
        if not user:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified")
        expected = self.users.get(user)
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            raise SaslAuthenticationError("Authentication failed: Invalid username or password")
        if authzid and authzid != user:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username")
        self.authorization_id = user
        self.complete = True
        return b""


def plain_client_token(user: str, password: str) -> bytes:
    return f"\0{user}\0{password}".encode()
