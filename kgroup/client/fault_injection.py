"""Send a fault-injection command to a kgroup broker over the Kafka protocol (``kgroup inject``,
``KafkaBroker.inject``): the command's JSON is the value of one record produced to partition 0 of
``kgroup/fault-injection``, a topic name Kafka forbids; a broker started with
``kgroup.fault.injection.enable=true`` applies it and answers its result in the partition's
``error_message``; any other broker refuses (the topic does not exist and cannot be created).
See kgroup/broker/faults.py for the commands."""
from __future__ import annotations

import json
import socket
import struct

from ..protocol.api import encode_request, parse_response
from ..protocol.errors import ErrorCode
from ..protocol.messages.produce import ProduceRequest
from ..protocol.records import Record, build_batch

CONTROL_TOPIC = "kgroup/fault-injection"
PRODUCE_VERSION = 9          # the first flexible version; error_message since v8


class FaultInjectionRefused(RuntimeError):
    """The broker does not accept fault injection (kgroup.fault.injection.enable is false, or it
    is not kgroup)."""


class FaultCommandError(ValueError):
    """The broker accepts fault injection but not this command."""


def control_request(bootstrap_server: str, topic: str, value: bytes, timeout: float = 10.0):
    """Produce one record of ``value`` to partition 0 of a kgroup control ``topic`` (a name
    Kafka forbids) and return the partition's answer (error code, error message)."""
    host, _, port = bootstrap_server.split(",")[0].strip().rpartition(":")
    batch = build_batch([Record(value=value)])
    T, P = ProduceRequest.TopicProduceData, ProduceRequest.TopicProduceData.PartitionProduceData
    req = ProduceRequest(acks=1, timeout_ms=int(timeout * 1000),
                         topic_data=[T(name=topic, partition_data=[P(index=0, records=batch)])])
    with socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)), timeout=timeout) as sock:
        sock.sendall(b"".join(encode_request(req, PRODUCE_VERSION, 1, "kgroup-tools")))
        size, = struct.unpack(">i", _recv(sock, 4))
        _, resp = parse_response(ProduceRequest.API_KEY, PRODUCE_VERSION, _recv(sock, size))
    pr = resp.responses[0].partition_responses[0]
    return pr.error_code, pr.error_message


def send_fault_command(bootstrap_server: str, command: dict, timeout: float = 10.0) -> dict:
    """Apply ``command`` on the broker at ``host:port``; returns the broker's fault state (or the
    test-control command's answer)."""
    code, message = control_request(bootstrap_server, CONTROL_TOPIC, json.dumps(command).encode(), timeout)
    if code == ErrorCode.NONE:
        return json.loads(message)
    if code == ErrorCode.INVALID_REQUEST:
        raise FaultCommandError(message)
    raise FaultInjectionRefused(f"the broker at {bootstrap_server} refuses fault injection "
                                f"({ErrorCode(code).name}): start it with "
                                "kgroup.fault.injection.enable=true")


def _recv(sock, n: int) -> bytes:
    chunks = []
    while n:
        c = sock.recv(n)
        if not c:
            raise ConnectionError("connection closed by the broker")
        chunks.append(c)
        n -= len(c)
    return b"".join(chunks)


