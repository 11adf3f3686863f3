"""ACLs, durable, behind one interface with two backends: on a single node ``kgroup-acls.json`` in
the metadata directory (Kafka 4.x keeps AccessControlEntryRecords in its metadata log), in a
cluster ZooKeeper's ``/kafka-acl`` trees as Kafka 3.9's AclAuthorizer kept them
(kgroup/cluster/zk_config_store.py). Create and delete compute what changes against the ACLs
this broker holds; the backend makes the change durable, then installs it in the authorizer."""
from __future__ import annotations

import json
import os

from ..security.acl import AclBinding, AclBindingFilter, StandardAuthorizer, validate_new_acl
from .metadata import _atomic_write

FILE = "kgroup-acls.json"
AUTHORIZER_CLASSES = ("org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                      "kafka.security.authorizer.AclAuthorizer")


class FileAclBackend:
    """The single node's: the whole set rewritten on each change."""

    def __init__(self, data_dir: str):
        self.path = os.path.join(data_dir, FILE)

    def load(self) -> set[AclBinding]:
        if not os.path.exists(self.path):
            return set()
        return {AclBinding(*a) for a in json.load(open(self.path)).get("acls", [])}

    def write(self, store: "AclStore", added: set[AclBinding], removed: set[AclBinding]) -> None:
        acls = (store.authorizer.acls | added) - removed
        _atomic_write(self.path, json.dumps({"version": 1, "acls": sorted(list(a) for a in acls)}, indent=1))
        store.set_acls(acls)


class AclStore:
    def __init__(self, data_dir: str, authorizer: StandardAuthorizer):
        self.authorizer = authorizer
        self.use_backend(FileAclBackend(data_dir))

    def use_backend(self, backend) -> None:
        """Keep the ACLs in ``backend`` from now on (a cluster's ZooKeeper), starting from its ACLs."""
        self.backend = backend
        self.authorizer.set_acls(backend.load())

    # -- what the backends install ---------------------------------------------------------------
    def set_acls(self, acls) -> None:
        self.authorizer.set_acls(acls)

    def set_resource_acls(self, resource_type: int, name: str, pattern_type: int, acls) -> None:
        """One resource pattern's ACLs are now ``acls`` (a ZooKeeper resource znode's content)."""
        key = (resource_type, name, pattern_type)
        self.authorizer.set_acls({a for a in self.authorizer.acls if a[:3] != key} | set(acls))

    # -- CreateAcls / DeleteAcls / DescribeAcls -------------------------------------------------
    def create(self, bindings: list[AclBinding]) -> list[str | None]:
        """One result per binding: None, or the INVALID_REQUEST message. Existing ones are kept
        (AclControlManager.createAcls: success, nothing written)."""
        acls = self.authorizer.acls
        added: set[AclBinding] = set()
        results = []
        for b in bindings:
            err = validate_new_acl(b)
            results.append(err)
            if err is None and b not in acls:
                added.add(b)
        if added:
            self.backend.write(self, added, set())
        return results

    def delete(self, filters: list[AclBindingFilter]) -> list[tuple[str | None, list[AclBinding]]]:
        """Per filter: (INVALID_REQUEST message or None, the ACLs it deleted)."""
        acls = set(self.authorizer.acls)
        removed: set[AclBinding] = set()
        out = []
        for f in filters:
            err = f.unknown_error()
            if err is not None:
                out.append((err, []))
                continue
            matched = sorted(a for a in acls if f.matches(a))
            acls.difference_update(matched)
            removed.update(matched)
            out.append((None, matched))
        if removed:
            self.backend.write(self, set(), removed)
        return out

    def describe(self, f: AclBindingFilter) -> list[AclBinding]:
        return sorted(a for a in self.authorizer.acls if f.matches(a))
