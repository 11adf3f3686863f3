#!/usr/bin/env python3
"""Codec micro-benchmark: kgroup's generated codecs vs kafka-python's protocol classes.

One op = decode a message's bytes into an object and encode that object back to bytes.

kafka-python side: the json-schema-driven ``ApiMessage`` classes (``kafka.protocol.consumer`` /
``kafka.protocol.metadata``, built on ``kafka/protocol/api_message.py`` + ``data_container.py``
with compiled encoders/decoders from ``kafka/protocol/schemas``). Those are what kafka-python
3.x itself puts on the wire (``kafka/protocol/parser.py`` calls ``request.encode(...)`` /
``response_type.decode(...)`` on them); ``kafka.protocol.old`` is only used by its own
old-vs-new benchmark.

Before timing, every case checks that both libraries produce byte-identical encodings of the
same message (built independently on each side) and that each round-trips its own bytes.

Usage (from the repo root)::

    python benchmarks/codec_bench.py [--json] [--repeat 5] [--duration 0.3] [--profile]
"""
from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import os
import platform
import pstats
import sys
import time
import uuid

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from kgroup.protocol.messages.heartbeat import HeartbeatResponse as KgHeartbeatResponse  # noqa: E402
from kgroup.protocol.messages.join_group import JoinGroupRequest as KgJoinGroupRequest  # noqa: E402
from kgroup.protocol.messages.metadata import MetadataResponse as KgMetadataResponse  # noqa: E402
from kgroup.protocol.messages.offset_commit import OffsetCommitRequest as KgOffsetCommitRequest  # noqa: E402

try:
    import kafka
    from kafka.protocol.consumer import (HeartbeatResponse as KpHeartbeatResponse,
                                         JoinGroupRequest as KpJoinGroupRequest,
                                         OffsetCommitRequest as KpOffsetCommitRequest)
    from kafka.protocol.metadata import MetadataResponse as KpMetadataResponse
    KAFKA_PYTHON_VERSION = kafka.__version__
except ImportError:  # pragma: no cover - benchmark needs kafka-python for the comparison
    kafka = None
    KAFKA_PYTHON_VERSION = None

KAFKA_PYTHON_FLAVOR = "kafka.protocol ApiMessage (json-schema, compiled codecs; used on the wire)"


# ---------------------------------------------------------------------------------------------
# Test messages: each builder returns (kgroup object, kafka-python object) for the same content.

def _heartbeat():
    kg = KgHeartbeatResponse(throttle_time_ms=0, error_code=0)
    kp = KpHeartbeatResponse(throttle_time_ms=0, error_code=0) if kafka else None
    return kg, kp


def _join_group():
    protos = [(name, (b"consumer-metadata-%02d-" % i) + bytes(range(i, i + 9)))
              for i, name in enumerate(("range", "roundrobin", "cooperative-sticky"))]
    assert all(len(m) == 30 for _, m in protos)
    common = dict(group_id="bench-group", session_timeout_ms=45000, rebalance_timeout_ms=300000,
                  member_id="consumer-1-4f1c2a5e-7d8b-4c3e-9a0f-123456789abc",
                  group_instance_id=None, protocol_type="consumer")
    P = KgJoinGroupRequest.JoinGroupRequestProtocol
    kg = KgJoinGroupRequest(protocols=[P(name=n, metadata=m) for n, m in protos], **common)
    kp = None
    if kafka:
        KP = KpJoinGroupRequest.JoinGroupRequestProtocol
        kp = KpJoinGroupRequest(protocols=[KP(name=n, metadata=m) for n, m in protos], **common)
    return kg, kp


def _offset_commit():
    parts = [(p, 1_000_000 + 37 * p, 5, "" if p % 2 else "meta-%d" % p) for p in range(10)]
    common = dict(group_id="bench-group", generation_id_or_member_epoch=7,
                  member_id="consumer-1-4f1c2a5e-7d8b-4c3e-9a0f-123456789abc",
                  group_instance_id=None)
    T = KgOffsetCommitRequest.OffsetCommitRequestTopic
    TP = T.OffsetCommitRequestPartition
    kg = KgOffsetCommitRequest(topics=[T(name="orders", partitions=[
        TP(partition_index=p, committed_offset=o, committed_leader_epoch=e, committed_metadata=m)
        for p, o, e, m in parts])], **common)
    kp = None
    if kafka:
        KT = KpOffsetCommitRequest.OffsetCommitRequestTopic
        KTP = KT.OffsetCommitRequestPartition
        kp = KpOffsetCommitRequest(topics=[KT(name="orders", partitions=[
            KTP(partition_index=p, committed_offset=o, committed_leader_epoch=e,
                committed_metadata=m) for p, o, e, m in parts])], **common)
    return kg, kp