def main(argv: list[str] | None = None) -> int:
    """``kgroup inject --bootstrap-server H:P FAULT [options]``."""
    import argparse
    import sys
    p = argparse.ArgumentParser(prog="kgroup inject", description=(
        "Inject faults into a kgroup broker started with kgroup.fault.injection.enable=true, move its "
        "clock (advance-time), reset it, read its state as JSON or wait on it."))
    p.add_argument("--bootstrap-server", required=True)
    sub = p.add_subparsers(dest="fault", required=True)

    def narrowing(sp, api=True):
        if api:
            sp.add_argument("--api", help="API name (OffsetCommit) or key (8)")
        sp.add_argument("--client-id", help="only requests from this client id")
        sp.add_argument("--group", help="only requests about this group")
    sp = sub.add_parser("errors", help="answer the next requests of an API with these error codes, in order")
    narrowing(sp)
    sp.add_argument("--errors", required=True, help="comma-separated names or codes (0 lets one through)")
    sp = sub.add_parser("delay", help="delay the answers to the next requests")
    narrowing(sp)
    sp.add_argument("--ms", type=int, required=True)
    sp.add_argument("--count", type=int, default=1, help="how many requests (0: every one until cleared)")
    sp = sub.add_parser("drop", help="close the connection of a request after N matching requests")
    narrowing(sp)
    sp.add_argument("--after", type=int, default=0)
    sp.add_argument("--count", type=int, default=1)
    sp = sub.add_parser("loading", help="answer COORDINATOR_LOAD_IN_PROGRESS to group APIs for MS")
    narrowing(sp, api=False)
    sp.add_argument("--ms", type=int, required=True)
    for name, what in (("pause-heartbeat-expiry", "no member session expires until resumed"),
                       ("resume-heartbeat-expiry", "sessions expire again (fresh from now)"),
                       ("clear", "remove every fault"), ("list", "show the faults in force")):
        sub.add_parser(name, help=what)
    # test control (kgroup/broker/test_control.py)
    sp = sub.add_parser("advance-time", help="time travel: move the broker's clock forward, firing the timers due")
    sp.add_argument("--ms", type=int, required=True)
    sub.add_parser("reset", help="back to an empty broker: topics, groups, offsets, transactions, configs")
    sub.add_parser("clock", help="the broker's clock and the offset time travel added")
    for name, what in (("groups", "every group as JSON"), ("transactions", "every transaction as JSON"),
                       ("topics", "every topic as JSON")):
        sub.add_parser(name, help=what)
    sp = sub.add_parser("group", help="one group as JSON")
    sp.add_argument("--group", required=True)
    sp = sub.add_parser("wait", help="wait until the broker's state matches (exit 1 on timeout)")
    sp.add_argument("--for", dest="for_", required=True,
                    choices=("group", "assignment", "committed", "lag", "transaction", "topic"))
    sp.add_argument("--group")
    sp.add_argument("--state")
    sp.add_argument("--members", type=int)
    sp.add_argument("--type", dest="type_")
    sp.add_argument("--lag", type=int)
    sp.add_argument("--topic")
    sp.add_argument("--transactional-id")
    sp.add_argument("--json", help="more of the condition as a JSON object, e.g. '{\"offsets\": {\"t\": {\"0\": 5}}}'")
    sp.add_argument("--timeout-ms", type=int, default=10000)
    args = p.parse_args(argv)
    cmd: dict = {"fault": args.fault}
    if args.fault == "wait":
        cmd.update({"for": args.for_, "timeout_ms": args.timeout_ms})
        for k, v in (("group", args.group), ("state", args.state), ("members", args.members),
                     ("type", args.type_), ("lag", args.lag), ("topic", args.topic),
                     ("transactional_id", args.transactional_id)):
            if v is not None:
                cmd[k] = v
        if args.json:
            cmd.update(json.loads(args.json))
        try:
            answer = send_fault_command(args.bootstrap_server, cmd, args.timeout_ms / 1000 + 10)
        except (FaultInjectionRefused, FaultCommandError, OSError) as e:
            print(f"Error: {e}", file=sys.stderr)
            return 1
        print(json.dumps(answer, indent=2))
        return 0 if answer.get("ok") else 1
    for k in ("api", "client_id", "group", "ms", "after") if args.fault != "wait" else ():
        if getattr(args, k, None) is not None:
            cmd[k] = getattr(args, k)
    if args.fault in ("delay", "drop"):
        cmd["count"] = args.count or None
    if args.fault == "errors":
        cmd["errors"] = [e.strip() for e in args.errors.split(",") if e.strip()]
    try:
        state = send_fault_command(args.bootstrap_server, cmd)
    except (FaultInjectionRefused, FaultCommandError, OSError) as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1
    print(json.dumps(state, indent=2))
    return 0
