"""Broker metrics in Prometheus' text format (served by kgroup/broker/http.py on
``metrics.listener``; off by default).

What is measured where:
- requests: counted exactly per API and version (``BrokerMetrics.recent`` + ``.settled``; only
  when metrics are on; by the server itself when metrics are the only operation layer, else by
  the request layer ``BrokerMetrics.dispatch``); one in SAMPLE_EVERY (every JoinGroup, SyncGroup,
  LeaveGroup, OffsetDelete and DeleteGroups) is timed from dispatch to its answer being ready (a
  parked JoinGroup or a fsync-waiting OffsetCommit counts until answered), so the latency
  histograms are sampled while the request counts are not. Kafka's
  RequestMetrics (RequestsPerSec, TotalTimeMs with request and version tags) under
  ``kafka_network_requestmetrics_*``.
- everything else is read at scrape time from broker state, on the broker's event loop (the
  HTTP thread asks the loop for a snapshot; nothing is shared across threads):
  the group coordinator metrics under Kafka 4.3's names (type=group-coordinator-metrics:
  group-count{protocol}, classic-group-count{state}, consumer-group-count{state} (KIP-848),
  offset-count, offset-commit-count, offset-expiration-count, offset-deletion-count,
  group-completed-rebalance-count, consumer-group-rebalance-count; Prometheus derives the rates
  with rate()), partition load time (group-coordinator-runtime-metrics),
  log size and flush latency (kafka.log Log Size, LogFlushStats), and the consumer-lag series
  of kafka_exporter with its names and labels (kafka_consumergroup_lag{consumergroup,topic,
  partition}, ...; classic and consumer groups alike), so its Grafana dashboards work unchanged;
  consumer groups (KIP-848) per group: epochs and members (``consumer_groups``); share groups (KIP-932): group-count
  {protocol=share} and share-group-count{state}, members per group, and per share-partition
  SharePartitionMetrics' InFlightMessageCount plus its records by state and delivery count, start
  offset and lag (``share_groups_snapshot``).
- coordinator counters are counted where the coordinator runtime appends its records to
  ``__consumer_offsets`` (``write_observer``, called once per written batch, after a successful
  append, so a failed write counts nothing): an offset commit record is a commit, an offset
  tombstone is an expiration unless it was written while an OffsetDelete or DeleteGroups request
  was handled (a deletion), a group metadata record holding an assignment is a completed
  rebalance (the coordinator writes it when the leader's SyncGroup completes one), a consumer
  group epoch record written without a member's removal is a consumer group rebalance (Kafka
  records ConsumerGroupRebalances where a heartbeat bumps the group epoch: a member joined, a
  subscription or the subscribed topics changed; a removal's bump is not counted). They count
  from this broker's start: what the log held before, replayed at load, is history. They are
  not coordinator state (no replay reproduces them), so the live == replayed property is
  untouched. Counting costs a few attribute reads per written record, far less than decoding
  the log back at scrape time would (docs/benchmarks.md, "Metrics overhead", has the figures).
"""
from __future__ import annotations

import bisect
import functools
import logging
import re
import time

from ..coordinator.consumer_group.consumer_group_records import GROUP_METADATA as CONSUMER_GROUP_METADATA
from ..coordinator.consumer_group.consumer_group_records import MEMBER_METADATA as CONSUMER_MEMBER_METADATA
from ..coordinator.coordinator_records import GROUP_METADATA
from ..protocol.api import API_BY_KEY, ApiKey
from .pending import PendingResponse
from .timeline import decode_assignment, topic_partitions

