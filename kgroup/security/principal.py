"""Principals: Kafka's ``KafkaPrincipal`` ("User:alice") and the name of a TLS client, its
certificate's distinguished name as ``X500Principal.getName()`` writes it (RFC 2253), mapped by
``ssl.principal.mapping.rules`` as Kafka's ``SslPrincipalMapper``."""
from __future__ import annotations

import re
from typing import NamedTuple


class KafkaPrincipal(NamedTuple):
    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @staticmethod
    def parse(text: str) -> "KafkaPrincipal":
        """``SecurityUtils.parseKafkaPrincipal``: "Type:name"."""
        if not text or ":" not in text:
            raise ValueError(f"expected a string in format principalType:principalName but got {text}")
        t, n = text.split(":", 1)
        return KafkaPrincipal(t, n)


USER_TYPE = "User"
ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")

# Attribute keywords X500Principal.getName(RFC2253) writes by name; any other as its OID.
_RFC2253_KEYWORDS = {
    "commonName": "CN", "countryName": "C", "localityName": "L", "stateOrProvinceName": "ST",
    "organizationName": "O", "organizationalUnitName": "OU", "streetAddress": "STREET",
    "domainComponent": "DC", "userId": "UID",
}
_OIDS = {"emailAddress": "1.2.840.113549.1.9.1", "serialNumber": "2.5.4.5", "title": "2.5.4.12",
         "surname": "2.5.4.4", "givenName": "2.5.4.42", "initials": "2.5.4.43",
         "generationQualifier": "2.5.4.44", "dnQualifier": "2.5.4.46", "pseudonym": "2.5.4.65",
         "postalCode": "2.5.4.17", "businessCategory": "2.5.4.15"}


def _escape(value: str) -> str:
    out = re.sub(r'([,+"\\<>;=])', r"\\\1", value)
    if out.startswith((" ", "#")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out


def rfc2253_name(subject) -> str:
    """The distinguished name of ``ssl.SSLSocket.getpeercert()["subject"]`` (RDNs in certificate
    order, each a tuple of (attribute, value)) as RFC 2253: RDNs most specific first."""
    rdns = []
    for rdn in reversed(subject):
        parts = []
        for attr, value in rdn:
            key = _RFC2253_KEYWORDS.get(attr)
            if key is None:
                oid = _OIDS.get(attr, attr)
                # Java writes an unnamed attribute as OID=#hex of its DER value; the UTF8String
                # encoding (tag 12) is the one certificates use for these.
                raw = value.encode()
                parts.append(f"{oid}=#0c{len(raw):02x}{raw.hex()}" if len(raw) < 128 else f"{oid}={_escape(value)}")
            else:
                parts.append(f"{key}={_escape(value)}")
        rdns.append("+".join(parts))
    return ",".join(rdns)


_RULE = r"(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(?:,\s*|$)")
_PARSER = re.compile(_RULE)
_BACKREF = re.compile(r"\$(\d+)")


class _Rule(NamedTuple):
    pattern: re.Pattern | None          # None: DEFAULT
    replacement: str
    lower: bool
    upper: bool


def _java_replacement(replacement: str, groups: int) -> str:
    """Java's Matcher replacement syntax ($n, \\x) as Python's re.sub template; a back reference
    past the last group is read as Kafka's escapeLiteralBackReferences reads it."""
    out = []
    i = 0
    while i < len(replacement):
        c = replacement[i]
        if c == "\\" and i + 1 < len(replacement):
            out.append(replacement[i + 1].replace("\\", "\\\\"))
            i += 2
            continue
        if c == "$":
            m = re.match(r"\d+", replacement[i + 1:])
            if m:
                digits = m.group(0)
                # Java takes as many digits as still name an existing group.
                n = int(digits[0])
                used = 1
                while used < len(digits) and int(digits[:used + 1]) <= groups:
                    used += 1
                    n = int(digits[:used])
                if n > groups:
                    out.append("$" + digits)
                else:
                    out.append(f"\\g<{n}>" + digits[used:])
                i += 1 + len(digits)
                continue
        out.append(c.replace("\\", "\\\\"))
        i += 1
    return "".join(out)


class SslPrincipalMapper:
    """``ssl.principal.mapping.rules``: comma-separated ``DEFAULT`` or
    ``RULE:pattern/replacement/[LU]``; the first rule whose pattern matches the whole name wins."""

    def __init__(self, rules: str | None):
        text = (rules or "DEFAULT").strip()
        self.rules: list[_Rule] = []
        for m in _SPLITTER.finditer(text):
            rule = m.group(1)
            if m.start() == m.end():
                break
            pm = _PARSER.match(rule)
            if pm is None or pm.end() != len(rule):
                raise ValueError(f"Invalid rule: {rule}")
            if pm.group(1):
                self.rules.append(_Rule(None, "", False, False))
            elif pm.group(2) is not None and rule.startswith("RULE:"):
                self.rules.append(_Rule(re.compile(pm.group(2)), pm.group(3), pm.group(4) == "L", pm.group(4) == "U"))
            elif rule:
                raise ValueError(f"Invalid rule: {rule}")

    def name(self, distinguished_name: str) -> str:
        for r in self.rules:
            if r.pattern is None:
                return distinguished_name
            if r.pattern.fullmatch(distinguished_name):
                out = r.pattern.sub(_java_replacement(r.replacement, r.pattern.groups), distinguished_name)
                return out.lower() if r.lower else out.upper() if r.upper else out
        raise ValueError(f"No rules apply to {distinguished_name}")
