"""Feature versions (KIP-584, KIP-1022): what this broker supports and what is finalized.

ApiVersions v3+ lists both (``supported_features``, ``finalized_features`` and their epoch);
UpdateFeatures changes a finalized level with Kafka's checks (FeatureControlManager.updateFeature,
QuorumFeatures.reasonNotSupported, Feature.validateVersion, MetadataVersion.checkIfMetadataChanged).
The finalized levels are kept behind one interface with two backends: on a single node
``kgroup-features.json`` in the data directory, the epoch counting the updates as Kafka's metadata
offset does; in a cluster ZooKeeper's ``/feature`` znode, the epoch its version, as Kafka 3.9's
FinalizedFeatureCache (kgroup/cluster/zk_config_store.py).

Supported, as a Kafka 4.3 broker but only where the behaviour behind a level exists here:
``metadata.version`` 7 (3.3-IV3) to 30 (4.3-IV0); ``group.version`` 0-1 (KIP-848's consumer
group protocol); ``transaction.version`` 0-2 (2: KIP-890 part 2, an epoch bump per transaction and
partitions added by the broker, which clients use only when it is finalized); ``share.version`` 0-1
(KIP-932's share groups: below 1 their APIs answer UNSUPPORTED_VERSION). Streams (KIP-1071) groups
are not served, and
``eligible.leader.replicas.version`` / ``kraft.version`` mean nothing on one node without a
quorum, so they are not listed, as Kafka lists no feature whose highest level is 0.
"""
from __future__ import annotations

import json
import os

from ..protocol.errors import ErrorCode, KafkaError

METADATA_VERSION = "metadata.version"
TRANSACTION_VERSION = "transaction.version"
GROUP_VERSION = "group.version"
SHARE_VERSION = "share.version"

# metadata.version levels: level -> (IBP version string, did the metadata change at this level)
_METADATA_VERSIONS = {
    7: ("3.3-IV3", True), 8: ("3.4-IV0", True), 9: ("3.5-IV0", False), 10: ("3.5-IV1", False),
    11: ("3.5-IV2", True), 12: ("3.6-IV0", False), 13: ("3.6-IV1", True), 14: ("3.6-IV2", True),
    15: ("3.7-IV0", True), 16: ("3.7-IV1", False), 17: ("3.7-IV2", True), 18: ("3.7-IV3", False),
    19: ("3.7-IV4", False), 20: ("3.8-IV0", False), 21: ("3.9-IV0", False), 22: ("4.0-IV0", False),
    23: ("4.0-IV1", True), 24: ("4.0-IV2", False), 25: ("4.0-IV3", False), 26: ("4.1-IV0", False),
    27: ("4.1-IV1", False), 28: ("4.2-IV0", False), 29: ("4.2-IV1", False), 30: ("4.3-IV0", True),
}
MINIMUM_METADATA_VERSION = 7

# feature -> (min, max) supported by this broker
SUPPORTED: dict[str, tuple[int, int]] = {
    METADATA_VERSION: (MINIMUM_METADATA_VERSION, 30),
    GROUP_VERSION: (0, 1),
    TRANSACTION_VERSION: (0, 2),
    SHARE_VERSION: (0, 1),
}

# What a new cluster is formatted with: each feature's highest supported level (BrokerFeatures
# .defaultFinalizedFeatures, the latest production levels).
DEFAULT_FINALIZED: dict[str, int] = {name: hi for name, (_, hi) in SUPPORTED.items()}

UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3


def metadata_version_name(level: int) -> str:
    return _METADATA_VERSIONS.get(level, (str(level),))[0]


def metadata_version_level(name: str) -> int | None:
    """The level of a release name such as ``4.3-IV0`` (or ``4.3``, its last IV), None if unknown."""
    levels = [level for level, (ibp, _) in _METADATA_VERSIONS.items() if ibp == name or ibp.split("-")[0] == name]
    return max(levels) if levels else None


def _metadata_changed(a: int, b: int) -> bool:
    """MetadataVersion.checkIfMetadataChanged: a level in (low, high] changed the metadata."""
    low, high = min(a, b), max(a, b)
    return any(_METADATA_VERSIONS[v][1] for v in range(low + 1, high + 1))


