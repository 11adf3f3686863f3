"""SASL/OAUTHBEARER (RFC 7628) with unsecured JWS tokens, for tests, as Kafka's
OAuthBearerSaslServer with OAuthBearerUnsecuredValidatorCallbackHandler: the token is
``base64url(header).base64url(claims).`` with ``"alg":"none"``; the principal is the
``unsecuredValidatorPrincipalClaimName`` claim (default ``sub``), ``exp`` (seconds) is required
and bounds the session (KIP-368's credential lifetime), ``iat`` may not be in the future, and
``unsecuredValidatorRequiredScope`` lists scopes the ``scope`` claim must hold. An invalid token
is answered with the RFC 7628 error JSON; the client's ``%x01`` then fails the exchange with it."""
from __future__ import annotations

import base64
import json
import re
import time

from .sasl import SaslAuthenticationError, SaslError

_SEP = "\x01"
_INITIAL = re.compile(r"n,(a=(?P<authzid>(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+))?," + _SEP
                      + r"(?P<kvpairs>([A-Za-z]+=[\x21-\x7E \t\r\n]+" + _SEP + r")*)" + _SEP + r"\Z")
_AUTH = re.compile(r"(?P<scheme>\w+) +(?P<token>[-_~+/.a-zA-Z0-9]+=*)\Z")


def _b64url(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def unsecured_token(principal: str, lifetime_s: int = 3600, scope=None, now: float | None = None) -> str:
    """A token OAuthBearerUnsecuredLoginCallbackHandler would make (for tests and our client)."""
    now = time.time() if now is None else now
    enc = lambda d: base64.urlsafe_b64encode(json.dumps(d).encode()).decode().rstrip("=")   # noqa: E731
    claims = {"sub": principal, "iat": now, "exp": now + lifetime_s}
    if scope:
        claims["scope"] = list(scope)
    return f"{enc({'alg': 'none'})}.{enc(claims)}."


def client_initial_response(token: str, authzid: str = "", extensions: dict | None = None) -> bytes:
    kv = "".join(f"{k}={v}{_SEP}" for k, v in (extensions or {}).items())
    return f"n,{'a=' + authzid if authzid else ''},{_SEP}auth=Bearer {token}{_SEP}{kv}{_SEP}".encode()


class UnsecuredOAuthBearerServer:
    def __init__(self, options: dict[str, str], clock=time.time):
        self.principal_claim = options.get("unsecuredValidatorPrincipalClaimName", "sub")
        self.scope_claim = options.get("unsecuredValidatorScopeClaimName", "scope")
        self.required_scope = [s for s in options.get("unsecuredValidatorRequiredScope", "").split() if s]
        self.skew_s = int(options.get("unsecuredValidatorAllowableClockSkewMs", "0") or 0) / 1000.0
        self.clock = clock
        self.complete = False
        self.authorization_id: str | None = None
        self.credential_lifetime_ms: int | None = None
        self._error: str | None = None

    def evaluate(self, response: bytes) -> bytes:
        if response == b"\x01" and self._error is not None:
            raise SaslAuthenticationError(self._error)
        self._error = None
        m = _INITIAL.match(response.decode("utf-8", "replace"))
        if m is None:
            raise SaslError("Invalid OAUTHBEARER client first message")
        pairs = dict(p.split("=", 1) for p in m.group("kvpairs").split(_SEP) if p)
        auth = _AUTH.match(pairs.pop("auth", ""))
        if auth is None or auth.group("scheme") != "Bearer":
            raise SaslError("Invalid OAUTHBEARER client first message: no Bearer token")
        status, principal, exp = self._validate(auth.group("token"))
        if status is not None:
            self._error = status
            return status.encode()
        authzid = (m.group("authzid") or "").replace("=2C", ",").replace("=3D", "=")
        if authzid and authzid != principal:
            raise SaslAuthenticationError(
                f"Authentication failed: Client requested an authorization id ({authzid}) that is different "
                f"from the token's principal name ({principal})")
        self.authorization_id = principal
        self.credential_lifetime_ms = int(exp * 1000 - self.clock() * 1000)
        self.complete = True
        return b""

    def _validate(self, token: str):
        invalid = '{"status":"invalid_token"}'
        parts = token.split(".")
        if len(parts) != 3 or parts[2]:
            return invalid, None, None
        try:
            header, claims = json.loads(_b64url(parts[0])), json.loads(_b64url(parts[1]))
        except ValueError:
            return invalid, None, None
        if not isinstance(header, dict) or header.get("alg") != "none" or not isinstance(claims, dict):
            return invalid, None, None
        principal, exp, iat = claims.get(self.principal_claim), claims.get("exp"), claims.get("iat")
        now = self.clock()
        if not isinstance(principal, str) or not principal.strip():
            return invalid, None, None
        if not isinstance(exp, (int, float)) or exp <= now - self.skew_s:
            return invalid, None, None
        if iat is not None and (not isinstance(iat, (int, float)) or iat > now + self.skew_s):
            return invalid, None, None
        scope = claims.get(self.scope_claim, [])
        scope = scope.split() if isinstance(scope, str) else list(scope or [])
        missing = [s for s in self.required_scope if s not in scope]
        if missing:
            return f'{{"status":"insufficient_scope", "scope":"{" ".join(self.required_scope)}"}}', None, None
        return None, principal, exp