log = logging.getLogger("kgroup.metrics")
_perf = time.perf_counter
# Latency buckets (seconds), Prometheus histogram style: 0.1 ms .. 10 s.
BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
FLUSH_BUCKETS = BUCKETS
_NAMES = {k: a.request.__name__[:-len("Request")] for k, a in API_BY_KEY.items()}
_DELETING = (ApiKey.OFFSET_DELETE, ApiKey.DELETE_GROUPS)
# Rare and slow, their latency the rebalance's: every one is timed.
_MEMBERSHIP = (ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP, ApiKey.LEAVE_GROUP)
# One request in this many (per API and version) is timed: timing one (Python calls around two
# clock reads and a histogram update, and a wrapper PendingResponse when it is answered later)
# costs a good part of a whole heartbeat's handling, counting it one add (docs/benchmarks.md, "Metrics overhead",
# has the figures). The rare slow kinds are timed every time (dispatch_sampled).
SAMPLE_EVERY = 32
SAMPLE_MASK = SAMPLE_EVERY - 1
# Requests are counted per API key and version in two parts, so the server's inline count
# (server.py, metrics alone) is one add of small ints and one compare, and never allocates:
# CPython caches the ints up to 256, while a count above that is a new int object at each
# increment (the old one freed): with the index arithmetic, about a quarter of the metrics'
# instructions per heartbeat (docs/benchmarks.md, "Metrics overhead").
#   ``recent[api_key][version]``: requests since that API and version last took the sampled path
#   (``dispatch_sampled``), 0 .. SAMPLE_MASK; its request ``n`` goes there when ``n`` reaches
#   SAMPLE_EVERY, i.e. every SAMPLE_EVERY-th (the 1st, 33rd, 65th, ...: it starts at SAMPLE_MASK).
#   The kinds metrics must see every request of stay at SAMPLE_MASK, so each of theirs goes there.
#   (``n < SAMPLE_EVERY``, not ``n & SAMPLE_MASK``: CPython 3.11 specializes an int compare fused
#   with its jump, while ``&`` and an int's truth are generic calls.)
#   ``settled[api_key][version]``: the requests counted there; the exact count is the sum of both.
VERSIONS = 32                   # above every version of every API kgroup serves (checked below)
API_KEYS = max(API_BY_KEY) + 1


class Histogram:
    """The latencies observed: counts per bucket (the last one above every bound) and their sum;
    the observation count is the buckets' sum."""
    __slots__ = ("counts", "sum")

    def __init__(self, buckets=BUCKETS):
        self.counts = [0] * (len(buckets) + 1)
        self.sum = 0.0

    def observe(self, seconds: float, _bisect=bisect.bisect_left, _buckets=BUCKETS) -> None:
        self.counts[_bisect(_buckets, seconds)] += 1
        self.sum += seconds

    def data(self) -> tuple:
        return list(self.counts), self.sum, sum(self.counts)


_NO_TIMINGS = ([0] * (len(BUCKETS) + 1), 0.0, 0)
assert SAMPLE_EVERY & SAMPLE_MASK == 0 and SAMPLE_EVERY <= 256, "a power of two, counted in cached small ints"
assert all(max(a.request._DECODERS) < VERSIONS for a in API_BY_KEY.values() if getattr(a.request, "_DECODERS", None)), \
    "VERSIONS must exceed every request version"


class CoordinatorCounters:
    """Kafka's group coordinator counters (offset-commit-count, offset-expiration-count,
    offset-deletion-count, group-completed-rebalance-count, consumer-group-rebalance-count), counted from the records the
    coordinator runtime appends to ``__consumer_offsets``: ``on_written`` is its
    ``write_observer``, called once per written batch after the append succeeded (a failed write
    counts nothing). Counting happens outside the coordinator's state: no replay rebuilds these,
    and loading a partition counts nothing (what the log held before this start is history)."""
    __slots__ = ("offset_commits", "offset_expirations", "offset_deletions", "completed_rebalances",
                 "consumer_group_rebalances", "deleting")

    def __init__(self):
        self.offset_commits = 0
        self.offset_expirations = 0
        self.offset_deletions = 0
        self.completed_rebalances = 0
        self.consumer_group_rebalances = 0
        # True while an OffsetDelete or DeleteGroups is handled (BrokerMetrics sets it): the
        # offset tombstones written meanwhile are deletions, every other one an expiration.
        self.deleting = False

    def on_written(self, results, offset_commits: int = 0, _group_metadata=GROUP_METADATA,
                   _epoch=CONSUMER_GROUP_METADATA, _member=CONSUMER_MEMBER_METADATA) -> None:
        """Count the records of ``results`` (the coordinator Results of one appended batch);
        ``offset_commits``, when not 0, is their number and every one is an offset commit (the
        runtime's held commits: the durable-commit hot path, counted without a loop).
        Runs between the append and the shard's commit: it must never raise into the runtime."""
        if offset_commits:
            self.offset_commits += offset_commits
            return
        commits = 0
        try:
            for res in results:
                bumps = 0
                removal = False
                for r in res.records:
                    t = r.record_type
                    if t <= 1:                       # 0 legacy, 1 offset commit
                        if r.value is not None:
                            commits += 1
                        elif self.deleting:
                            self.offset_deletions += 1
                        else:
                            self.offset_expirations += 1
                    elif t == _group_metadata and r.value is not None \
                            and any(m.assignment for m in r.value_struct.members):
                        # written when the leader's SyncGroup completes a rebalance
                        self.completed_rebalances += 1
                    elif t == _epoch:
                        if r.value is not None:
                            bumps += 1
                    elif t == _member and r.value is None:
                        removal = True
                if bumps and not removal:
                    # a heartbeat's bump (Kafka's consumerGroupHeartbeat records the sensor; its
                    # member removals, which bump the epoch too, do not)
                    self.consumer_group_rebalances += bumps
        except Exception:
            log.exception("counting the coordinator's records")
        self.offset_commits += commits