def _range_text(lo: int, hi: int) -> str:
    return str(lo) if lo == hi else f"{lo}-{hi}"


class FileFeaturesBackend:
    FILE = "kgroup-features.json"

    def __init__(self, data_dir: str):
        self.path = os.path.join(data_dir, self.FILE)

    def load(self) -> tuple[dict[str, int], int]:
        """(finalized levels, epoch)."""
        if not os.path.exists(self.path):
            return dict(DEFAULT_FINALIZED), 0
        doc = json.load(open(self.path))
        return {k: int(v) for k, v in doc["finalized"].items()}, int(doc["epoch"])

    def write(self, features: "Features", finalized: dict[str, int]) -> None:
        from .metadata import _atomic_write
        epoch = features.epoch + 1
        _atomic_write(self.path, json.dumps({"version": 1, "epoch": epoch, "finalized": finalized},
                                            indent=1, sort_keys=True))
        features.set_finalized(finalized, epoch)


class Features:
    """The finalized feature levels of the node (or the cluster)."""

    def __init__(self, data_dir: str, node_id: int):
        self.node_id = node_id
        self.use_backend(FileFeaturesBackend(data_dir))

    def use_backend(self, backend) -> None:
        self.backend = backend
        self.finalized, self.epoch = backend.load()

    def set_finalized(self, finalized: dict[str, int], epoch: int) -> None:
        self.finalized = dict(finalized)
        self.epoch = epoch

    def level(self, name: str) -> int:
        return self.finalized.get(name, 0)

    def update(self, updates: dict[str, tuple[int, int]], validate_only: bool = False) -> None:
        """Apply {feature: (level, upgrade type)} all or nothing; KafkaError(INVALID_UPDATE_VERSION)
        with Kafka's message for the first refused one."""
        proposed = dict(self.finalized)
        proposed.update({name: level for name, (level, _) in updates.items()})
        for name, (level, upgrade_type) in updates.items():
            self._check(name, level, upgrade_type, proposed)
        if validate_only:
            return
        self.backend.write(self, {k: v for k, v in proposed.items() if v != 0 or k == METADATA_VERSION})

    def _check(self, name: str, level: int, upgrade_type: int, proposed: dict[str, int]) -> None:
        def invalid(message):
            return KafkaError(ErrorCode.INVALID_UPDATE_VERSION,
                              f"Invalid update version {level} for feature {name}. {message}")
        if upgrade_type not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
            raise invalid("The controller does not support the given upgrade type.")
        current = self.level(name)
        if level < 0:
            raise invalid("A feature version cannot be less than 0.")
        lo, hi = SUPPORTED.get(name, (0, 0))
        if not lo <= level <= hi:
            what = f"Local controller {self.node_id}"
            raise invalid(f"{what} does not support this feature." if hi == 0
                          else f"{what} only supports versions {_range_text(lo, hi)}")
        if level < current and upgrade_type == UPGRADE:
            raise invalid("Can't downgrade the version of this feature without setting the upgrade type to "
                          "either safe or unsafe downgrade.")
        if level > current and upgrade_type != UPGRADE:
            raise invalid("Can't downgrade to a newer version.")
        if name == METADATA_VERSION:
            if level < current and _metadata_changed(current, level):
                reason = ("Unsafe metadata downgrade is not supported in this version." if upgrade_type == UNSAFE_DOWNGRADE
                          else "Refusing to perform the requested downgrade because it might delete metadata "
                               "information.")
                raise KafkaError(ErrorCode.INVALID_UPDATE_VERSION,
                                 f"Unsupported metadata.version downgrade from {metadata_version_name(current)} to "
                                 f"{metadata_version_name(level)}. {reason}")
            return
        # Feature.validateVersion: the features listed here depend on nothing but metadata.version
        mv = proposed.get(METADATA_VERSION)
        if level >= 1 and (mv is None or mv < MINIMUM_METADATA_VERSION):
            raise invalid(f"{name} could not be set to {level} because it depends on metadata.version="
                          f"{MINIMUM_METADATA_VERSION} ({metadata_version_name(MINIMUM_METADATA_VERSION)})")