def _metadata():
    tids = [uuid.UUID(int=(0x1234_5678_9ABC_DEF0 << 64) + t + 1) for t in range(5)]
    topics = [("topic-%d" % t, tids[t],
               [(p, 0, 3, [0], [0]) for p in range(6)]) for t in range(5)]
    B = KgMetadataResponse.MetadataResponseBroker
    T = KgMetadataResponse.MetadataResponseTopic
    P = T.MetadataResponsePartition
    kg = KgMetadataResponse(
        throttle_time_ms=0, brokers=[B(node_id=0, host="localhost", port=9092, rack=None)],
        cluster_id="kgroup-cluster-0001", controller_id=0,
        topics=[T(error_code=0, name=n, topic_id=tid.bytes, is_internal=False, partitions=[
            P(error_code=0, partition_index=p, leader_id=ldr, leader_epoch=ep, replica_nodes=list(r),
              isr_nodes=list(i), offline_replicas=[]) for p, ldr, ep, r, i in parts])
                for n, tid, parts in topics])
    kp = None
    if kafka:
        KB = KpMetadataResponse.MetadataResponseBroker
        KT = KpMetadataResponse.MetadataResponseTopic
        KP = KT.MetadataResponsePartition
        kp = KpMetadataResponse(
            throttle_time_ms=0, brokers=[KB(node_id=0, host="localhost", port=9092, rack=None)],
            cluster_id="kgroup-cluster-0001", controller_id=0,
            topics=[KT(error_code=0, name=n, topic_id=tid, is_internal=False, partitions=[
                KP(error_code=0, partition_index=p, leader_id=ldr, leader_epoch=ep,
                   replica_nodes=list(r), isr_nodes=list(i), offline_replicas=[])
                for p, ldr, ep, r, i in parts]) for n, tid, parts in topics])
    return kg, kp


# (label, version, builder, kgroup class, kafka-python class)
CASES = [
    ("Heartbeat v4 response", 4, _heartbeat, KgHeartbeatResponse,
     KpHeartbeatResponse if kafka else None),
    ("JoinGroup v5 request (3 protocols)", 5, _join_group, KgJoinGroupRequest,
     KpJoinGroupRequest if kafka else None),
    ("OffsetCommit v8 request (1x10)", 8, _offset_commit, KgOffsetCommitRequest,
     KpOffsetCommitRequest if kafka else None),
    ("Metadata v12 response (1b, 5t x 6p)", 12, _metadata, KgMetadataResponse,
     KpMetadataResponse if kafka else None),
]


# ---------------------------------------------------------------------------------------------
# The ops being timed.

def kg_op(cls, data, version):
    return cls.from_bytes(data, version).to_bytes(version)


def kp_op(cls, data, version):
    # A decoded kafka-python message already carries its version; passing encode(version=...)
    # again trips over the unset ``_header`` slot of decoded objects (AttributeError in 3.0.12).
    return bytes(cls.decode(data, version=version).encode())


def verify(label, version, kg_obj, kp_obj, kg_cls, kp_cls) -> bytes:
    kg_bytes = kg_obj.to_bytes(version)
    assert kg_op(kg_cls, kg_bytes, version) == kg_bytes, f"{label}: kgroup round trip differs"
    assert kg_cls.from_bytes(kg_bytes, version) == kg_obj, f"{label}: kgroup decode differs"
    if kp_obj is not None:
        kp_bytes = bytes(kp_obj.encode(version=version))
        if kp_bytes != kg_bytes:
            raise AssertionError(f"{label}: kgroup and kafka-python encodings differ:\n"
                                 f"  kgroup       {kg_bytes.hex()}\n  kafka-python {kp_bytes.hex()}")
        assert kp_op(kp_cls, kg_bytes, version) == kg_bytes, f"{label}: kafka-python round trip differs"
    return kg_bytes


def bench(fn, args, repeat: int, duration: float, keep_gc: bool = False) -> float:
    """Best-of-`repeat` ops/s, each repeat a loop calibrated to last about `duration` seconds.
    The cyclic GC is off while timing (as in timeit) unless keep_gc."""
    gc_was_enabled = gc.isenabled()
    if not keep_gc:
        gc.disable()
    try:
        return _bench(fn, args, repeat, duration)
    finally:
        if gc_was_enabled:
            gc.enable()


def _bench(fn, args, repeat, duration):
    t = time.perf_counter
    number = 1
    while True:  # calibrate like timeit.autorange, to ~duration / 5 per loop
        t0 = t()
        for _ in range(number):
            fn(*args)
        el = t() - t0
        if el >= duration / 5:
            break
        number *= 2
    number = max(1, int(number * duration / el))
    best = float("inf")
    for _ in range(repeat):
        t0 = t()
        for _ in range(number):
            fn(*args)
        best = min(best, (t() - t0) / number)
    return 1.0 / best