class BrokerMetrics:
    """Per-broker metrics state; every method runs on the broker's event loop."""

    def __init__(self, broker):
        self.broker = broker
        # Request counts (see ``recent`` and ``settled`` above) and latencies, per API key and
        # version; ``watched[api_key]``: every request of that API goes through dispatch_sampled.
        self.recent = [[SAMPLE_MASK] * VERSIONS for _ in range(API_KEYS)]
        self.settled = [[-SAMPLE_MASK] * VERSIONS for _ in range(API_KEYS)]
        self.histograms: list[list[Histogram | None]] = [[None] * VERSIONS for _ in range(API_KEYS)]
        self.watched = [False] * API_KEYS
        for api_key in _DELETING + _MEMBERSHIP:
            self._watch(api_key)
        self.timelines = None       # GroupTimelines routed through dispatch (attach_timelines)
        self.flush = Histogram(FLUSH_BUCKETS)
        self.coordinator = CoordinatorCounters()
        broker.data_path.flush_observer = self.observe_flush
        broker.group_coordinator.write_observer = self.coordinator.on_written

    # -- the request path (only when metrics are on) -------------------------------------------
    # Every request is counted and one in SAMPLE_EVERY per API and version is timed. With metrics
    # the only operation layer (a production broker) the server counts inline (server.py, "metrics
    # alone") in ``broker.request_counts`` (this ``recent``): ``n = recent[api_key][version] + 1``,
    # kept when ``n < SAMPLE_EVERY``, and the handler called directly; no Python call layer on the
    # request path. Either way a request whose ``n`` reaches SAMPLE_EVERY (a sampled one, and every
    # request of the kinds metrics must see: OffsetDelete, DeleteGroups and what the timelines
    # watch) goes through ``dispatch_sampled``.
    def dispatch(self, handler, broker, ctx, body, version, inner=None):
        """The request layer (ops.request_hook) when other layers exist: ``inner`` is the next."""
        recent = self.recent[body.API_KEY]
        n = recent[version] + 1
        if n < SAMPLE_EVERY:
            recent[version] = n
            if inner is None:
                return handler(broker, ctx, body, version)
            return inner(handler, broker, ctx, body, version)
        return self.dispatch_sampled(handler, broker, ctx, body, version, inner)

    def attach_timelines(self, timelines) -> None:
        """Route the few requests rebalance timelines watch through them from here (no request
        layer of their own on the hot path)."""
        self.timelines = timelines
        for api_key in timelines.WATCHED:
            self._watch(api_key)

    def _watch(self, api_key: int) -> None:
        """Send every request of ``api_key`` to dispatch_sampled: its ``recent`` counts, folded
        into ``settled``, stay at SAMPLE_MASK."""
        self.watched[api_key] = True
        recent, settled = self.recent[api_key], self.settled[api_key]
        for v in range(VERSIONS):
            settled[v] += recent[v] - SAMPLE_MASK
            recent[v] = SAMPLE_MASK

    def dispatch_sampled(self, handler, broker, ctx, body, version, inner=None):
        """A request whose ``recent`` count reached SAMPLE_EVERY (not stored): it is settled
        here. A sampled one is timed; so is every one of the rare, slow kinds metrics watch: the
        group membership requests (JoinGroup, SyncGroup, LeaveGroup, whose latency is the
        rebalance's; the rebalance timelines watch them too), OffsetDelete and DeleteGroups (the
        offset tombstones their handler writes, synchronously before it answers, are deletions;
        every other offset tombstone is an expiration)."""
        api_key = body.API_KEY
        settled = self.settled[api_key]
        if self.watched[api_key]:             # its ``recent`` stays at SAMPLE_MASK
            settled[version] += 1
            timelines = self.timelines
            if timelines is not None and api_key in timelines.WATCHED:
                inner = functools.partial(timelines.dispatch, inner=inner) if inner is not None else timelines.dispatch
            if api_key in _DELETING:
                return self._dispatch_deleting(handler, broker, ctx, body, version, inner)
        else:
            settled[version] += SAMPLE_EVERY
            self.recent[api_key][version] = 0
        hist = self.histograms[api_key][version] or self._histogram(api_key, version)
        t0 = _perf()
        result = handler(broker, ctx, body, version) if inner is None else inner(handler, broker, ctx, body, version)
        if type(result) is PendingResponse and not result.answered:
            return self._timed_pending(result, hist, t0)
        hist.observe(_perf() - t0)    # answered at once (or nothing to send: acks=0)
        return result

    def _dispatch_deleting(self, handler, broker, ctx, body, version, inner):
        # Its handler writes its tombstones synchronously, before it returns (execute_split):
        # those are deletions. Every one of these (rare) requests is timed.
        self.coordinator.deleting = True
        t0 = _perf()
        try:
            result = handler(broker, ctx, body, version) if inner is None else inner(handler, broker, ctx, body, version)
        finally:
            self.coordinator.deleting = False
        if type(result) is PendingResponse and not result.answered:
            return self._timed_pending(result, self._histogram(body.API_KEY, version), t0)
        self._histogram(body.API_KEY, version).observe(_perf() - t0)
        return result

    def _histogram(self, api_key: int, version: int) -> Histogram:
        h = self.histograms[api_key][version]
        if h is None:
            h = self.histograms[api_key][version] = Histogram()
        return h

    def request_count(self, api_key: int, version: int) -> int:
        return self.settled[api_key][version] + self.recent[api_key][version]

    def request_stats(self) -> dict:
        """(api key, version) -> (requests, bucket counts, latency sum, observations), for every
        API and version that had a request."""
        out = {}
        for api_key in range(API_KEYS):
            for version in range(VERSIONS):
                n = self.request_count(api_key, version)
                if n:
                    h = self.histograms[api_key][version]
                    out[(api_key, version)] = (n,) + (h.data() if h is not None else _NO_TIMINGS)
        return out

    @staticmethod
    def _timed_pending(inner: PendingResponse, hist, t0) -> PendingResponse:
        outer = PendingResponse(inner.flush_only)   # timing it does not change why it waits

        def timed(answered):        # answered or failed: either way the request took this long
            hist.observe(_perf() - t0)
            answered.then(to=outer)
        inner.listen(timed)
        return outer

    def observe_flush(self, seconds: float) -> None:
        self.flush.observe(seconds)

    # -- scrape time ---------------------------------------------------------------------------
    def snapshot(self) -> dict:
        """Plain data of everything the scrape and the console show (run on the loop)."""
        b = self.broker
        c = self.coordinator
        topics = {}
        log_sizes = {}
        for t in b.metadata.topics.values():
            parts = []
            for p in range(t.num_partitions):
                plog = b.data_path.log(t.name, p)
                if plog is None:
                    continue
                parts.append((p, plog.log_start_offset, plog.high_watermark))
                log_sizes[(t.name, p)] = plog.size_in_bytes
            topics[t.name] = parts
        groups = {}
        consumer_groups = {}
        for shard in b.group_coordinator.shards.values():
            if not shard.is_loaded:
                continue
            offsets = shard.offset_metadata_manager.offsets
            for cg in shard.consumer_group_manager.consumer_groups():
                consumer_groups[cg.group_id] = consumer_group_snapshot(
                    b, cg, shard.consumer_group_manager.default_assignor, offsets.get(cg.group_id, {}))
            for g in shard.group_metadata_manager.classic_groups():
                gid = g.group_id
                members = []
                for m in g.members.values():
                    assignment = decode_assignment(m.assignment) if g.protocol_type == "consumer" else {}
                    members.append({"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                                    "client_id": m.client_id, "client_host": m.client_host,
                                    "assignment": assignment})
                committed = {}
                for topic_name, parts in offsets.get(gid, {}).items():
                    for p, om in parts.items():
                        committed[(topic_name, p)] = om.committed_offset
                groups[gid] = {"state": str(g.state), "protocol_type": g.protocol_type or "",
                               "protocol": g.protocol_name or "", "generation": g.generation_id,
                               "leader": g.leader_id, "members": members, "offsets": committed}
        return {"topics": topics, "log_sizes": log_sizes, "groups": groups, "consumer_groups": consumer_groups,
                "share_groups": share_groups_snapshot(b),
                "requests": self.request_stats(),
                "flush": self.flush.data(),
                "offset_commits": c.offset_commits,
                "offset_expirations": c.offset_expirations,
                "offset_deletions": c.offset_deletions,
                "completed_rebalances": c.completed_rebalances,
                "consumer_group_rebalances": c.consumer_group_rebalances,
                "partition_load_ms": dict(getattr(b.group_coordinator, "partition_load_ms", {}) or {}),
                "client_metrics": b.metadata.client_metrics.snapshot(),
                "node_id": b.config.node_id}


