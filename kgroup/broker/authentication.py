"""SASL on a connection, as Kafka's SaslServerAuthenticator: the state machine a SASL listener's
connection goes through before its requests reach the handlers, and re-authentication (KIP-368).

A connection of a SASL listener starts with a ``SaslGate``; the server hands it every frame
(``KafkaConnection.gate``; None on other listeners and once a session can no longer expire, so
the usual path costs one None test). Until the client is authenticated only ApiVersions,
SaslHandshake and SaslAuthenticate are processed; anything else closes the connection, as
Kafka's ``handleKafkaRequest`` ("Unexpected Kafka request of type X during SASL handshake").
SaslHandshake v0 switches to raw SASL tokens (size-prefixed, no Kafka header); v1 wraps each
token in SaslAuthenticate (KIP-152). A failed exchange is answered (UNSUPPORTED_SASL_MECHANISM,
SASL_AUTHENTICATION_FAILED with Kafka's message, ILLEGAL_SASL_STATE) and the connection closed.
With ``connections.max.reauth.ms`` the session lasts that long (SaslAuthenticate v1+'s
session_lifetime_ms); a request after it expires closes the connection unless it is the
SaslHandshake that starts re-authentication, which must keep the mechanism and the principal."""
from __future__ import annotations

import logging
import struct
import time

from ..protocol.api import ApiKey, encode_response, parse_request, peek_key_version
from ..protocol.errors import ErrorCode
from ..protocol.messages.sasl_authenticate import SaslAuthenticateResponse
from ..protocol.messages.sasl_handshake import SaslHandshakeResponse
from ..protocol.primitives import DecodeError
from ..security.principal import USER_TYPE, KafkaPrincipal
from .handlers import HANDLER_BY_KEY_VERSION
from ..security.sasl import SaslAuthenticationError, SaslError, failure_message

log = logging.getLogger("kgroup.server")
_SIZE = struct.Struct(">i")

# states
HANDSHAKE_OR_VERSIONS, HANDSHAKE, AUTHENTICATE, COMPLETE = range(4)


