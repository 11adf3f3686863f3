"""ACLs, durable: ``kgroup-acls.json`` in the metadata directory (Kafka 4.x keeps AccessControlEntryRecords
in its metadata log, 3.x kept them in ZooKeeper), loaded into the StandardAuthorizer at start and
rewritten on each CreateAcls/DeleteAcls that changes them."""
from __future__ import annotations

import json
import os

from ..security.acl import AclBinding, AclBindingFilter, StandardAuthorizer, validate_new_acl
from .metadata import _atomic_write

FILE = "kgroup-acls.json"
AUTHORIZER_CLASSES = ("org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                      "kafka.security.authorizer.AclAuthorizer")


class AclStore:
    def __init__(self, data_dir: str, authorizer: StandardAuthorizer):
        self.path = os.path.join(data_dir, FILE)
        self.authorizer = authorizer
        acls = []
        if os.path.exists(self.path):
            acls = [AclBinding(*a) for a in json.load(open(self.path)).get("acls", [])]
        authorizer.set_acls(acls)

    def _save(self, acls) -> None:
        _atomic_write(self.path, json.dumps({"version": 1, "acls": sorted(list(a) for a in acls)}, indent=1))
        self.authorizer.set_acls(acls)

    def create(self, bindings: list[AclBinding]) -> list[str | None]:
        """One result per binding: None, or the INVALID_REQUEST message. Existing ones are kept
        (AclControlManager.createAcls: success, nothing written)."""
        acls = set(self.authorizer.acls)
        results = []
        for b in bindings:
            err = validate_new_acl(b)
            results.append(err)
            if err is None:
                acls.add(b)
        if acls != self.authorizer.acls:
            self._save(acls)
        return results

    def delete(self, filters: list[AclBindingFilter]) -> list[tuple[str | None, list[AclBinding]]]:
        """Per filter: (INVALID_REQUEST message or None, the ACLs it deleted)."""
        acls = set(self.authorizer.acls)
        out = []
        for f in filters:
            err = f.unknown_error()
            if err is not None:
                out.append((err, []))
                continue
            matched = sorted(a for a in acls if f.matches(a))
            acls.difference_update(matched)
            out.append((None, matched))
        if acls != self.authorizer.acls:
            self._save(acls)
        return out

    def describe(self, f: AclBindingFilter) -> list[AclBinding]:
        return sorted(a for a in self.authorizer.acls if f.matches(a))