def consumer_group_snapshot(b, g, default_assignor: str, group_offsets) -> dict:
    """A consumer group (KIP-848) as the console and /metrics show it: state, group and
    assignment epochs, the assignor, per member its epoch, reconciliation state, assigned,
    pending-revocation and target partitions, and the group's committed offsets."""
    members = []
    for m in g.members.values():
        members.append({"member_id": m.member_id, "member_epoch": m.member_epoch,
                        "previous_member_epoch": m.previous_member_epoch, "member_state": m.state.name,
                        "group_instance_id": m.instance_id, "rack_id": m.rack_id, "client_id": m.client_id,
                        "client_host": m.client_host, "classic": m.classic_member_metadata is not None,
                        "subscribed_topics": sorted(m.subscribed_topic_names),
                        "subscribed_topic_regex": m.subscribed_topic_regex,
                        "assignment": topic_partitions(b, m.assigned_partitions),
                        "pending_revocation": topic_partitions(b, m.partitions_pending_revocation),
                        "target_assignment": topic_partitions(b, g.target_assignment.get(m.member_id, {}))})
    committed = {(topic_name, p): om.committed_offset
                 for topic_name, parts in group_offsets.items() for p, om in parts.items()}
    return {"state": g.state_string(), "group_epoch": g.group_epoch, "assignment_epoch": g.assignment_epoch,
            "assignor": g.preferred_server_assignor(default_assignor), "members": members, "offsets": committed}