class SaslGate:
    __slots__ = ("sasl", "state", "mechanism", "server", "raw_tokens", "principal", "expires_at",
                 "reauth_supported", "reauthenticating")

    def __init__(self, sasl):
        self.sasl = sasl                 # the listener's ListenerSasl (security_setup.py)
        self.state = HANDSHAKE_OR_VERSIONS
        self.mechanism: str | None = None
        self.server = None
        self.raw_tokens = False          # SaslHandshake v0: tokens without Kafka headers
        self.principal: KafkaPrincipal | None = None
        self.expires_at: float | None = None     # time.monotonic() the session ends, if it does
        self.reauth_supported = False    # the client used SaslAuthenticate v1+
        self.reauthenticating = False

    def intercept(self, conn, frame) -> bool:
        """Handle ``frame`` if it is part of authentication (or must close the connection);
        False to let the connection dispatch it as a request."""
        if self.state == COMPLETE:
            return self._authenticated(conn, frame)
        if self.state == AUTHENTICATE and self.raw_tokens:
            self._raw_token(conn, bytes(frame))
            return True
        try:
            api_key, version = peek_key_version(frame)
        except DecodeError as e:
            conn.close(f"invalid request during SASL authentication: {e}")
            return True
        if self.state == AUTHENTICATE:
            if api_key != ApiKey.SASL_AUTHENTICATE:
                # Kafka answers the request with ILLEGAL_SASL_STATE (its getErrorResponse), then
                # closes; a request whose error answer cannot be built is closed unanswered
                self._illegal_state_answer(conn, frame, api_key, version)
                conn.close_after_failed_authentication(
                    f"ILLEGAL_SASL_STATE: Unexpected Kafka request of type {_name(api_key)} during SASL authentication.")
                return True
            self._authenticate(conn, frame, version)
            return True
        if api_key == ApiKey.API_VERSIONS and self.state == HANDSHAKE_OR_VERSIONS and not self.reauthenticating:
            # the ApiVersions handler answers it; a version it does not serve is answered
            # UNSUPPORTED_VERSION and may be retried lower (handleApiVersionsRequest)
            if (api_key, version) in HANDLER_BY_KEY_VERSION:
                self.state = HANDSHAKE
            return False
        if api_key == ApiKey.SASL_HANDSHAKE:
            self._handshake(conn, frame, version)
            return True
        conn.close(f"Unexpected Kafka request of type {_name(api_key)} during SASL handshake.")
        return True

    # -- the exchange --------------------------------------------------------------------------
    def _parse(self, conn, frame, key_version):
        try:
            return parse_request(frame, key_version)
        except (DecodeError, KeyError) as e:
            conn.close(f"cannot decode SASL request: {e}")
            return None, None

    def _handshake(self, conn, frame, version):
        if version > 1:
            conn.close(f"UNSUPPORTED_VERSION: SaslHandshake version {version}")
            return
        header, req = self._parse(conn, frame, (ApiKey.SASL_HANDSHAKE, version))
        if header is None:
            return
        enabled = self.sasl.mechanisms
        mech = req.mechanism
        if mech not in enabled or (self.reauthenticating and mech != self.mechanism):
            resp = SaslHandshakeResponse(error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms=list(enabled))
            conn.send_direct(encode_response(ApiKey.SASL_HANDSHAKE, version, header.correlation_id, resp))
            reason = (f"SASL mechanism '{mech}' requested by client is not supported for re-authentication "
                      f"of mechanism '{self.mechanism}'" if self.reauthenticating and mech in enabled
                      else f"Unsupported SASL mechanism {mech}")
            conn.close_after_failed_authentication(reason)
            return
        self.mechanism = mech
        self.server = self.sasl.new_server(mech)
        self.raw_tokens = version == 0
        self.state = AUTHENTICATE
        conn.send_direct(encode_response(ApiKey.SASL_HANDSHAKE, version, header.correlation_id,
                                         SaslHandshakeResponse(error_code=0, mechanisms=list(enabled))))

    def _authenticate(self, conn, frame, version):
        if version > 2:
            conn.close(f"Version {version} is not supported for apiKey SASL_AUTHENTICATE")
            return
        header, req = self._parse(conn, frame, (ApiKey.SASL_AUTHENTICATE, version))
        if header is None:
            return
        if version > 0:
            self.reauth_supported = True
        try:
            token = self.server.evaluate(req.auth_bytes)
            principal = self._completed_principal()
        except SaslError as e:
            msg = failure_message(self.mechanism, e, self.reauthenticating)
            resp = SaslAuthenticateResponse(error_code=ErrorCode.SASL_AUTHENTICATION_FAILED, error_message=msg,
                                            auth_bytes=b"")
            conn.send_direct(encode_response(ApiKey.SASL_AUTHENTICATE, version, header.correlation_id, resp))
            conn.close_after_failed_authentication(f"SASL authentication failed ({self.mechanism}): {e}")
            return
        lifetime = 0
        if principal is not None:
            lifetime = self._complete(conn, principal)
        resp = SaslAuthenticateResponse(error_code=0, error_message=None, auth_bytes=token or b"",
                                        session_lifetime_ms=lifetime)
        conn.send_direct(encode_response(ApiKey.SASL_AUTHENTICATE, version, header.correlation_id, resp))

    def _raw_token(self, conn, token: bytes):
        try:
            out = self.server.evaluate(token)
            principal = self._completed_principal()
        except SaslError as e:
            conn.close_after_failed_authentication(f"SASL authentication failed ({self.mechanism}): {e}")
            return
        if out is not None:
            conn.send_direct([_SIZE.pack(len(out)), out])
        if principal is not None:
            self._complete(conn, principal)

    def _completed_principal(self) -> KafkaPrincipal | None:
        if not self.server.complete:
            return None
        principal = KafkaPrincipal(USER_TYPE, self.server.authorization_id)
        if self.reauthenticating and principal != self.principal:
            raise SaslAuthenticationError(
                f"Cannot change principals during re-authentication from {self.principal.principal_type}."
                f"{self.principal.name}: {principal.principal_type}.{principal.name}")
        return principal

    def _complete(self, conn, principal) -> int:
        """The exchange succeeded: the connection's principal, and its session lifetime (ms)."""
        self.principal = principal
        conn.principal = principal
        self.state = COMPLETE
        self.reauthenticating = False
        server, self.server = self.server, None
        # ReauthInfo.calcCompletionTimesAndReturnSessionLifetimeMs: the smaller of
        # connections.max.reauth.ms and the credential's own remaining lifetime (OAUTHBEARER).
        max_reauth = self.sasl.max_reauth_ms(self.mechanism)
        credential_ms = getattr(server, "credential_lifetime_ms", None)
        lifetime_ms = max(max_reauth, 0)
        if credential_ms is not None:
            credential_ms = max(credential_ms, 0)
            lifetime_ms = credential_ms if lifetime_ms == 0 else min(lifetime_ms, credential_ms)
        if lifetime_ms > 0 or credential_ms == 0:
            self.expires_at = time.monotonic() + lifetime_ms / 1000.0
        else:
            self.expires_at = None
            conn.gate = None             # nothing more to check on this connection
        return lifetime_ms

    @staticmethod
    def _illegal_state_answer(conn, frame, api_key, version):
        if (api_key, version) not in HANDLER_BY_KEY_VERSION:
            return
        from .faults import FaultError, error_response
        try:
            header, body = parse_request(frame, (api_key, version))
            resp = error_response(api_key, version, body, ErrorCode.ILLEGAL_SASL_STATE)
        except (DecodeError, FaultError):
            return
        conn.send_direct(encode_response(api_key, version, header.correlation_id, resp))

    # -- an authenticated connection whose session can expire -----------------------------------
    def _authenticated(self, conn, frame) -> bool:
        try:
            api_key, version = peek_key_version(frame)
        except DecodeError:
            return False
        if api_key == ApiKey.SASL_HANDSHAKE and self.reauth_supported:
            self.reauthenticating = True
            self.state = HANDSHAKE
            self._handshake(conn, frame, version)
            return True
        if self.expires_at is not None and time.monotonic() > self.expires_at:
            conn.close("the SASL session expired without re-authentication (connections.max.reauth.ms)")
            return True
        return False


def _name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return str(api_key)
