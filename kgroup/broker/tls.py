"""TLS for SSL and SASL_SSL listeners with the stdlib ``ssl`` module, configured by Kafka's keys
(``ssl.keystore.*`` / ``ssl.truststore.*`` in their PEM form, ``ssl.client.auth``,
``ssl.enabled.protocols``, ``ssl.cipher.suites``), each also settable per listener as
``listener.name.<listener>.ssl.*``; and a TLS client's principal from its certificate, as Kafka's
DefaultKafkaPrincipalBuilder with ``ssl.principal.mapping.rules``."""
from __future__ import annotations

import os
import re
import ssl
import tempfile

from ..security.principal import ANONYMOUS, USER_TYPE, KafkaPrincipal, SslPrincipalMapper, rfc2253_name
from .config import BrokerConfig, ConfigError

_PROTOCOLS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3,
              "TLSv1.1": ssl.TLSVersion.TLSv1_1, "TLSv1": ssl.TLSVersion.TLSv1}
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


def openssl_cipher_name(iana: str) -> str:
    """An IANA (Java) TLS 1.2 suite name as OpenSSL's, e.g. TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256
    -> ECDHE-RSA-AES128-GCM-SHA256; a name without "_WITH_" is taken as OpenSSL's already."""
    m = re.fullmatch(r"TLS_(\w+?)_WITH_(\w+)", iana.strip())
    if not m:
        return iana.strip()
    kx, enc = m.groups()
    kx = {"RSA": "", "ECDHE_RSA": "ECDHE-RSA", "ECDHE_ECDSA": "ECDHE-ECDSA", "DHE_RSA": "DHE-RSA"}.get(kx, kx.replace("_", "-"))
    enc = re.sub(r"AES_(\d+)", r"AES\1", enc)
    enc = enc.replace("CHACHA20_POLY1305", "CHACHA20-POLY1305").replace("_", "-")
    if kx == "":
        return enc
    return f"{kx}-{enc}"


def _write_temp(text: str) -> str:
    fd, path = tempfile.mkstemp(prefix="kgroup-tls-", suffix=".pem")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return path


def server_context(config: BrokerConfig, listener: str) -> ssl.SSLContext:
    """The listener's server-side context, from its keystore (key + chain), truststore (the CAs
    that sign client certificates) and ssl.client.auth."""
    get = lambda key: config.for_listener(listener, key)     # noqa: E731
    for key in ("ssl.keystore.type", "ssl.truststore.type"):
        kind = (get(key) or "PEM").upper()
        location = get("ssl.keystore.location" if "keystore" in key else "ssl.truststore.location")
        inline = get("ssl.keystore.key" if "keystore" in key else "ssl.truststore.certificates")
        if kind != "PEM" and (location or inline):
            raise ConfigError(f"{key}={kind} on listener {listener}: kgroup reads PEM stores only "
                              f"(set {key}=PEM)")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    apply_protocols_and_ciphers(ctx, get)
    key_password = get("ssl.key.password") or get("ssl.keystore.password")
    location = get("ssl.keystore.location")
    chain, key = get("ssl.keystore.certificate.chain"), get("ssl.keystore.key")
    try:
        if chain and key:
            paths = [_write_temp(chain), _write_temp(key)]
            try:
                ctx.load_cert_chain(paths[0], paths[1], password=key_password)
            finally:
                for p in paths:
                    os.unlink(p)
        elif location:
            ctx.load_cert_chain(location, password=key_password)
        else:
            raise ConfigError(f"Listener {listener} uses TLS but no keystore is configured "
                              "(ssl.keystore.location, or ssl.keystore.certificate.chain and ssl.keystore.key)")
    except (ssl.SSLError, OSError) as e:
        raise ConfigError(f"Listener {listener}: cannot load the keystore: {e}") from None
    cafile, cadata = get("ssl.truststore.location"), get("ssl.truststore.certificates")
    try:
        if cafile:
            ctx.load_verify_locations(cafile=cafile)
        if cadata:
            ctx.load_verify_locations(cadata=cadata)
    except (ssl.SSLError, OSError) as e:
        raise ConfigError(f"Listener {listener}: cannot load the truststore: {e}") from None
    auth = (get("ssl.client.auth") or "none").lower()
    if auth not in _CLIENT_AUTH:
        raise ConfigError(f"Invalid value {auth} for configuration ssl.client.auth: "
                          "String must be one of: required, requested, none")
    ctx.verify_mode = _CLIENT_AUTH[auth]
    ctx.check_hostname = False
    return ctx


def apply_protocols_and_ciphers(ctx: ssl.SSLContext, get) -> None:
    """``ssl.enabled.protocols`` and ``ssl.cipher.suites`` (``get``: a listener's key lookup) on a
    server context, or on the client context a broker connects to the others with."""
    enabled = [p.strip() for p in (get("ssl.enabled.protocols") or "").split(",") if p.strip()]
    versions = []
    for p in enabled:
        if p not in _PROTOCOLS:
            raise ConfigError(f"Unsupported TLS protocol {p!r} in ssl.enabled.protocols")
        versions.append(_PROTOCOLS[p])
    if not versions:
        raise ConfigError("ssl.enabled.protocols is empty")
    ctx.minimum_version = min(versions)
    ctx.maximum_version = max(versions)
    suites = get("ssl.cipher.suites")
    if suites:
        tls12 = [openssl_cipher_name(s) for s in suites.split(",") if s.strip() and not
                 re.fullmatch(r"TLS_(AES|CHACHA20)\w+", s.strip())]
        if tls12:
            try:
                ctx.set_ciphers(":".join(tls12))
            except ssl.SSLError as e:
                raise ConfigError(f"ssl.cipher.suites: no usable cipher in {suites!r}: {e}") from None


class SslPrincipalBuilder:
    """DefaultKafkaPrincipalBuilder for SSL: User:<mapped DN> of the verified client certificate,
    or User:ANONYMOUS when the client presented none."""

    def __init__(self, rules: str | None):
        try:
            self.mapper = SslPrincipalMapper(rules)
        except Exception as e:       # noqa: BLE001 - a bad pattern is a config error
            raise ConfigError(f"Invalid value for ssl.principal.mapping.rules: {e}") from None

    def principal(self, ssl_object) -> KafkaPrincipal:
        cert = ssl_object.getpeercert() if ssl_object is not None else None
        if not cert or "subject" not in cert:
            return ANONYMOUS
        return KafkaPrincipal(USER_TYPE, self.mapper.name(rfc2253_name(cert["subject"])))