def share_groups_snapshot(b) -> dict:
    """Share groups (KIP-932) as the console and /metrics show them: per group its state, epochs
    and members; per share-partition with state its start offset, records in flight by state and
    by delivery count, and lag (Kafka's DescribeShareGroupOffsets lag: high watermark - start
    offset - records delivered completely). A share-partition this broker holds in memory is read
    live; any other from what the share coordinator holds (then nothing is acquired: acquisitions
    are persisted as available)."""
    out = {}
    live = getattr(b, "share_partitions", None)
    live_partitions = live.partitions if live is not None else {}
    coordinator = getattr(b, "share_coordinator", None)
    for shard in b.group_coordinator.shards.values():
        if not shard.is_loaded:
            continue
        for g in shard.share_group_manager.share_groups():
            gid = g.group_id
            members = []
            for m in g.members.values():
                assignment = {}
                for topic_id, parts in m.assigned_partitions.items():
                    t = b.metadata.by_id(topic_id)
                    if t is not None:
                        assignment[t.name] = sorted(parts)
                members.append({"member_id": m.member_id, "member_epoch": m.member_epoch, "client_id": m.client_id,
                                "client_host": m.client_host, "rack_id": m.rack_id,
                                "subscribed_topics": sorted(m.subscribed_topic_names), "assignment": assignment})
            partitions = []
            for topic_id, parts in sorted(g.initialized_partitions().items()):
                t = b.metadata.by_id(topic_id)
                if t is None:
                    continue
                for p in sorted(parts):
                    key = (gid, topic_id, p)
                    sp = live_partitions.get(key)
                    stats = _live_share_partition(sp) if sp is not None else _stored_share_partition(coordinator, key)
                    if stats is None:
                        continue
                    plog = b.data_path.log(t.name, p)
                    start, done = stats["start_offset"], stats["delivery_complete_count"]
                    stats["lag"] = plog.high_watermark - start - done if plog is not None and start >= 0 else None
                    stats.update(topic=t.name, partition=p)
                    partitions.append(stats)
            out[gid] = {"state": g.state_string(), "group_epoch": g.group_epoch, "assignment_epoch": g.assignment_epoch,
                        "members": members, "partitions": partitions}
    return out


_STATE_NAMES = {0: "Available", 1: "Acquired", 2: "Acknowledged", 4: "Archived"}


def _share_partition_stats(start_offset: int, records) -> dict:
    """``records``: (state, delivery count) of each record in flight."""
    by_state = {name: 0 for name in _STATE_NAMES.values()}
    by_count: dict[int, int] = {}
    for state, count in records:
        by_state[state] += 1
        if state in ("Available", "Acquired") and count > 0:
            by_count[count] = by_count.get(count, 0) + 1
    return {"start_offset": start_offset, "in_flight": sum(by_state.values()), "records": by_state,
            "delivery_counts": dict(sorted(by_count.items())),
            "delivery_complete_count": by_state["Acknowledged"] + by_state["Archived"]}


def _live_share_partition(sp) -> dict:
    out = _share_partition_stats(sp.start_offset, ((state.title(), count) for state, count, _ in sp.view().values()))
    out["loaded"] = True
    return out


