"""The znodes of the cluster-wide settings, byte for byte Kafka 3.9's ZooKeeper mode (``ZkData``,
``AclEntry``, ``ScramCredentialUtils``, ``Sanitizer``, ``FeatureZNode``), pure (no kazoo):

    /kafka-acl/<ResourceType>/<name>                      {"version":1,"acls":[{"principal":"User:alice",
                                                            "permissionType":"Allow","operation":"Read","host":"*"}]}
    /kafka-acl-extended/prefixed/<ResourceType>/<name>    the same, for PREFIXED patterns
    /kafka-acl-changes/acl_changes_N                      TOPIC:<name> (a LITERAL pattern changed)
    /kafka-acl-extended-changes/acl_changes_N             {"version":1,"resourceType":"TOPIC","name":..,
                                                            "patternType":"PREFIXED"}
    /config/users/<sanitized user>                        {"version":1,"config":{"SCRAM-SHA-256":
                                                            "salt=..,stored_key=..,server_key=..,iterations=4096"}}
    /config/brokers/<default> and /config/brokers/<id>    {"version":1,"config":{...}}
    /config/groups/<group>, /config/client-metrics/<name> the same form (no ZooKeeper home in Kafka 3.9,
                                                            where these are KRaft-only)
    /config/changes/config_change_N                       {"version":2,"entity_path":"users/alice"}
    /feature                                              {"version":2,"status":1,"features":
                                                            {"group.version":{"max_version_level":1}}}
"""
from __future__ import annotations

import base64
import json
import urllib.parse

from ..security import acl as A
from ..security.scram import ScramCredential
from .zk_data import decode_json, encode_json

# -- ACLs ---------------------------------------------------------------------------------------------
LITERAL_ACLS = "/kafka-acl"
EXTENDED_ACLS = "/kafka-acl-extended"
LITERAL_ACL_CHANGES = "/kafka-acl-changes"
EXTENDED_ACL_CHANGES = "/kafka-acl-extended-changes"
ACL_CHANGE_PREFIX = "acl_changes_"          # ZkAclChangeStore.SequenceNumberPrefix

_ENUM = {A.RT_TOPIC: "TOPIC", A.RT_GROUP: "GROUP", A.RT_CLUSTER: "CLUSTER", A.RT_TRANSACTIONAL_ID: "TRANSACTIONAL_ID",
         A.RT_DELEGATION_TOKEN: "DELEGATION_TOKEN", A.RT_USER: "USER"}
_RESOURCE_BY_ENUM = {v: k for k, v in _ENUM.items()}
_OPERATIONS = {code: name for code, name in A.OPERATION_NAMES.items() if code not in (A.ANY, A.UNKNOWN)}
_OPERATION_BY_ENUM = {v: k for k, v in _OPERATIONS.items()}
_PERMISSIONS = {A.ALLOW: "ALLOW", A.DENY: "DENY"}
_PERMISSION_BY_ENUM = {v: k for k, v in _PERMISSIONS.items()}


def _pascal(enum_name: str) -> str:
    """SecurityUtils.toPascalCase: TRANSACTIONAL_ID -> TransactionalId."""
    return "".join(part.capitalize() for part in enum_name.split("_"))


def _from_name(name: str, by_enum: dict) -> int:
    """SecurityUtils' lookups (the Pascal-case name and its upper-case form), and the enum name
    (ResourceType.fromString in change notifications)."""
    for e, code in by_enum.items():
        if name in (e, _pascal(e), _pascal(e).upper()):
            return code
    raise ValueError(f"unknown name {name!r}")


def acl_resource_path(resource_type: int, name: str, pattern_type: int) -> str:
    """ResourceZNode.path: LITERAL under /kafka-acl, PREFIXED under /kafka-acl-extended/prefixed."""
    root = LITERAL_ACLS if pattern_type == A.LITERAL else f"{EXTENDED_ACLS}/{A.PATTERN_NAMES[pattern_type].lower()}"
    return f"{root}/{_pascal(_ENUM[resource_type])}/{name}"


