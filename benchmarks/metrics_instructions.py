#!/usr/bin/env python3
"""Instructions per heartbeat and per durable commit with metrics off and on, counted by
valgrind (cachegrind).

Instruction counts do not depend on what else this shared machine runs, unlike CPU time, so
they show a few-percent difference that the throughput benchmark (coordinator_bench.py
--metrics) cannot separate from noise. Each configuration (metrics off; metrics.listener on
with nothing else, the production case) runs in-process: a broker on 127.0.0.1, one member of a
Stable group (joined over a real connection), then N Heartbeat v4 frames handed straight to a
server connection's ``_handle_frame`` (decode, dispatch, coordinator, encode; no socket). The
durable-commit workload hands it OffsetCommit v8 frames of that member instead, 32 at a time
(as the throughput benchmark's pipelining window), then runs the event loop until all 32 are
answered: the held commits written as one batch, the group-commit fsync, the answers encoded.
Each runs twice under cachegrind, with N and 6N operations; the difference / 5N is the
instructions per operation, start-up cancelled. Prints the configurations side by side, with two
diagnostic variants of "metrics on" that split its cost: the request path cleared (what the HTTP
listener thread and the observers cost) and counting without ever sampling a request (the rest
is the sampled timing).

Usage (from the repo root; needs valgrind; a few minutes)::

    python benchmarks/metrics_instructions.py [--n 3000] [--workload heartbeat|commit|both]
"""
from __future__ import annotations

import argparse
import asyncio
import os
import re
import struct
import subprocess
import sys
import tempfile

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)


MODES = {"off": "metrics off", "on": "metrics on (metrics.listener alone)",
         "on-no-request-path": "metrics on, request counting cleared (listener, observers)",
         "on-never-timed": "metrics on, every request counted, none timed"}


WINDOW = 32             # commits in flight, as coordinator_bench.py's --window


