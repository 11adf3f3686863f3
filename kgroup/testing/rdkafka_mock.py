"""librdkafka's mock Kafka cluster (the copy bundled in the confluent-kafka wheel) on 127.0.0.1:
the peer kgroup's tests and benchmarks measure themselves against, started through ctypes.

    with MockCluster(brokers=1, topics={"t": 3}) as mock:    # in this process (C threads)
        mock.set_group_consumer_heartbeat_interval_ms(200)   # KIP-848 groups; and ..._session_timeout_ms
        use(mock.bootstrap_servers)

    proc, bootstrap = spawn(topics={"t": 3})                  # in a child process, for benchmarks
    python -m kgroup.testing.rdkafka_mock --topic t:3         # prints BOOTSTRAP=host:port

Known limits of the mock (librdkafka 2.16): no CreateTopics/DescribeGroups/ListGroups/DeleteGroups;
unknown topics are auto-created with 4 partitions; its flexible ApiVersions (v3+) answer and its
JoinGroup v6+/SyncGroup v4+/LeaveGroup v3+ parsing break some clients, so those APIs are capped
(``DEFAULT_CAPS``; override with ``caps``). Needs confluent-kafka installed.
"""
from __future__ import annotations

import argparse
import ctypes
import glob
import os
import subprocess
import sys
import time

# API key -> highest version the mock advertises: ApiVersions, JoinGroup, SyncGroup, LeaveGroup.
DEFAULT_CAPS = {18: 2, 11: 5, 14: 3, 13: 2}

_lib = None


def _librdkafka():
    """The librdkafka shared library inside the installed confluent-kafka wheel, typed once."""
    global _lib
    if _lib is not None:
        return _lib
    try:
        import confluent_kafka
    except ImportError:
        raise RuntimeError("librdkafka's mock cluster needs confluent-kafka installed") from None
    libdir = os.path.join(os.path.dirname(confluent_kafka.__file__), os.pardir, "confluent_kafka.libs")
    found = sorted(glob.glob(os.path.join(libdir, "librdkafka*.so*")))
    if not found:
        raise RuntimeError(f"librdkafka not found in {os.path.normpath(libdir)}")
    lib = ctypes.CDLL(found[0])
    P, S, I16, I32 = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int16, ctypes.c_int32
    lib.rd_kafka_conf_new.restype = P
    lib.rd_kafka_conf_set.argtypes = [P, S, S, S, ctypes.c_size_t]
    lib.rd_kafka_new.restype = P
    lib.rd_kafka_new.argtypes = [ctypes.c_int, P, S, ctypes.c_size_t]
    lib.rd_kafka_destroy.argtypes = [P]
    lib.rd_kafka_mock_cluster_new.restype = P
    lib.rd_kafka_mock_cluster_new.argtypes = [P, ctypes.c_int]
    lib.rd_kafka_mock_cluster_destroy.argtypes = [P]
    lib.rd_kafka_mock_cluster_bootstraps.restype = S
    lib.rd_kafka_mock_cluster_bootstraps.argtypes = [P]
    lib.rd_kafka_mock_set_apiversion.argtypes = [P, I16, I16, I16]
    lib.rd_kafka_mock_topic_create.argtypes = [P, S, ctypes.c_int, ctypes.c_int]
    lib.rd_kafka_mock_group_initial_rebalance_delay_ms.argtypes = [P, I32]
    # KIP-848 consumer groups: both return void and take a C int
    lib.rd_kafka_mock_set_group_consumer_session_timeout_ms.argtypes = [P, ctypes.c_int]
    lib.rd_kafka_mock_set_group_consumer_session_timeout_ms.restype = None
    lib.rd_kafka_mock_set_group_consumer_heartbeat_interval_ms.argtypes = [P, ctypes.c_int]
    lib.rd_kafka_mock_set_group_consumer_heartbeat_interval_ms.restype = None
    _lib = lib
    return lib


