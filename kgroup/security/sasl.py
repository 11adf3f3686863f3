"""What a SASL mechanism raises. As Kafka's server: a ``SaslAuthenticationError`` carries a
message the client may see; any other ``SaslError`` is answered with the generic
"Authentication failed during authentication due to invalid credentials with SASL mechanism M"
so nothing about the user's existence leaks (SaslServerAuthenticator.handleSaslToken)."""
from __future__ import annotations


class SaslError(Exception):
    pass


class SaslAuthenticationError(SaslError):
    """Its message goes to the client as is."""


def failure_message(mechanism: str, exc: SaslError, reauthenticating: bool = False) -> str:
    if isinstance(exc, SaslAuthenticationError):
        return str(exc)
    what = "re-authentication" if reauthenticating else "authentication"
    return f"Authentication failed during {what} due to invalid credentials with SASL mechanism {mechanism}"