def acl_type_roots() -> list[tuple[str, int]]:
    """(path under which each ResourceType has a child, pattern type) for both stores."""
    return [(LITERAL_ACLS, A.LITERAL), (f"{EXTENDED_ACLS}/prefixed", A.PREFIXED)]


def resource_type_from_path_name(name: str) -> int:
    return _from_name(name, _RESOURCE_BY_ENUM)


def encode_acls(entries) -> bytes:
    """ResourceZNode.encode of (principal, host, operation, permission type) entries."""
    return encode_json({"version": 1, "acls": [
        {"principal": p, "permissionType": _pascal(_PERMISSIONS[perm]), "operation": _pascal(_OPERATIONS[op]),
         "host": h} for p, h, op, perm in sorted(entries)]})


def decode_acls(data: bytes | None) -> set[tuple[str, str, int, int]]:
    """AclEntry.fromBytes: the (principal, host, operation, permission type) entries."""
    doc = decode_json(data)
    if not doc:
        return set()
    if doc.get("version") != 1:
        raise ValueError(f"unsupported ACL znode version {doc.get('version')}")
    return {(a["principal"], a["host"], _from_name(a["operation"], _OPERATION_BY_ENUM),
             _from_name(a["permissionType"], _PERMISSION_BY_ENUM)) for a in doc["acls"]}


def acl_change_path(pattern_type: int) -> str:
    return LITERAL_ACL_CHANGES if pattern_type == A.LITERAL else EXTENDED_ACL_CHANGES


def encode_acl_change(resource_type: int, name: str, pattern_type: int) -> bytes:
    """LiteralAclChangeStore: ``TOPIC:name``; ExtendedAclChangeStore: an ExtendedAclChangeEvent."""
    if pattern_type == A.LITERAL:
        return f"{_ENUM[resource_type]}:{name}".encode()
    return encode_json({"version": 1, "resourceType": _ENUM[resource_type], "name": name,
                   "patternType": A.PATTERN_NAMES[pattern_type]})


def decode_acl_change(root: str, data: bytes) -> tuple[int, str, int]:
    """(resource type, name, pattern type) a change notification under ``root`` names."""
    if root == LITERAL_ACL_CHANGES:
        text = data.decode()
        rtype, separator, name = text.partition(":")
        if not separator:
            raise ValueError("expected a string in format ResourceType:ResourceName but got " + text)
        return _from_name(rtype, _RESOURCE_BY_ENUM), name, A.LITERAL
    doc = json.loads(data.decode())
    if doc.get("version", 1) > 1:
        raise ValueError(f"Acl change event received for unsupported version: {doc['version']}")
    pattern = {v: k for k, v in A.PATTERN_NAMES.items()}[doc["patternType"].upper()]
    return _from_name(doc["resourceType"], _RESOURCE_BY_ENUM), doc["name"], pattern


# -- config entities ---------------------------------------------------------------------------------
CONFIG = "/config"
CONFIG_CHANGES = "/config/changes"
CONFIG_CHANGE_PREFIX = "config_change_"     # ConfigEntityChangeNotificationSequenceZNode
USERS, BROKERS, GROUPS, CLIENT_METRICS, TOPICS = "users", "brokers", "groups", "client-metrics", "topics"
DEFAULT_ENTITY = "<default>"                # ZooKeeperInternals.DEFAULT_STRING


def sanitize(name: str) -> str:
    """Sanitizer.sanitize: URL-encoded (Java's URLEncoder), ``*`` as %2A and a space as %20."""
    return (urllib.parse.quote_plus(name, safe="*-._").replace("~", "%7E").replace("*", "%2A")
            .replace("+", "%20"))


def desanitize(name: str) -> str:
    return urllib.parse.unquote_plus(name)


def entity_path(entity_type: str, name: str) -> str:
    """The config znode of an entity (its name sanitized for users, <default> for the brokers' default)."""
    return f"{CONFIG}/{entity_type}/{entity_name(entity_type, name)}"