class MockCluster:
    """A running mock cluster; ``close()`` (or leaving the ``with`` block) stops it."""

    def __init__(self, brokers: int = 1, topics: dict[str, int] | None = None,
                 initial_rebalance_delay_ms: int | None = None, caps: dict[int, int] | None = None,
                 debug: bool = False):
        lib = _librdkafka()
        err = ctypes.create_string_buffer(512)
        conf = lib.rd_kafka_conf_new()
        if debug:
            lib.rd_kafka_conf_set(conf, b"debug", b"mock", err, len(err))
        # A producer handle only hosts the mock; its own connections are never used.
        self._rk = lib.rd_kafka_new(0, conf, err, len(err))
        if not self._rk:
            raise RuntimeError(err.value.decode())
        self._mc = lib.rd_kafka_mock_cluster_new(self._rk, brokers)
        if not self._mc:
            lib.rd_kafka_destroy(self._rk)
            raise RuntimeError("rd_kafka_mock_cluster_new failed")
        try:
            for key, top in {**DEFAULT_CAPS, **(caps or {})}.items():
                if lib.rd_kafka_mock_set_apiversion(self._mc, key, 0, top) != 0:
                    raise RuntimeError(f"cannot cap API {key} at v{top}")
            for name, partitions in (topics or {}).items():
                if lib.rd_kafka_mock_topic_create(self._mc, name.encode(), partitions, 1) != 0:
                    raise RuntimeError(f"cannot create topic {name}")
            if initial_rebalance_delay_ms is not None:
                lib.rd_kafka_mock_group_initial_rebalance_delay_ms(self._mc, initial_rebalance_delay_ms)
        except BaseException:
            self.close()
            raise
        self.bootstrap_servers = lib.rd_kafka_mock_cluster_bootstraps(self._mc).decode()

    def set_group_consumer_session_timeout_ms(self, ms: int) -> None:
        """The session timeout of consumer-protocol (KIP-848) members, as the broker's
        group.consumer.session.timeout.ms: a member silent this long is fenced."""
        _librdkafka().rd_kafka_mock_set_group_consumer_session_timeout_ms(self._mc, ms)

    def set_group_consumer_heartbeat_interval_ms(self, ms: int) -> None:
        """The heartbeat interval the mock hands consumer-protocol members in every
        ConsumerGroupHeartbeat answer (group.consumer.heartbeat.interval.ms; the mock's default is 3 s)."""
        _librdkafka().rd_kafka_mock_set_group_consumer_heartbeat_interval_ms(self._mc, ms)

    def close(self) -> None:
        lib = _librdkafka()
        if self._mc:
            lib.rd_kafka_mock_cluster_destroy(self._mc)
            self._mc = None
        if self._rk:
            lib.rd_kafka_destroy(self._rk)
            self._rk = None

    def __enter__(self) -> MockCluster:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def spawn(brokers: int = 1, topics: dict[str, int] | None = None,
          initial_rebalance_delay_ms: int | None = None, seconds: float = 3600.0,
          timeout: float = 20.0) -> tuple[subprocess.Popen, str]:
    """Start the mock in a child process (so that it does not share a GIL or CPU accounting with
    the caller): (the process, its bootstrap servers). Kill the process to stop it."""
    args = [sys.executable, "-m", "kgroup.testing.rdkafka_mock", "--brokers", str(brokers),
            "--seconds", str(seconds)]
    for name, partitions in (topics or {}).items():
        args += ["--topic", f"{name}:{partitions}"]
    if initial_rebalance_delay_ms is not None:
        args += ["--initial-rebalance-delay-ms", str(initial_rebalance_delay_ms)]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line.startswith("BOOTSTRAP="):
            return proc, line.strip().split("=", 1)[1]
        if not line and proc.poll() is not None:
            break
    proc.kill()
    _, err = proc.communicate()
    raise RuntimeError(f"librdkafka's mock cluster did not start: {err.strip()}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Run librdkafka's mock Kafka cluster on 127.0.0.1.")
    ap.add_argument("--brokers", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=3600.0, help="serve this long, then exit")
    ap.add_argument("--topic", action="append", default=[], metavar="NAME:PARTITIONS")
    ap.add_argument("--initial-rebalance-delay-ms", type=int, default=None)
    ap.add_argument("--cap", action="append", default=[], metavar="API_KEY:MAX_VERSION",
                    help="highest version advertised for an API (defaults: %s)" % DEFAULT_CAPS)
    ap.add_argument("--debug", action="store_true")
    args = ap.parse_args(argv)
    topics = {}
    for t in args.topic:
        name, _, partitions = t.rpartition(":")
        topics[name] = int(partitions)
    caps = {int(k): int(v) for k, v in (c.split(":") for c in args.cap)}
    with MockCluster(args.brokers, topics, args.initial_rebalance_delay_ms, caps, args.debug) as mock:
        print("BOOTSTRAP=" + mock.bootstrap_servers, flush=True)
        try:
            time.sleep(args.seconds)
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
