#!/usr/bin/env python3
"""Instructions per heartbeat with metrics off and on, counted by valgrind (cachegrind).

Instruction counts do not depend on what else this shared machine runs, unlike CPU time, so
they show a few-percent difference that the throughput benchmark (coordinator_bench.py
--metrics) cannot separate from noise. Each configuration (metrics off; metrics.listener on
with nothing else, the production case) runs in-process: a broker on 127.0.0.1, one member of a
Stable group (joined over a real connection), then N Heartbeat v4 frames handed straight to a
server connection's ``_handle_frame`` (decode, dispatch, coordinator, encode; no socket). It runs
twice under cachegrind, with N and 6N heartbeats; the difference / 5N is the instructions per
heartbeat, start-up cancelled. Prints the configurations side by side, with two diagnostic
variants of "metrics on" that split its cost: the request path cleared (what the HTTP listener
thread and the observers cost a heartbeat) and counting without ever sampling a request (the
rest is the 1-in-8 timing).

Usage (from the repo root; needs valgrind; a few minutes)::

    python benchmarks/metrics_instructions.py [--n 3000]
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
         "on-no-request-path": "metrics on, request_hook cleared (listener, observers)",
         "on-never-timed": "metrics on, every request counted, none timed"}


def child(mode: str, n: int) -> None:
    metrics = mode != "off"
    from kgroup.broker.broker import Broker
    from kgroup.broker.config import BrokerConfig
    from kgroup.broker.server import KafkaConnection
    from kgroup.protocol.api import encode_request, parse_response
    from kgroup.protocol.messages.heartbeat import HeartbeatRequest
    from kgroup.protocol.messages.join_group import JoinGroupRequest
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
                assert (b.request_hook is not None) == metrics
                if mode == "on-no-request-path":      # the listener and observers, no counting
                    b.request_hook = None
                elif mode == "on-never-timed":        # counted, no request ever sampled
                    b.request_hook.masks[:] = [-1] * len(b.request_hook.masks)
                reader, writer = await asyncio.open_connection("127.0.0.1", b.bound_port)
                P = JoinGroupRequest.JoinGroupRequestProtocol
                j = await request(reader, writer, JoinGroupRequest(
                    group_id="g", session_timeout_ms=30000, rebalance_timeout_ms=30000, member_id="",
                    protocol_type="consumer", protocols=[P(name="range", metadata=b"")]), 3)
                s = await request(reader, writer, SyncGroupRequest(
                    group_id="g", generation_id=j.generation_id, member_id=j.member_id, assignments=[]), 3)
                assert s.error_code == 0, s
                frame = b"".join(encode_request(HeartbeatRequest(
                    group_id="g", generation_id=j.generation_id, member_id=j.member_id), 4, 1, "bench"))[4:]
                conn = KafkaConnection(b)
                conn.connection_made(Transport())
                handle = conn._handle_frame
                for _ in range(n):
                    handle(frame)
                    conn.out.clear()
                assert not conn.closed
                writer.close()
            finally:
                await b.stop()
    asyncio.run(main())


def instructions(mode: str, n: int) -> int:
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "cg.out")
        env = dict(os.environ, PYTHONHASHSEED="0", PYTHONPATH=_ROOT)
        r = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no", f"--cachegrind-out-file={out}",
                            sys.executable, os.path.abspath(__file__), "--child", mode,
                            "--n", str(n)], env=env, capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(r.stderr[-3000:])
        m = re.search(r"^summary:\s+(\d+)", open(out).read(), re.M)
        return int(m.group(1))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=3000)
    ap.add_argument("--child", choices=tuple(MODES))
    args = ap.parse_args()
    if args.child:
        child(args.child, args.n)
        return
    per = {}
    for mode in MODES:
        few, many = instructions(mode, args.n), instructions(mode, 6 * args.n)
        per[mode] = (many - few) / (5 * args.n)
    off = per["off"]
    print(f"instructions per heartbeat (cachegrind, in-process: decode, handler, encode; {5 * args.n} heartbeats)")
    for mode, label in MODES.items():
        print(f"  {label:<56} {per[mode]:>8,.0f}  {per[mode] - off:>+7,.0f} ({(per[mode] / off - 1) * 100:+.1f} %)")


if __name__ == "__main__":
    main()
