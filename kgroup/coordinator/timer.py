"""Timers keyed by name, as data: a deadline per key, rescheduling a key replaces it.

The shard never reads a clock. Every entry point receives ``now_ms``; ``CoordinatorTimer.now``
holds it for the duration of the call, so "in 3000 ms" means ``now + 3000``. The *scheduler*
(injected; ``TimerQueue`` is the default and what tests use with a fake clock) only stores
``key -> deadline`` and hands back the keys whose deadline has passed; the shard keeps the
operation to run for each key. The runtime asks ``TimerQueue.next_deadline()`` when to wake
up and then calls ``GroupCoordinatorShard.poll_timers(now_ms)``.

Every coordinator timer's key is built here (Kafka's names, plus two of ours for what Kafka folds
into ``heartbeat-``/``join-``), as a tuple of the name and the group (and member) id. Classic
groups: ``("heartbeat", group, member)``, ``("pending", group, member)`` (a KIP-394 pending
member), ``("join", group)``, ``("initial-delay", group)``, ``("sync", group)``; consumer groups
(KIP-848): ``("consumer-group-{session,rebalance,join,sync}-timeout", group, member)``; the
shard's ``expire-group-metadata``; the transaction coordinator's ``transaction-abort`` and
``transactionalId-expiration`` (strings). A tuple holds the ids the group already holds, where a
formatted name would be a new string of ~100 bytes kept for every member.
"""
from __future__ import annotations

import functools
import heapq
import itertools
from typing import Hashable

Key = Hashable          # a tuple as above, or a string
EXPIRE_GROUP_METADATA_KEY = "expire-group-metadata"
# the transaction coordinator's periodic tasks (TransactionCoordinator.startup)
ABORT_TIMED_OUT_TRANSACTIONS_KEY = "transaction-abort"
EXPIRE_TRANSACTIONAL_IDS_KEY = "transactionalId-expiration"


def heartbeat_key(group_id: str, member_id: str) -> tuple:
    return ("heartbeat", group_id, member_id)


def pending_key(group_id: str, member_id: str) -> tuple:
    return ("pending", group_id, member_id)


def join_key(group_id: str) -> tuple:
    return ("join", group_id)


def initial_delay_key(group_id: str) -> tuple:
    return ("initial-delay", group_id)


def sync_key(group_id: str) -> tuple:
    return ("sync", group_id)


def session_key(group_id: str, member_id: str) -> tuple:
    """A consumer group member's session (KIP-848)."""
    return ("consumer-group-session-timeout", group_id, member_id)


def rebalance_key(group_id: str, member_id: str) -> tuple:
    """A consumer group member must revoke within its rebalance timeout."""
    return ("consumer-group-rebalance-timeout", group_id, member_id)


def join_timeout_key(group_id: str, member_id: str) -> tuple:
    """A classic member inside a consumer group told to rejoin must do so within its rebalance timeout."""
    return ("consumer-group-join-timeout", group_id, member_id)


def sync_timeout_key(group_id: str, member_id: str) -> tuple:
    """A classic member inside a consumer group must sync within its rebalance timeout of its join."""
    return ("consumer-group-sync-timeout", group_id, member_id)


def cancel_member_timers(timer, group_id: str, member_id: str) -> None:
    """Every timer of a consumer group member."""
    for key in (session_key(group_id, member_id), rebalance_key(group_id, member_id),
                join_timeout_key(group_id, member_id), sync_timeout_key(group_id, member_id)):
        timer.cancel(key)