def _stored_share_partition(coordinator, key) -> dict | None:
    if coordinator is None:
        return None
    shard = coordinator.shards.get(coordinator.partition_for(*key))
    state = shard.state.get(key) if shard is not None else None
    if state is None:
        return None
    records = ((_STATE_NAMES.get(b[2], "Available"), b[3]) for b in state.state_batches
               for _ in range(max(b[0], state.start_offset), b[1] + 1))
    out = _share_partition_stats(state.start_offset, records)
    out["loaded"] = False
    return out


# -- Prometheus text format --------------------------------------------------------------------

def _esc(v) -> str:
    return str(v).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(**kv) -> str:
    return "{" + ",".join(f'{k}="{_esc(v)}"' for k, v in kv.items()) + "}" if kv else ""


def _label_name(key: str) -> str:
    """An OTLP attribute key as a Prometheus label name."""
    name = re.sub(r"[^a-zA-Z0-9_]", "_", key)
    return name if name and not name[0].isdigit() else "_" + name


def _fmt(v) -> str:
    return repr(float(v)) if isinstance(v, float) else str(v)


def render(snap: dict) -> str:
    out: list[str] = []

    def family(name, kind, help_text, samples):
        out.append(f"# HELP {name} {help_text}")
        out.append(f"# TYPE {name} {kind}")
        for labels, value in samples:
            out.append(f"{name}{labels} {_fmt(value)}")

    def histogram(name, help_text, series, buckets=BUCKETS):
        out.append(f"# HELP {name} {help_text}")
        out.append(f"# TYPE {name} histogram")
        for labels, (counts, total, n) in series:
            cum = 0
            for le, c in zip(buckets, counts):
                cum += c
                out.append(f"{name}_bucket{_labels(**labels, le=repr(le))} {cum}")
            out.append(f"{name}_bucket{_labels(**labels, le='+Inf')} {n}")
            out.append(f"{name}_sum{_labels(**labels)} {_fmt(total)}")
            out.append(f"{name}_count{_labels(**labels)} {n}")

    # requests (Kafka's RequestMetrics: request and version tags)
    reqs = sorted(snap["requests"].items())
    family("kafka_network_requestmetrics_requests_total", "counter",
           "Requests received, per API and version (Kafka's RequestsPerSec)",
           [(_labels(request=_NAMES.get(k, k), version=v), h[0]) for (k, v), h in reqs])
    histogram("kafka_network_requestmetrics_total_time_seconds",
              "Time from a request's dispatch to its answer being ready (Kafka's TotalTimeMs; "
              f"one request in {SAMPLE_EVERY} per API and version is timed)",
              [({"request": _NAMES.get(k, k), "version": v}, h[1:]) for (k, v), h in reqs])

    # group coordinator (Kafka 4.0: kafka.server:type=group-coordinator-metrics)
    groups = snap["groups"]
    by_state: dict[str, int] = {s: 0 for s in ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty")}
    for g in groups.values():
        by_state[g["state"]] = by_state.get(g["state"], 0) + 1
    prefix = "kafka_server_group_coordinator_metrics_"
    share_groups = snap.get("share_groups", {})
    consumer_groups = snap.get("consumer_groups", {})
    family(prefix + "group_count", "gauge", "Groups per rebalance protocol (group-count)",
           [(_labels(protocol="classic"), len(groups)), (_labels(protocol="consumer"), len(consumer_groups)),
            (_labels(protocol="share"), len(share_groups))])
    # Kafka's ConsumerGroupState tags, lower case (a deleted group is gone at once: Dead stays 0)
    consumer_by_state = {s: 0 for s in ("empty", "assigning", "reconciling", "stable", "dead")}
    for g in consumer_groups.values():
        consumer_by_state[g["state"].lower()] = consumer_by_state.get(g["state"].lower(), 0) + 1
    family(prefix + "consumer_group_count", "gauge", "Consumer groups (KIP-848) per state (consumer-group-count)",
           [(_labels(state=s), n) for s, n in consumer_by_state.items()])
    share_by_state = {"Empty": 0, "Stable": 0, "Dead": 0}
    for g in share_groups.values():
        share_by_state[g["state"]] = share_by_state.get(g["state"], 0) + 1
    family(prefix + "share_group_count", "gauge", "Share groups per state (share-group-count)",
           [(_labels(state=s), n) for s, n in sorted(share_by_state.items())])
    family(prefix + "classic_group_count", "gauge", "Classic groups per state (classic-group-count)",
           [(_labels(state=s), n) for s, n in sorted(by_state.items())])
    family(prefix + "offset_count", "gauge", "Committed offsets retained (offset-count)",
           [("", sum(len(g["offsets"]) for g in groups.values())
             + sum(len(g["offsets"]) for g in consumer_groups.values()))])
    family(prefix + "offset_commit_count", "counter", "Offsets committed (offset-commit-count; rate() for offset-commit-rate)",
           [("", snap["offset_commits"])])
    family(prefix + "offset_expiration_count", "counter", "Offsets expired (offset-expiration-count)",
           [("", snap["offset_expirations"])])
    family(prefix + "offset_deletion_count", "counter", "Offsets deleted by OffsetDelete/DeleteGroups (offset-deletion-count)",
           [("", snap["offset_deletions"])])
    family(prefix + "group_completed_rebalance_count", "counter",
           "Classic group rebalances completed (group-completed-rebalance-count)",
           [("", snap["completed_rebalances"])])
    family(prefix + "consumer_group_rebalance_count", "counter",
           "Consumer group rebalances: group epoch bumps by a heartbeat (consumer-group-rebalance-count; "
           "rate() for consumer-group-rebalance-rate)", [("", snap.get("consumer_group_rebalances", 0))])
    loads = snap["partition_load_ms"]
    rt = "kafka_server_group_coordinator_runtime_metrics_"
    family(rt + "partition_load_time_max", "gauge", "Longest __consumer_offsets partition load, ms",
           [("", max(loads.values()) if loads else 0.0)])
    family(rt + "partition_load_time_avg", "gauge", "Average __consumer_offsets partition load, ms",
           [("", sum(loads.values()) / len(loads) if loads else 0.0)])

    # share groups (KIP-932): members and state per group; per share-partition Kafka's
    # SharePartitionMetrics InFlightMessageCount, then the records by state and delivery count,
    # the start offset and the lag DescribeShareGroupOffsets reports
    family("kgroup_share_group_members", "gauge", "Members of a share group",
           [(_labels(group=gid, state=g["state"]), len(g["members"])) for gid, g in sorted(share_groups.items())])
    family("kgroup_share_group_epoch", "gauge", "A share group's group epoch",
           [(_labels(group=gid), g["group_epoch"]) for gid, g in sorted(share_groups.items())])
    sp_rows = [(gid, sp) for gid, g in sorted(share_groups.items()) for sp in g["partitions"]]

    # consumer groups (KIP-848): epochs per group, members' epochs
    family("kgroup_consumer_group_epoch", "gauge", "A consumer group's group epoch",
           [(_labels(group=gid), g["group_epoch"]) for gid, g in sorted(consumer_groups.items())])
    family("kgroup_consumer_group_assignment_epoch", "gauge",
           "A consumer group's assignment epoch (the target assignment's; behind the group epoch while Assigning)",
           [(_labels(group=gid), g["assignment_epoch"]) for gid, g in sorted(consumer_groups.items())])
    family("kgroup_consumer_group_member_epoch", "gauge", "A consumer group member's member epoch",
           [(_labels(group=gid, member_id=m["member_id"], client_id=m["client_id"]), m["member_epoch"])
            for gid, g in sorted(consumer_groups.items()) for m in g["members"]])

    def sp_labels(gid, sp, **more):
        return _labels(group=gid, topic=sp["topic"], partition=sp["partition"], **more)
    family("kafka_server_share_partition_metrics_in_flight_message_count", "gauge",
           "Records in flight in a share-partition (SharePartitionMetrics InFlightMessageCount)",
           [(sp_labels(gid, sp), sp["in_flight"]) for gid, sp in sp_rows])
    family("kgroup_share_partition_records", "gauge",
           "Records in flight in a share-partition, by state (Available, Acquired, Acknowledged, Archived)",
           [(sp_labels(gid, sp, state=st), n) for gid, sp in sp_rows for st, n in sp["records"].items()])
    family("kgroup_share_partition_delivery_count_records", "gauge",
           "Records in flight not yet delivered completely, by how many times they were delivered",
           [(sp_labels(gid, sp, delivery_count=c), n) for gid, sp in sp_rows for c, n in sp["delivery_counts"].items()])
    family("kgroup_share_partition_start_offset", "gauge", "A share-partition's start offset",
           [(sp_labels(gid, sp), sp["start_offset"]) for gid, sp in sp_rows])
    family("kgroup_share_partition_lag", "gauge",
           "A share-partition's lag: high watermark - start offset - records delivered completely",
           [(sp_labels(gid, sp), sp["lag"]) for gid, sp in sp_rows if sp["lag"] is not None])

    # storage (kafka.log:type=Log,name=Size and LogFlushStats)
    family("kafka_log_log_size", "gauge", "Bytes of a partition's log (kafka.log:type=Log,name=Size)",
           [(_labels(topic=t, partition=p), size) for (t, p), size in sorted(snap["log_sizes"].items())])
    histogram("kafka_log_logflushstats_flush_time_seconds", "Group-commit flush (fsync/syncfs) durations",
              [({}, snap["flush"])])

    # client metrics (KIP-714): each client instance's last pushed values, by metric name
    samples = []
    for instance_id, attrs, values in snap.get("client_metrics", ()):
        who = {"client_instance_id": instance_id, "client_id": attrs.get("client_id") or "",
               "client_software_name": attrs.get("client_software_name") or "",
               "client_software_version": attrs.get("client_software_version") or ""}
        for (metric, metric_attrs), value in sorted(values.items()):
            labels = dict(who, metric=metric)
            labels.update({_label_name(k): v for k, v in metric_attrs if _label_name(k) not in labels})
            samples.append((_labels(**labels), value))
    family("kgroup_client_telemetry", "gauge", "Client metrics pushed with PushTelemetry (KIP-714), the last value "
           "per client instance", samples)

    # kafka_exporter's series, names and labels
    topics = snap["topics"]
    family("kafka_brokers", "gauge", "Number of Brokers in the Kafka Cluster.", [("", 1)])
    family("kafka_topic_partitions", "gauge", "Number of partitions for this Topic",
           [(_labels(topic=t), len(ps)) for t, ps in sorted(topics.items())])
    family("kafka_topic_partition_current_offset", "gauge", "Current Offset of a Broker at Topic/Partition",
           [(_labels(topic=t, partition=p), hw) for t, ps in sorted(topics.items()) for p, _, hw in ps])
    family("kafka_topic_partition_oldest_offset", "gauge", "Oldest Offset of a Broker at Topic/Partition",
           [(_labels(topic=t, partition=p), ls) for t, ps in sorted(topics.items()) for p, ls, _ in ps])
    family("kafka_topic_partition_leader", "gauge", "Leader Broker ID of this Topic/Partition",
           [(_labels(topic=t, partition=p), snap["node_id"]) for t, ps in sorted(topics.items()) for p, _, _ in ps])
    family("kafka_topic_partition_replicas", "gauge", "Number of Replicas for this Topic/Partition",
           [(_labels(topic=t, partition=p), 1) for t, ps in sorted(topics.items()) for p, _, _ in ps])
    family("kafka_topic_partition_in_sync_replica", "gauge", "Number of In-Sync Replicas for this Topic/Partition",
           [(_labels(topic=t, partition=p), 1) for t, ps in sorted(topics.items()) for p, _, _ in ps])
    family("kafka_topic_partition_under_replicated_partition", "gauge", "1 if Topic/Partition is under Replicated",
           [(_labels(topic=t, partition=p), 0) for t, ps in sorted(topics.items()) for p, _, _ in ps])
    hw = {(t, p): h for t, ps in topics.items() for p, _, h in ps}
    cur, lag, cur_sum, lag_sum = [], [], {}, {}
    every_group = sorted([*groups.items(), *consumer_groups.items()], key=lambda kv: kv[0])
    for gid, g in every_group:
        for (t, p), off in sorted(g["offsets"].items()):
            if (t, p) not in hw:
                continue
            lb = _labels(consumergroup=gid, topic=t, partition=p)
            cur.append((lb, off))
            lag.append((lb, hw[(t, p)] - off))
            cur_sum[(gid, t)] = cur_sum.get((gid, t), 0) + off
            lag_sum[(gid, t)] = lag_sum.get((gid, t), 0) + hw[(t, p)] - off
    family("kafka_consumergroup_current_offset", "gauge", "Current Offset of a ConsumerGroup at Topic/Partition", cur)
    family("kafka_consumergroup_current_offset_sum", "gauge", "Current Offset of a ConsumerGroup at Topic for all partitions",
           [(_labels(consumergroup=g, topic=t), v) for (g, t), v in sorted(cur_sum.items())])
    family("kafka_consumergroup_lag", "gauge", "Current Approximate Lag of a ConsumerGroup at Topic/Partition", lag)
    family("kafka_consumergroup_lag_sum", "gauge", "Current Approximate Lag of a ConsumerGroup at Topic for all partitions",
           [(_labels(consumergroup=g, topic=t), v) for (g, t), v in sorted(lag_sum.items())])
    family("kafka_consumergroup_members", "gauge", "Amount of members in a consumer group",
           [(_labels(consumergroup=gid), len(g["members"])) for gid, g in every_group])
    return "\n".join(out) + "\n"