def child(mode: str, n: int, workload: str) -> None:
    metrics = mode != "off"
    from kgroup.broker.broker import Broker
    from kgroup.broker.config import BrokerConfig
    from kgroup.broker.metrics import SAMPLE_EVERY
    from kgroup.broker.server import KafkaConnection
    from kgroup.protocol.api import encode_request, parse_response
    from kgroup.protocol.messages.heartbeat import HeartbeatRequest
    from kgroup.protocol.messages.join_group import JoinGroupRequest
    from kgroup.protocol.messages.offset_commit import OffsetCommitRequest
    from kgroup.protocol.messages.sync_group import SyncGroupRequest

    class Transport:        # what the connection writes goes nowhere
        def write(self, data): pass
        def set_write_buffer_limits(self, high): pass
        def get_extra_info(self, name): return ("127.0.0.1", 1)
        def close(self): pass

    async def request(reader, writer, body, version):
        writer.write(b"".join(encode_request(body, version, 1, "bench")))
        size, = struct.unpack(">i", await reader.readexactly(4))
        return parse_response(type(body).API_KEY, version, await reader.readexactly(size))[1]

    async def main():
        with tempfile.TemporaryDirectory() as d:
            overrides = ["listeners=PLAINTEXT://127.0.0.1:0", f"log.dirs={d}", "group.initial.rebalance.delay.ms=0",
                         "kgroup.fault.injection.enable=false"]
            if metrics:
                overrides.append("metrics.listener=http://127.0.0.1:0")
            b = Broker(BrokerConfig.load(None, overrides))
            await b.start()
            try:
                assert (b.request_counts is not None) == metrics
                if mode == "on-no-request-path":      # the listener and observers, no counting
                    b.request_counts = None
                elif mode == "on-never-timed":        # counted, the sampled path without timing
                    m = b.metrics

                    def untimed(handler, broker, ctx, body, version, inner=None):
                        if m.watched[body.API_KEY]:
                            return type(m).dispatch_sampled(m, handler, broker, ctx, body, version, inner)
                        m.settled[body.API_KEY][version] += SAMPLE_EVERY
                        m.recent[body.API_KEY][version] = 0
                        return handler(broker, ctx, body, version)
                    m.dispatch_sampled = untimed
                b.create_topic("bench", 1, 1, {})
                reader, writer = await asyncio.open_connection("127.0.0.1", b.bound_port)
                P = JoinGroupRequest.JoinGroupRequestProtocol
                j = await request(reader, writer, JoinGroupRequest(
                    group_id="g", session_timeout_ms=30000, rebalance_timeout_ms=30000, member_id="",
                    protocol_type="consumer", protocols=[P(name="range", metadata=b"")]), 3)
                s = await request(reader, writer, SyncGroupRequest(
                    group_id="g", generation_id=j.generation_id, member_id=j.member_id, assignments=[]), 3)
                assert s.error_code == 0, s
                conn = KafkaConnection(b)
                conn.connection_made(Transport())
                freeze_clock()
                handle = conn._handle_frame
                if workload == "heartbeat":
                    frame = b"".join(encode_request(HeartbeatRequest(
                        group_id="g", generation_id=j.generation_id, member_id=j.member_id), 4, 1, "bench"))[4:]
                    for _ in range(n):
                        handle(frame)
                        conn.out.clear()
                else:
                    T = OffsetCommitRequest.OffsetCommitRequestTopic
                    frames = [b"".join(encode_request(OffsetCommitRequest(
                        group_id="g", generation_id_or_member_epoch=j.generation_id, member_id=j.member_id,
                        topics=[T(name="bench", partitions=[T.OffsetCommitRequestPartition(
                            partition_index=0, committed_offset=k, committed_metadata="")])]), 8, 1, "bench"))[4:]
                          for k in range(WINDOW)]
                    for _ in range(n // WINDOW):
                        for frame in frames:
                            handle(frame)
                        while conn.slots:       # the held batch written, fsynced, answered
                            await asyncio.sleep(0)
                        await asyncio.sleep(0)  # the answers' write (call_soon)
                        conn.out.clear()
                assert not conn.closed
                writer.close()
            finally:
                await b.stop()
    asyncio.run(main())


def freeze_clock() -> None:
    """The coordinator's wall clock stops (kgroup.clock.now_ms as every module imported it):
    what a heartbeat does depends on whether a millisecond passed since the last one (its
    session timer is moved or not), and under valgrind how many pass depends on this shared
    machine's load, which moved the figure per heartbeat by ~1 % from run to run."""
    from kgroup import clock
    frozen = clock.now_ms()
    for name, module in list(sys.modules.items()):
        if name.startswith("kgroup."):
            for attr, value in list(vars(module).items()):
                if value is clock.now_ms:
                    setattr(module, attr, lambda: frozen)


def instructions(mode: str, n: int, workload: str) -> int:
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "cg.out")
        env = dict(os.environ, PYTHONHASHSEED="0", PYTHONPATH=_ROOT)
        r = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no", f"--cachegrind-out-file={out}",
                            sys.executable, os.path.abspath(__file__), "--child", mode,
                            "--n", str(n), "--workload", workload], env=env, capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(r.stderr[-3000:])
        m = re.search(r"^summary:\s+(\d+)", open(out).read(), re.M)
        return int(m.group(1))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=3000)
    ap.add_argument("--child", choices=tuple(MODES))
    ap.add_argument("--workload", choices=("heartbeat", "commit", "both"), default="both")
    args = ap.parse_args()
    args.n -= args.n % WINDOW
    if args.child:
        child(args.child, args.n, args.workload)
        return
    for workload in ("heartbeat", "commit") if args.workload == "both" else (args.workload,):
        per = {}
        for mode in MODES:
            few, many = instructions(mode, args.n, workload), instructions(mode, 6 * args.n, workload)
            per[mode] = (many - few) / (5 * args.n)
        off = per["off"]
        what = ("heartbeat (decode, handler, encode" if workload == "heartbeat" else
                f"durable commit (decode, handler, batched write, fsync, encode; {WINDOW} in flight")
        print(f"instructions per {what}; cachegrind, in-process, {5 * args.n} operations)", flush=True)
        for mode, label in MODES.items():
            print(f"  {label:<56} {per[mode]:>8,.0f}  {per[mode] - off:>+7,.0f} ({(per[mode] / off - 1) * 100:+.1f} %)",
                  flush=True)


if __name__ == "__main__":
    main()