class TimerQueue:
    """The default scheduler: ``schedule(key, deadline_ms)``, ``cancel(key)``,
    ``poll_expired(now_ms)`` (expired keys, earliest deadline first, then in scheduling order,
    removed from the queue).

    A heap of ``(deadline, seq, key)`` entries plus the truth, ``key -> (deadline, heap_seq,
    order_seq)``: ``heap_seq`` names the key's live heap entry, ``order_seq`` is the seq of its
    last ``schedule`` (the tie-break). Moving a key *later* or to the same deadline (a heartbeat
    pushing a session deadline) only updates the dict: the heap entry, which sorts no later than
    the truth, is re-filed when it surfaces. So a member's heartbeats cost a dict update, and a
    heap push once per session timeout. A new key, or one moved earlier, pushes a fresh entry
    (the old one goes stale and is dropped when it surfaces, or by ``_compact`` once stale entries
    are an eighth of the live ones: a cancelled key's entry would otherwise hold its key and
    deadline until that deadline, a session timeout away)."""

    def __init__(self):
        self._deadlines: dict[Key, tuple[int, int, int]] = {}
        self._heap: list[tuple[int, int, Key]] = []
        self._seq = itertools.count()
        # Heap pushes so far: only a push can make the earliest deadline earlier, so a caller
        # that armed a wake-up for next_deadline() need not look again until this changes.
        self.pushes = 0

    def schedule(self, key: Key, deadline_ms: int) -> None:
        seq = next(self._seq)
        old = self._deadlines.get(key)
        if old is not None and old[0] <= deadline_ms:
            self._deadlines[key] = (deadline_ms, old[1], seq)
            return
        self._deadlines[key] = (deadline_ms, seq, seq)
        heap = self._heap
        heapq.heappush(heap, (deadline_ms, seq, key))
        self.pushes += 1
        live = len(self._deadlines)
        if len(heap) > live + (live >> 3) + 8:
            self._compact()

    def _compact(self) -> None:
        """Rebuild the heap from the live entries once stale ones outnumber them."""
        live = self._deadlines
        for key, (d, _, order) in live.items():
            live[key] = (d, order, order)
        self._heap = [(d, order, key) for key, (d, _, order) in live.items()]
        heapq.heapify(self._heap)

    def cancel(self, key: Key) -> None:
        self._deadlines.pop(key, None)

    def deadline(self, key: Key) -> int | None:
        e = self._deadlines.get(key)
        return None if e is None else e[0]

    def __contains__(self, key: Key) -> bool:
        return key in self._deadlines

    def __len__(self) -> int:
        return len(self._deadlines)

    def keys(self) -> list[Key]:
        return sorted(self._deadlines, key=lambda k: self._deadlines[k][::2])

    def _drop_stale(self) -> None:
        """Make the heap's top the live entry with the smallest (deadline, order_seq)."""
        heap, live = self._heap, self._deadlines
        while heap:
            d, seq, key = heap[0]
            current = live.get(key)
            if current is None or current[1] != seq:
                heapq.heappop(heap)                              # cancelled or replaced
            elif current[0] != d or current[2] != seq:           # moved later: re-file it
                heapq.heapreplace(heap, (current[0], current[2], key))
                live[key] = (current[0], current[2], current[2])
            else:
                return

    def next_deadline(self) -> int | None:
        self._drop_stale()
        return self._heap[0][0] if self._heap else None

    def poll_expired(self, now_ms: int) -> list[Key]:
        out: list[Key] = []
        while True:
            self._drop_stale()
            if not self._heap or self._heap[0][0] > now_ms:
                return out
            _, _, key = heapq.heappop(self._heap)
            del self._deadlines[key]
            out.append(key)


class CoordinatorTimer:
    """The shard's view of the scheduler: the operation and deadline behind every key.

    A timer that every member has (a session) passes a long-lived function and the member's
    ``args`` rather than a closure made per member, so its entry is one small tuple,
    ``(deadline, op, *args)``, instead of a function object with its cells."""

    def __init__(self, scheduler):
        self.scheduler = scheduler
        self.now = 0
        self._ops: dict[Key, tuple] = {}       # key -> (deadline, op, *args)
        # One set per pop_expired running: the keys (re)scheduled since it started, which wait
        # for the next poll.
        self._polls: list[set[Key]] = []

    def schedule(self, key: Key, delay_ms: int, op, args: tuple = ()) -> None:
        """Run ``op(*args, result)`` at ``now + delay_ms``; replaces any timer under ``key``."""
        deadline = self.now + max(0, delay_ms)
        self._ops[key] = (deadline, op, *args)
        for rescheduled in self._polls:
            rescheduled.add(key)
        self.scheduler.schedule(key, deadline)

    def cancel(self, key: Key) -> None:
        if self._ops.pop(key, None) is not None:
            self.scheduler.cancel(key)

    def deadline(self, key: Key) -> int | None:
        e = self._ops.get(key)
        return None if e is None else e[0]

    def pop_expired(self, now_ms: int):
        """Yield ``(key, op)`` for the operations due at ``now_ms`` (``op(result)`` runs one, its
        ``args`` bound), one at a time, so an operation that cancels or reschedules another key
        takes effect before that key would run. A timer (re)scheduled while this poll runs waits
        for the next poll, so a zero delay cannot spin."""
        rescheduled: set[Key] = set()
        self._polls.append(rescheduled)
        try:
            while True:
                keys = self.scheduler.poll_expired(now_ms)
                if not keys:
                    return
                fired = False
                deferred = []
                for key in keys:
                    entry = self._ops.get(key)
                    if entry is None or entry[0] > now_ms:
                        continue  # cancelled, or rescheduled later by an earlier operation
                    if key in rescheduled:
                        deferred.append(key)
                        continue
                    del self._ops[key]
                    fired = True
                    yield key, functools.partial(entry[1], *entry[2:]) if len(entry) > 2 else entry[1]
                for key in deferred:
                    entry = self._ops.get(key)
                    if entry is not None and key in rescheduled:
                        self.scheduler.schedule(key, entry[0])
                if not fired:
                    return
        finally:
            self._polls = [r for r in self._polls if r is not rescheduled]