def entity_name(entity_type: str, name: str) -> str:
    if entity_type == BROKERS and name == "":
        return DEFAULT_ENTITY
    return sanitize(name) if entity_type == USERS else name


def name_from_entity(entity_type: str, znode_name: str) -> str:
    if entity_type == BROKERS and znode_name == DEFAULT_ENTITY:
        return ""
    return desanitize(znode_name) if entity_type == USERS else znode_name


def encode_entity_config(configs: dict[str, str]) -> bytes:
    """ConfigEntityZNode.encode."""
    return encode_json({"version": 1, "config": dict(configs)})


def decode_entity_config(data: bytes | None) -> dict[str, str]:
    doc = decode_json(data) or {}
    return {k: str(v) for k, v in (doc.get("config") or {}).items()}


def encode_config_change(entity_type: str, name: str) -> bytes:
    """ConfigEntityChangeNotificationSequenceZNode.encode (version 2: the entity path)."""
    return encode_json({"version": 2, "entity_path": f"{entity_type}/{entity_name(entity_type, name)}"})


def decode_config_change(data: bytes) -> tuple[str, str] | None:
    """(entity type, entity name) of a version 2 notification whose path is ``type/name``; None
    for another shape (Kafka's user/client-id pairs, ``users/<u>/clients/<c>``, are not served)."""
    doc = json.loads(data.decode())
    if doc.get("version") != 2:
        raise ValueError(f"Version {doc.get('version')} of config change notification is not supported")
    parts = doc["entity_path"].split("/")
    if len(parts) != 2:
        return None
    return parts[0], name_from_entity(parts[0], parts[1])


# -- SCRAM credentials --------------------------------------------------------------------------------
def credential_to_string(c: ScramCredential) -> str:
    """ScramCredentialUtils.credentialToString."""
    return (f"salt={base64.b64encode(c.salt).decode()},stored_key={base64.b64encode(c.stored_key).decode()},"
            f"server_key={base64.b64encode(c.server_key).decode()},iterations={c.iterations}")


def credential_from_string(text: str) -> ScramCredential:
    """ScramCredentialUtils.credentialFromString."""
    props = dict(kv.split("=", 1) for kv in text.split(","))
    if set(props) != {"salt", "stored_key", "server_key", "iterations"}:
        raise ValueError("Credentials not valid: " + text)
    return ScramCredential(base64.b64decode(props["salt"]), base64.b64decode(props["stored_key"]),
                           base64.b64decode(props["server_key"]), int(props["iterations"]))


# -- /feature -------------------------------------------------------------------------------------------
FEATURE = "/feature"
FEATURE_ENABLED = 1                         # FeatureZNodeStatus.Enabled


def encode_features(finalized: dict[str, int]) -> bytes:
    """FeatureZNode.encode, version 2 (max_version_level only); a level-0 feature is absent, as
    Kafka requires max_version_level >= 1."""
    return encode_json({"version": 2, "status": FEATURE_ENABLED, "features": {
        name: {"max_version_level": level} for name, level in sorted(finalized.items()) if level >= 1}})


def decode_features(data: bytes) -> dict[str, int]:
    """FeatureZNode.decode: version 1 or 2, status present and known, each max_version_level >= 1."""
    doc = decode_json(data)
    if not doc or doc.get("version") not in (1, 2):
        raise ValueError(f"Unsupported version of feature information: {data!r}")
    if doc.get("status") not in (0, 1):
        raise ValueError(f"Malformed or absent status in feature information: {data!r}")
    out = {}
    for name, info in doc["features"].items():
        if doc["version"] == 1 and "min_version_level" not in info:
            raise ValueError(f"min_version_level absent in [{info}]")
        level = int(info["max_version_level"])
        if level < 1:
            raise ValueError(f"Expected maxValue >= 1, but received maxValue: {level}")
        out[name] = level
    return out

