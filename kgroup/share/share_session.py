"""Share sessions (Kafka's ShareSessionCache and ShareSessionContext, KIP-932). Pure.

A share consumer fetches through a session keyed by (group id, member id): epoch 0 opens one (a
session the member already had is replaced, its records released), -1 closes it (acknowledgements
only: it fetches nothing), and any other epoch must be the session's next one, after which the
epoch moves on. A request adds the partitions it names to the session; ForgottenTopicsData removes
partitions. At most ``max_sessions`` sessions exist (group.share.max.share.sessions): one more is
SHARE_SESSION_LIMIT_REACHED. A session that is not found is SHARE_SESSION_NOT_FOUND; a wrong epoch
INVALID_SHARE_SESSION_EPOCH.
"""
from __future__ import annotations

from ..protocol.errors import ErrorCode, KafkaError

INITIAL_EPOCH = 0
FINAL_EPOCH = -1


def next_epoch(epoch: int) -> int:
    """Kafka's ShareRequestMetadata.nextEpoch: wraps to 1, never back to 0."""
    return 1 if epoch >= 2**31 - 1 else epoch + 1


class ShareSession:
    __slots__ = ("group_id", "member_id", "epoch", "partitions", "connection")

    def __init__(self, group_id: str, member_id: str, connection=None):
        self.group_id = group_id
        self.member_id = member_id
        self.epoch = next_epoch(INITIAL_EPOCH)
        self.partitions: dict[tuple[bytes, int], None] = {}   # (topic id, partition), in request order
        self.connection = connection


class ShareSessionCache:
    def __init__(self, max_sessions: int = 2000):
        self.max_sessions = max_sessions
        self.sessions: dict[tuple[str, str], ShareSession] = {}

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        return self.sessions.get((group_id, member_id))

    def open(self, group_id: str, member_id: str, partitions, connection=None) -> tuple[ShareSession, ShareSession | None]:
        """Epoch 0: a new session (returns it and the one it replaced, whose records the caller
        releases)."""
        key = (group_id, member_id)
        old = self.sessions.pop(key, None)
        if len(self.sessions) >= self.max_sessions:
            if old is not None:
                self.sessions[key] = old
            raise KafkaError(ErrorCode.SHARE_SESSION_LIMIT_REACHED)
        session = self.sessions[key] = ShareSession(group_id, member_id, connection)
        for tp in partitions:
            session.partitions[tp] = None
        return session, old

    def check(self, group_id: str, member_id: str, epoch: int) -> ShareSession:
        """A request on an existing session at ``epoch`` (not 0): the session, or the error."""
        session = self.sessions.get((group_id, member_id))
        if session is None:
            raise KafkaError(ErrorCode.SHARE_SESSION_NOT_FOUND)
        if epoch != FINAL_EPOCH and epoch != session.epoch:
            raise KafkaError(ErrorCode.INVALID_SHARE_SESSION_EPOCH)
        return session

    def update(self, session: ShareSession, added, forgotten) -> None:
        """An incremental request: the epoch moves on, partitions added and forgotten."""
        for tp in forgotten:
            session.partitions.pop(tp, None)
        for tp in added:
            session.partitions[tp] = None
        session.epoch = next_epoch(session.epoch)

    def close(self, group_id: str, member_id: str) -> ShareSession | None:
        return self.sessions.pop((group_id, member_id), None)

    def sessions_of_connection(self, connection) -> list[ShareSession]:
        return [s for s in self.sessions.values() if s.connection is connection]
