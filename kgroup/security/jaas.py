"""``sasl.jaas.config`` values as Kafka's ``JaasConfig`` reads them:
``<LoginModule> <flag> key="value" key2=value2 ...;`` (one or more entries)."""
from __future__ import annotations

import re
from typing import NamedTuple


class JaasEntry(NamedTuple):
    login_module: str
    flag: str
    options: dict[str, str]


_TOKEN = re.compile(r'\s*(?:"((?:[^"\\]|\\.)*)"|([^\s=;"]+)|(=)|(;))')
_FLAGS = ("REQUIRED", "REQUISITE", "SUFFICIENT", "OPTIONAL")


def _tokens(text: str):
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise ValueError(f"Unexpected character in JAAS config at {pos}: {text[pos:pos + 10]!r}")
        pos = m.end()
        if m.group(1) is not None:
            yield ("word", re.sub(r"\\(.)", r"\1", m.group(1)))
        elif m.group(2) is not None:
            yield ("word", m.group(2))
        elif m.group(3):
            yield ("=", "=")
        else:
            yield (";", ";")


def parse_jaas_config(text: str) -> list[JaasEntry]:
    toks = list(_tokens(text))
    entries = []
    i = 0
    while i < len(toks):
        kind, module = toks[i]
        if kind != "word":
            raise ValueError("Login module not specified in JAAS config")
        if i + 1 >= len(toks) or toks[i + 1][0] != "word":
            raise ValueError("Login module control flag not specified in JAAS config")
        flag = toks[i + 1][1]
        if flag.upper() not in _FLAGS:
            raise ValueError(f"Invalid login module control flag '{flag}' in JAAS config")
        i += 2
        options = {}
        while i < len(toks) and toks[i][0] != ";":
            key = toks[i][1]
            if i + 2 >= len(toks) or toks[i + 1][0] != "=" or toks[i + 2][0] != "word":
                raise ValueError(f"Value not specified for key '{key}' in JAAS config")
            options[key] = toks[i + 2][1]
            i += 3
        if i >= len(toks):
            raise ValueError("JAAS config entry not terminated by semi-colon")
        i += 1
        entries.append(JaasEntry(module, flag.upper(), options))
    if not entries:
        raise ValueError("JAAS config property does not contain any login modules")
    return entries


def login_options(text: str | None) -> dict[str, str]:
    """The options of a one-module JAAS config (what Kafka's SASL mechanisms use); {} if unset."""
    if not text:
        return {}
    entries = parse_jaas_config(text)
    if len(entries) != 1:
        raise ValueError(f"JAAS config property contains {len(entries)} login modules, should be 1 module")
    return entries[0].options
