"""The pure SASL mechanics and principals (kgroup/security), without sockets."""
from __future__ import annotations

import base64

import pytest

from kgroup.security import scram
from kgroup.security.jaas import login_options, parse_jaas_config
from kgroup.security.oauthbearer import UnsecuredOAuthBearerServer, client_initial_response, unsecured_token
from kgroup.security.plain import PlainServer, plain_users
from kgroup.security.principal import KafkaPrincipal, SslPrincipalMapper, rfc2253_name
from kgroup.security.sasl import SaslAuthenticationError, SaslError, failure_message

# RFC 7677 section 3's example exchange
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"


def test_scram_sha256_rfc7677_vector(monkeypatch):
    mech = scram.SCRAM_SHA_256
    cred = scram.credential_from_salted(mech, RFC_SALT, scram.salted_password(mech, "pencil", RFC_SALT, 4096), 4096)
    monkeypatch.setattr(scram, "secure_nonce", lambda: RFC_SERVER_NONCE)
    server = scram.ScramServer(mech, lambda u: cred if u == "user" else None)
    first = server.evaluate(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert first == b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    final = server.evaluate(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                            b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert server.complete and server.authorization_id == "user"


@pytest.mark.parametrize("mech", [scram.SCRAM_SHA_256, scram.SCRAM_SHA_512])
def test_scram_client_and_server(mech):
    cred = scram.generate_credential(mech, "s3cret", 4096)
    server = scram.ScramServer(mech, {"a=b,c": cred}.get)
    client = scram.ScramClient(mech, "a=b,c", "s3cret")   # names with = and , are escaped
    token = client.first()
    assert b"n=a=3Db=2Cc," in token
    token = client.evaluate(server.evaluate(token))
    assert client.evaluate(server.evaluate(token)) is None
    assert client.complete and server.complete and server.authorization_id == "a=b,c"


def test_scram_wrong_password_and_unknown_user_fail_alike():
    mech = scram.SCRAM_SHA_512
    cred = scram.generate_credential(mech, "right", 4096)
    for user, password in (("alice", "wrong"), ("nobody", "right")):
        server = scram.ScramServer(mech, {"alice": cred}.get)
        client = scram.ScramClient(mech, user, password)
        with pytest.raises(SaslError) as e:
            server.evaluate(client.evaluate(server.evaluate(client.first())))
        assert not isinstance(e.value, SaslAuthenticationError)    # the generic message goes out
        assert failure_message("SCRAM-SHA-512", e.value) == (
            "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512")
        assert not server.complete


def test_scram_too_few_iterations_and_bad_messages():
    mech = scram.SCRAM_SHA_256
    weak = scram.generate_credential(mech, "p", 1000)
    with pytest.raises(SaslError, match="less than the minimum 4096"):
        scram.ScramServer(mech, lambda u: weak).evaluate(b"n,,n=u,r=abc")
    with pytest.raises(SaslError, match="Invalid SCRAM client first message"):
        scram.ScramServer(mech, lambda u: weak).evaluate(b"garbage")
    with pytest.raises(SaslAuthenticationError, match="authorization id"):
        scram.ScramServer(mech, lambda u: scram.generate_credential(mech, "p", 4096)).evaluate(b"n,a=other,n=u,r=abc")


def test_plain():
    users = plain_users(login_options('org.apache.kafka.common.security.plain.PlainLoginModule required '
                                      'username="admin" password="admin-secret" user_admin="admin-secret" '
                                      'user_alice="alice;secret";'))
    assert users == {"admin": "admin-secret", "alice": "alice;secret"}
    s = PlainServer(users)
    assert s.evaluate(b"\0alice\0alice;secret") == b"" and s.complete and s.authorization_id == "alice"
    for token, msg in ((b"\0alice\0nope", "Invalid username or password"),
                       (b"\0\0x", "username not specified"), (b"\0alice\0", "password not specified"),
                       (b"alice\0x", "expected 3 tokens, got 2"), (b"a\0b\0c\0d", "expected 3 tokens, got 4"),
                       (b"bob\0alice\0alice;secret", "authorization id that is different")):
        with pytest.raises(SaslAuthenticationError, match=msg):
            PlainServer(users).evaluate(token)


def test_jaas_errors():
    with pytest.raises(ValueError, match="semi-colon"):
        parse_jaas_config('x.Module required a="b"')
    with pytest.raises(ValueError, match="control flag"):
        parse_jaas_config('x.Module sometimes a="b";')
    assert len(parse_jaas_config('a.A required; b.B optional k=v;')) == 2


def test_rfc2253_and_mapping_rules():
    subject = ((("countryName", "US"),), (("organizationName", "Acme, Inc."),), (("commonName", "alice"),))
    dn = rfc2253_name(subject)
    assert dn == "CN=alice,O=Acme\\, Inc.,C=US"
    assert SslPrincipalMapper("DEFAULT").name(dn) == dn
    rules = SslPrincipalMapper(r"RULE:^CN=(.*?),O=(.*)$/$1@$2/L, RULE:^CN=([a-z]+)$/$1/U, DEFAULT")
    assert rules.name("CN=Bob,O=Corp") == "bob@corp"
    assert rules.name("CN=carl") == "CARL"
    assert rules.name("OU=x") == "OU=x"
    with pytest.raises(ValueError, match="No rules apply"):
        SslPrincipalMapper(r"RULE:^CN=(.*)$/$1/").name("OU=x")
    assert KafkaPrincipal.parse("User:CN=a,O=b") == KafkaPrincipal("User", "CN=a,O=b")


def test_oauthbearer_unsecured():
    now = 1_000_000.0
    server = UnsecuredOAuthBearerServer({}, clock=lambda: now)
    assert server.evaluate(client_initial_response(unsecured_token("alice", 60, now=now))) == b""
    assert server.complete and server.authorization_id == "alice" and server.credential_lifetime_ms == 60_000
    expired = UnsecuredOAuthBearerServer({}, clock=lambda: now)
    err = expired.evaluate(client_initial_response(unsecured_token("alice", -5, now=now)))
    assert err == b'{"status":"invalid_token"}' and not expired.complete
    with pytest.raises(SaslAuthenticationError, match="invalid_token"):
        expired.evaluate(b"\x01")
    scoped = UnsecuredOAuthBearerServer({"unsecuredValidatorRequiredScope": "write"}, clock=lambda: now)
    assert b"insufficient_scope" in scoped.evaluate(client_initial_response(unsecured_token("a", 60, ["read"], now)))


def test_scram_accepts_librdkafka_duplicated_nonce_only():
    """librdkafka < 2.6.1 sends client nonce + server nonce (which starts with the client
    nonce); that exact form passes, any other nonce does not."""
    mech = scram.SCRAM_SHA_256
    cred = scram.generate_credential(mech, "pw", 4096)
    for dup, ok in ((True, True), (False, False)):
        server = scram.ScramServer(mech, lambda u: cred)
        client = scram.ScramClient(mech, "u", "pw")
        first = server.evaluate(client.first())
        final = client.evaluate(first).decode()
        cnonce = client._nonce
        final = final.replace(",r=", ",r=" + (cnonce if dup else "x"), 1)
        # the proof covers the nonce as sent: recompute it as the buggy client does
        import base64 as b64
        import hmac as h
        salted = scram.salted_password(mech, "pw", cred.salt, 4096)
        without = final.split(",p=")[0]
        auth = f"n=u,r={cnonce},{first.decode()},{without}".encode()
        ck = scram.client_key(mech, salted)
        sig = h.new(scram.stored_key(mech, ck), auth, mech.hash_name).digest()
        proof = b64.b64encode(bytes(a ^ b for a, b in zip(ck, sig))).decode()
        if ok:
            assert server.evaluate(f"{without},p={proof}".encode()).startswith(b"v=")
        else:
            with pytest.raises(SaslError, match="Invalid client nonce"):
                server.evaluate(f"{without},p={proof}".encode())