def run(repeat=5, duration=0.3, keep_gc=False):
    results = []
    for label, version, build, kg_cls, kp_cls in CASES:
        kg_obj, kp_obj = build()
        data = verify(label, version, kg_obj, kp_obj, kg_cls, kp_cls)
        kg = bench(kg_op, (kg_cls, data, version), repeat, duration, keep_gc)
        kp = bench(kp_op, (kp_cls, data, version), repeat, duration, keep_gc) if kp_cls else None
        results.append({"message": label, "api_version": version, "bytes": len(data),
                        "identical_bytes": kp_cls is not None,
                        "kgroup_ops_per_s": round(kg, 1),
                        "kafka_python_ops_per_s": round(kp, 1) if kp else None,
                        "ratio": round(kg / kp, 3) if kp else None})
    return results


def _label_generated_code(cls, version, renamed, seen=None):
    """schema.py exec()s every encoder/decoder/__init__ as ``<string>:1(decode)`` etc., so
    cProfile would merge them all into one row. Give each a distinct co_filename (restored by
    the caller) so the profile says which struct's codec the time goes to."""
    seen = set() if seen is None else seen
    if cls in seen:
        return
    seen.add(cls)
    for kind, table in (("decode", cls._DECODERS), ("encode", cls._ENCODERS)):
        fn = table.get(version)
        if fn is not None and fn not in renamed:
            renamed[fn] = fn.__code__
            fn.__code__ = fn.__code__.replace(co_filename=f"<{cls.__name__} v{version} {kind}>")
    init = cls.__dict__.get("__init__")
    if init is not None and init not in renamed and init.__code__.co_filename == "<string>":
        renamed[init] = init.__code__
        init.__code__ = init.__code__.replace(co_filename=f"<{cls.__name__} __init__>")
    for f in cls.FIELDS:
        if f.struct is not None:
            _label_generated_code(f.struct, version, renamed, seen)


def profile(n_per_case=2000, top=25, cases=None):
    """cProfile the kgroup side (all cases, or the given labels); returns the report text."""
    prepared, renamed = [], {}
    for label, version, build, kg_cls, _ in CASES:
        if cases and label not in cases:
            continue
        kg_obj, _kp = build()
        prepared.append((kg_cls, kg_obj.to_bytes(version), version))
        _label_generated_code(kg_cls, version, renamed)
    pr = cProfile.Profile()
    try:
        pr.enable()
        for cls, data, version in prepared:
            for _ in range(n_per_case):
                kg_op(cls, data, version)
        pr.disable()
    finally:
        for fn, code in renamed.items():
            fn.__code__ = code
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(top)
    return s.getvalue()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print machine-readable results")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--duration", type=float, default=0.3, help="seconds per timed loop")
    ap.add_argument("--keep-gc", action="store_true", help="leave the cyclic GC on while timing")
    ap.add_argument("--profile", action="store_true", help="also cProfile the kgroup side")
    a = ap.parse_args(argv)
    results = run(a.repeat, a.duration, a.keep_gc)
    meta = {"python": platform.python_version(), "kafka_python": KAFKA_PYTHON_VERSION,
            "kafka_python_classes": KAFKA_PYTHON_FLAVOR if kafka else None,
            "op": "decode bytes -> object -> encode to bytes",
            "timing": f"best of {a.repeat} loops of ~{a.duration}s, "
                      f"gc {'on' if a.keep_gc else 'off'}"}
    if a.json:
        print(json.dumps({"meta": meta, "results": results}, indent=2))
    else:
        print(f"Python {meta['python']}; kafka-python {KAFKA_PYTHON_VERSION}: {KAFKA_PYTHON_FLAVOR}")
        print(f"op = {meta['op']}; {meta['timing']}; encodings verified byte-identical\n")
        w = max(len(r["message"]) for r in results)
        print(f"{'message':<{w}}  {'bytes':>5}  {'kgroup ops/s':>13}  {'kafka-py ops/s':>14}  {'ratio':>6}")
        for r in results:
            kp = r["kafka_python_ops_per_s"]
            print(f"{r['message']:<{w}}  {r['bytes']:>5}  {r['kgroup_ops_per_s']:>13,.0f}  "
                  f"{(f'{kp:,.0f}' if kp else 'n/a'):>14}  "
                  f"{(format(r['ratio'], '.2f') + 'x') if r['ratio'] else 'n/a':>6}")
    if a.profile:
        print(profile(), file=sys.stderr if a.json else sys.stdout)
    return results


if __name__ == "__main__":
    main()
