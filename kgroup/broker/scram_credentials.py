"""SCRAM credentials, durable: salted (the password itself is never seen, only the salted form
AlterUserScramCredentials carries), behind one interface with two backends: on a single node
``kgroup-scram-credentials.json`` in the metadata directory, as Kafka's controller keeps
UserScramCredentialRecords in its metadata log; in a cluster ZooKeeper's ``/config/users/<user>``,
as Kafka 3.9 kept them (kgroup/cluster/zk_config_store.py). The checks and answers of
DescribeUserScramCredentials / AlterUserScramCredentials are Kafka's ScramImage.describe and
ScramControlManager.alterCredentials, against the credentials this broker holds; the backend makes
the change durable, then installs it."""
from __future__ import annotations

import base64
import json
import os

from ..protocol.errors import ErrorCode
from ..security.scram import BY_TYPE, MAX_ITERATIONS, ScramCredential, credential_from_salted
from .metadata import _atomic_write

FILE = "kgroup-scram-credentials.json"


class FileScramBackend:
    def __init__(self, data_dir: str):
        self.path = os.path.join(data_dir, FILE)

    def load(self) -> dict[str, dict[str, ScramCredential]]:
        """mechanism name -> user -> credential."""
        if not os.path.exists(self.path):
            return {}
        doc = json.load(open(self.path))
        return {mech: {u: ScramCredential(base64.b64decode(c["salt"]), base64.b64decode(c["stored_key"]),
                                          base64.b64decode(c["server_key"]), c["iterations"])
                       for u, c in users.items()}
                for mech, users in doc.get("credentials", {}).items()}

    def write(self, store: "ScramCredentialStore", changes: dict[str, dict[str, ScramCredential | None]]) -> None:
        for user, by_mech in changes.items():
            store.apply_user_changes(user, by_mech)
        doc = {"version": 1, "credentials": {
            mech: {u: {"salt": base64.b64encode(c.salt).decode(), "stored_key": base64.b64encode(c.stored_key).decode(),
                       "server_key": base64.b64encode(c.server_key).decode(), "iterations": c.iterations}
                   for u, c in sorted(users.items())}
            for mech, users in sorted(store.credentials.items()) if users}}
        _atomic_write(self.path, json.dumps(doc, indent=1, sort_keys=True))


class ScramCredentialStore:
    def __init__(self, data_dir: str):
        # mechanism name -> user -> credential
        self.credentials: dict[str, dict[str, ScramCredential]] = {}
        self.use_backend(FileScramBackend(data_dir))

    def use_backend(self, backend) -> None:
        """Keep the credentials in ``backend`` from now on (a cluster's ZooKeeper), starting from its."""
        self.backend = backend
        self.credentials = backend.load()

    def lookup(self, mechanism: str, user: str) -> ScramCredential | None:
        return self.credentials.get(mechanism, {}).get(user)

    # -- what the backends install ---------------------------------------------------------------
    def apply_user_changes(self, user: str, by_mech: dict[str, ScramCredential | None]) -> None:
        """``user``'s credential per mechanism name set (None: deleted); others unchanged."""
        for mech, cred in by_mech.items():
            if cred is None:
                self.credentials.get(mech, {}).pop(user, None)
            else:
                self.credentials.setdefault(mech, {})[user] = cred

    def set_user(self, user: str, by_mech: dict[str, ScramCredential]) -> None:
        """``user``'s credentials are exactly ``by_mech`` (a ZooKeeper user znode's content)."""
        for mech, users in self.credentials.items():
            if mech not in by_mech:
                users.pop(user, None)
        self.apply_user_changes(user, dict(by_mech))

    # -- DescribeUserScramCredentials (ScramImage.describe) -------------------------------------
    def describe(self, users: list[str] | None) -> list[tuple[str, int, str | None, list[tuple[int, int]]]]:
        """[(user, error code, error message, [(mechanism type, iterations)])]."""
        if not users:
            names = {u: False for by in self.credentials.values() for u in by}
        else:
            names = {}
            for u in users:
                names[u] = u in names
        out = []
        for user, duplicate in names.items():
            if duplicate:
                out.append((user, ErrorCode.DUPLICATE_RESOURCE,
                            "Cannot describe SCRAM credentials for the same user twice in a single request: " + user, []))
                continue
            infos = [(m.type_code, self.credentials[m.mechanism_name][user].iterations)
                     for m in BY_TYPE.values() if user in self.credentials.get(m.mechanism_name, {})]
            if infos:
                out.append((user, 0, None, infos))
            else:
                out.append((user, ErrorCode.RESOURCE_NOT_FOUND,
                            "Attempt to describe a user credential that does not exist: " + user, []))
        return out

    # -- AlterUserScramCredentials (ScramControlManager.alterCredentials) -----------------------
    def alter(self, deletions, upsertions) -> list[tuple[str, int, str | None]]:
        """``deletions``: [(name, mechanism type)]; ``upsertions``: [(name, mechanism type,
        iterations, salt, salted password)]. Applied and saved together; one result per user."""
        errors: dict[str, tuple[int, str]] = {}
        to_delete: dict[str, tuple] = {}
        to_upsert: dict[str, tuple] = {}
        dup = (ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request")
        for d in deletions:
            name, mtype = d
            if name in errors:
                continue
            if to_delete.pop(name, None) is not None:
                errors[name] = dup
                continue
            err = _validate_name(name, mtype)
            if err is None and self.lookup(BY_TYPE[mtype].mechanism_name, name) is None:
                err = (ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")
            if err:
                errors[name] = err
            else:
                to_delete[name] = d
        for u in upsertions:
            name, mtype, iterations = u[0], u[1], u[2]
            if name in errors:
                continue
            if to_delete.pop(name, None) is not None or to_upsert.pop(name, None) is not None:
                errors[name] = dup
                continue
            err = _validate_name(name, mtype)
            if err is None:
                if iterations < BY_TYPE[mtype].min_iterations:
                    err = (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
                elif iterations > MAX_ITERATIONS:
                    err = (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
            if err:
                errors[name] = err
            else:
                to_upsert[name] = u
        results = []
        changes: dict[str, dict[str, ScramCredential | None]] = {}
        for name, (_, mtype) in to_delete.items():
            changes[name] = {BY_TYPE[mtype].mechanism_name: None}
            results.append((name, 0, None))
        for name, (_, mtype, iterations, salt, salted) in to_upsert.items():
            mech = BY_TYPE[mtype]
            changes[name] = {mech.mechanism_name: credential_from_salted(mech, bytes(salt), bytes(salted), iterations)}
            results.append((name, 0, None))
        if changes:
            self.backend.write(self, changes)
        results += [(name, code, msg) for name, (code, msg) in errors.items()]
        return results


def _validate_name(name: str, mtype: int):
    if not name:
        return (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
    if mtype not in BY_TYPE:
        return (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
    return None
