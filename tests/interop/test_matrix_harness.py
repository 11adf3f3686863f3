"""The compatibility matrix's test-side library (no tests here): every client the matrix covers
as a group member in its own process (``Member``), a producer per client (``produce``), the
broker's own view of groups and offsets (``describe``, ``committed``, ``end_offsets``), and a
runner that plays one scenario for several clients at once (``run_per_client``) so the slow
scenarios (session timeouts, broker restarts) cost their wait once, not once per client.

Members: kafka-python, aiokafka, confluent-kafka run tests/interop/test_matrix_drivers.py;
kafkajs runs tests/interop/node/driver.js; kcat runs as itself (``kcat -G``), its output parsed.
All report the same events (see test_matrix_drivers.py). Nothing here skips: a missing client
fails naming scripts/install-interop-deps.sh.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback

import pytest

from tests.conftest import ROOT
from tests.harness import free_port, group_records  # noqa: F401 - free_port: re-exported to the matrix tests

HERE = os.path.dirname(os.path.abspath(__file__))
DRIVER_PY = os.path.join(HERE, "test_matrix_drivers.py")
NODE_DIR = os.path.join(HERE, "node")
DRIVER_JS = os.path.join(NODE_DIR, "driver.js")

CLIENTS = ("kafka-python", "aiokafka", "confluent-kafka", "kcat", "kafkajs")
GROUP_CLIENTS = CLIENTS  # every client can be a group member
# The clients with Kafka 4.0's consumer group protocol (KIP-848), as "<client>.consumer": the same
# driver with group.protocol=consumer (kcat 1.7.1's librdkafka 2.0.2 has no group.protocol; kafka-
# python, aiokafka and kafkajs do not implement it). The name is also used in topic and group names.
CONSUMER_PROTOCOL_CLIENTS = ("confluent-kafka.consumer", "kgroup.consumer")
PY_CLIENTS = ("kafka-python", "aiokafka", "confluent-kafka", "kgroup")
SESSION_MS = 6000
HEARTBEAT_MS = 1000
BROKER_OVERRIDES = ["group.initial.rebalance.delay.ms=0", "group.min.session.timeout.ms=6000",
                    # consumer-protocol groups: the same 6 s session, heartbeats every second
                    "group.consumer.min.session.timeout.ms=6000", "group.consumer.session.timeout.ms=6000",
                    f"group.consumer.min.heartbeat.interval.ms={HEARTBEAT_MS}",
                    f"group.consumer.heartbeat.interval.ms={HEARTBEAT_MS}"]


def base_client(client: str) -> tuple[str, str]:
    """("confluent-kafka", "consumer") for "confluent-kafka.consumer"; (client, "classic") otherwise."""
    base, _, protocol = client.partition(".")
    return base, protocol or "classic"


# -- the clients themselves ------------------------------------------------------------------------

def _install_hint(what: str) -> str:
    return f"{what} is not installed: run scripts/install-interop-deps.sh (make test does)"


def kcat_bin() -> str:
    path = shutil.which("kcat") or shutil.which("kafkacat")
    if path is None:
        pytest.fail(_install_hint("kcat"))
    return path


def node_bin() -> str:
    path = shutil.which("node")
    if path is None:
        pytest.fail(_install_hint("node (Debian: nodejs)"))
    if not os.path.isdir(os.path.join(NODE_DIR, "node_modules", "kafkajs")):
        pytest.fail(_install_hint("kafkajs (npm ci in tests/interop/node)"))
    return path


def client_version(client: str) -> str:
    client = base_client(client)[0]
    try:
        if client == "kgroup":
            from importlib.metadata import version
            return version("kgroup")
        if client == "kafka-python":
            import kafka
            return kafka.__version__
        if client == "aiokafka":
            import aiokafka
            return aiokafka.__version__
        if client == "confluent-kafka":
            import confluent_kafka
            v, lib = confluent_kafka.version(), confluent_kafka.libversion()
            v, lib = (v[0] if isinstance(v, tuple) else v), (lib[0] if isinstance(lib, tuple) else lib)
            return f"{v} (librdkafka {lib})"
        if client == "kcat":
            out = subprocess.run([kcat_bin(), "-V"], capture_output=True, text=True, timeout=10).stdout
            m = re.search(r"Version ([\w.\-]+) .*?librdkafka ([\w.\-]+)", out)
            return f"{m.group(1)} (librdkafka {m.group(2)})" if m else out.splitlines()[0]
        if client == "kafkajs":
            with open(os.path.join(NODE_DIR, "node_modules", "kafkajs", "package.json")) as f:
                return json.load(f)["version"]
    except Exception as e:  # noqa: BLE001 - a version is informative only
        return f"? ({e})"
    return "?"


def wait_until(predicate, timeout: float, what, interval: float = 0.1):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for "
                                 f"{what() if callable(what) else what}")
        time.sleep(interval)


# -- group members ---------------------------------------------------------------------------------

_KCAT_GROUP = re.compile(r"% Group (\S+) rebalanced \(memberid ([^)]*)\): (assigned|revoked): ?(.*)$")
_KCAT_TP = re.compile(r"(\S+) \[(\d+)\]")


class Member:
    """One consumer-group member of ``client`` in its own process, events collected by threads."""

    def __init__(self, client: str, bootstrap: str, group: str, topics, *, assignors=None, instance_id=None,
                 session_ms: int = SESSION_MS, heartbeat_ms: int = HEARTBEAT_MS, commit: str = "sync",
                 incremental: bool = False, client_id: str | None = None, log_dir: str | None = None,
                 extra: dict | None = None):
        self.client, self.group, self.topics = client, group, list(topics)
        self.events: list[dict] = []
        self.lock = threading.Lock()
        self.name = f"{client}/{group}/{instance_id or id(self)}"
        log_dir = log_dir or tempfile.gettempdir()
        self.stderr_path = os.path.join(log_dir, f"member-{client}-{group}-{os.getpid()}-{id(self)}.err")
        conf = {"client": client, "bootstrap": bootstrap, "group": group, "topics": self.topics,
                "session_ms": session_ms, "heartbeat_ms": heartbeat_ms, "commit": commit,
                "incremental": incremental}
        if assignors:
            conf["assignors"] = list(assignors)
        if instance_id:
            conf["instance_id"] = instance_id
        if client_id:
            conf["client_id"] = client_id
        conf["log_level"] = "INFO"  # to the member's stderr file, shown when a test fails
        conf.update(extra or {})
        client, conf["group_protocol"] = base_client(client)
        conf["client"] = client
        self.conf = conf
        if client in PY_CLIENTS:
            cmd = [sys.executable, DRIVER_PY, json.dumps(conf)]
        elif client == "kafkajs":
            cmd = [node_bin(), DRIVER_JS, json.dumps(dict(conf, role="consumer"))]
        elif client == "kcat":
            # -E: do not exit on non-fatal errors (kcat's default exits when "all brokers are
            # down", i.e. on any restart of a one-broker cluster)
            cmd = [kcat_bin(), "-b", bootstrap, "-E", "-G", group, *self.topics, "-u", "-f", "%t %p %o %s\\n",
                   "-X", f"session.timeout.ms={session_ms}", "-X", f"heartbeat.interval.ms={heartbeat_ms}",
                   "-X", "auto.commit.interval.ms=100", "-X", "auto.offset.reset=earliest",
                   "-X", "reconnect.backoff.max.ms=500", "-X", f"client.id={client_id or 'kcat-matrix'}",
                   "-X", "partition.assignment.strategy=" + ",".join(assignors or ["range", "roundrobin"])]
            if instance_id:
                cmd += ["-X", f"group.instance.id={instance_id}"]
            for k, v in (extra or {}).items():
                cmd += ["-X", f"{k}={v}"]
        else:
            raise ValueError(client)
        self.started_at = time.monotonic()
        self._err = open(self.stderr_path, "w")
        self.proc = subprocess.Popen(cmd, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, bufsize=1)
        self._threads = [threading.Thread(target=self._read_stdout, daemon=True),
                         threading.Thread(target=self._read_stderr, daemon=True)]
        for t in self._threads:
            t.start()
        if client == "kcat":
            self._add({"ev": "started", "t": time.time()})

    # -- reading ---------------------------------------------------------------------------------
    def _add(self, ev):
        ev.setdefault("t", time.time())
        with self.lock:
            self.events.append(ev)

    def _read_stdout(self):
        for line in self.proc.stdout:
            line = line.rstrip("\n")
            if self.client == "kcat":
                parts = line.split(" ", 3)
                if len(parts) == 4 and parts[1].isdigit() and parts[2].isdigit():
                    self._add({"ev": "records", "recs": [[parts[0], int(parts[1]), int(parts[2]), parts[3]]]})
                continue
            try:
                self._add(json.loads(line))
            except ValueError:
                pass

    def _read_stderr(self):
        owned: set = set()
        for line in self.proc.stderr:
            self._err.write(line)
            self._err.flush()
            if self.client != "kcat":
                continue
            m = _KCAT_GROUP.search(line)
            if m:
                parts = {(t, int(p)) for t, p in _KCAT_TP.findall(m.group(4))}
                if m.group(3) == "assigned":
                    owned |= parts
                    self._add({"ev": "assigned", "added": sorted(map(list, parts)), "owned": sorted(map(list, owned)),
                               "member": m.group(2), "gen": None, "protocol": None})
                else:
                    owned -= parts
                    self._add({"ev": "revoked", "parts": sorted(map(list, parts)), "owned": sorted(map(list, owned))})
            elif "ERROR" in line or "error" in line.lower() and line.startswith("%"):
                self._add({"ev": "error", "where": "stderr", "type": "kcat", "msg": line.strip()})

    # -- views -----------------------------------------------------------------------------------
    def of(self, kind: str) -> list[dict]:
        with self.lock:
            return [e for e in self.events if e["ev"] == kind]

    def owned(self) -> set:
        """The partitions this member owns after its last rebalance callback."""
        with self.lock:
            for e in reversed(self.events):
                if e["ev"] in ("assigned", "revoked", "lost"):
                    return {tuple(tp) for tp in e["owned"]}
        return set()

    def records(self, since: float = 0.0) -> list[tuple]:
        return [tuple(r) for e in self.of("records") if e["t"] >= since for r in e["recs"]]

    def errors(self) -> list[dict]:
        return self.of("error")

    def error_text(self) -> str:
        return "\n".join(f"{e.get('where')}: {e.get('type')}: {e.get('msg')}" for e in self.errors())

    def stderr_tail(self, n: int = 30) -> str:
        try:
            with open(self.stderr_path, errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return ""

    def describe(self) -> str:
        with self.lock:
            evs = [e for e in self.events if e["ev"] != "records"]
        return (f"{self.name}: alive={self.alive} events={json.dumps(evs[-12:])}\n"
                f"stderr tail:\n{self.stderr_tail()}")

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    # -- lifecycle -------------------------------------------------------------------------------
    def wait_assigned(self, timeout: float = 30.0) -> set:
        wait_until(lambda: self.owned() or None, timeout, lambda: f"an assignment: {self.describe()}")
        return self.owned()

    def stop(self, timeout: float = 20.0) -> None:
        """Graceful: close stdin (drivers close their consumer: LeaveGroup); kcat gets SIGTERM."""
        if not self.alive:
            return
        try:
            if self.client == "kcat":
                self.proc.send_signal(signal.SIGTERM)
            else:
                self.proc.stdin.close()
            self.proc.wait(timeout)
        except (subprocess.TimeoutExpired, OSError):
            self.kill()
        finally:
            self._join()

    def kill(self) -> None:
        if self.alive:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
        self._join()

    def _join(self):
        for t in self._threads:
            t.join(5)
        self._err.close()


class Members(list):
    """Members started by a test; all stopped (killed if need be) at the end."""

    def start(self, *args, **kwargs) -> Member:
        m = Member(*args, **kwargs)
        self.append(m)
        return m

    def close(self):
        for m in self:
            if m.alive:
                m.kill()

    def describe(self) -> str:
        return "\n".join(m.describe() for m in self)


# -- producing -------------------------------------------------------------------------------------

def messages(prefix: str, n: int, partitions: int | None = None) -> list[tuple]:
    """[(key, value, partition)]: keyed, or round-robin over ``partitions`` when given."""
    return [(f"k{i % 97}", f"{prefix}-{i}", None if partitions is None else i % partitions) for i in range(n)]


def produce(client: str, bootstrap: str, topic: str, msgs: list[tuple], idempotent: bool | None = None):
    """Produce ``msgs`` with ``client``; returns [(partition, offset, value)] as the client
    acknowledged them (kcat reports nothing: None); "<client>.consumer" produces as <client>."""
    client = base_client(client)[0]
    if client == "kgroup":
        return produce_reference(bootstrap, topic, msgs)
    if client == "kafka-python":
        from kafka import KafkaProducer
        kw = {} if idempotent is None else {"enable_idempotence": idempotent}
        p = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, **kw)
        try:
            if idempotent is None:
                assert p.config["enable_idempotence"], "kafka-python's default producer is idempotent"
            futs = [(v, p.send(topic, key=k.encode(), value=v.encode(), partition=part)) for k, v, part in msgs]
            p.flush(60)
            return [(f.get(0).partition, f.get(0).offset, v) for v, f in futs]
        finally:
            p.close()
    if client == "aiokafka":
        import asyncio

        from aiokafka import AIOKafkaProducer

        async def run():
            kw = {} if idempotent is None else {"enable_idempotence": idempotent}
            p = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, **kw)
            await p.start()
            try:
                futs = [(v, await p.send(topic, key=k.encode(), value=v.encode(), partition=part)) for k, v, part in msgs]
                return [(md.partition, md.offset, v) for v, md in [(v, await f) for v, f in futs]]
            finally:
                await p.stop()
        return asyncio.run(run())
    if client == "confluent-kafka":
        from confluent_kafka import Producer
        acks, errors = {}, []
        p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": bool(idempotent), "acks": "all",
                      "linger.ms": 5})

        def report(err, msg):
            if err is not None:
                errors.append(err)
            else:
                acks[msg.value().decode()] = (msg.partition(), msg.offset())
        for k, v, part in msgs:
            kw = {} if part is None else {"partition": part}
            p.produce(topic, value=v.encode(), key=k.encode(), on_delivery=report, **kw)
            p.poll(0)
        assert p.flush(60) == 0 and not errors, errors
        return [(*acks[v], v) for _, v, _ in msgs]
    if client == "kcat":
        by_partition: dict = {}
        for k, v, part in msgs:
            by_partition.setdefault(part, []).append(f"{k}\t{v}\n")
        for part, lines in by_partition.items():
            cmd = [kcat_bin(), "-P", "-b", bootstrap, "-t", topic, "-K", "\t", "-X", "linger.ms=5"]
            if part is not None:
                cmd += ["-p", str(part)]
            subprocess.run(cmd, input="".join(lines), text=True, check=True, timeout=60, capture_output=True)
        return None
    if client == "kafkajs":
        conf = {"role": "producer", "bootstrap": bootstrap, "topic": topic, "messages": [list(m) for m in msgs],
                "idempotent": bool(idempotent), "log_level": "WARN"}
        out = subprocess.run([node_bin(), DRIVER_JS, json.dumps(conf)], cwd=ROOT, capture_output=True, text=True,
                             timeout=120)
        evs = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
        done = [e for e in evs if e["ev"] == "produced"]
        assert out.returncode == 0 and done, f"kafkajs producer failed: {evs}\n{out.stderr[-3000:]}"
        return [tuple(a) for a in done[0]["acks"]]
    raise ValueError(client)


def produce_reference(bootstrap: str, topic: str, msgs: list[tuple]) -> list[tuple]:
    """Produce with kgroup's own producer (the reference side when a client under test consumes)."""
    from kgroup.client.sync import KafkaProducer
    p = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=2)
    try:
        futs = [(v, p.send(topic, value=v.encode(), key=k.encode(), partition=part)) for k, v, part in msgs]
        p.flush()
        return [(f.get(30).partition, f.get(30).offset, v) for v, f in futs]
    finally:
        p.close()


def read_all(bootstrap: str, topic: str, partitions: int, expect: int, timeout: float = 30.0) -> list[tuple]:
    """Every record of ``topic`` as [(partition, offset, key, value)], read with kgroup's consumer."""
    from kgroup.client.sync import KafkaConsumer
    from kgroup.client.types import TopicPartition
    c = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest")
    try:
        c.assign([TopicPartition(topic, p) for p in range(partitions)])
        c.seek_to_beginning()
        got, deadline = [], time.monotonic() + timeout
        while len(got) < expect and time.monotonic() < deadline:
            got += [(r.partition, r.offset, r.key.decode() if r.key else None, r.value.decode()) for r in c.poll(200)]
        return got
    finally:
        c.close()


# -- the broker's view -----------------------------------------------------------------------------

class _Admin:
    """One kgroup admin per bootstrap, reused (a broker restart on another port gets another)."""
    _admins: dict = {}
    _lock = threading.Lock()

    @classmethod
    def get(cls, bootstrap: str):
        from kgroup.client.sync import KafkaAdmin
        with cls._lock:
            a = cls._admins.get(bootstrap)
            if a is None:
                a = cls._admins[bootstrap] = KafkaAdmin(bootstrap_servers=bootstrap)
            return a

    @classmethod
    def drop(cls, bootstrap: str):
        with cls._lock:
            a = cls._admins.pop(bootstrap, None)
        if a is not None:
            try:
                a.close()
            except Exception:  # noqa: BLE001
                pass


def create_topics(bootstrap: str, topics: dict[str, int]) -> None:
    from kgroup.client.sync import KafkaAdmin
    a = KafkaAdmin(bootstrap_servers=bootstrap)
    try:
        res = a.create_topics([(t, n, 1) for t, n in topics.items()])
        assert all(e is None for e in res.values()), res
    finally:
        a.close()


def describe(bootstrap: str, group: str):
    """(state, protocol, {member_id: (client_id, instance_id, {(t, p)})}) from DescribeGroups; for a
    consumer-protocol group (KIP-848), which DescribeGroups shows Dead, from ConsumerGroupDescribe:
    its state (Stable once every member owns its target at the assignment epoch), its server-side
    assignor as the protocol, and each member's current assignment."""
    admin = _Admin.get(bootstrap)
    g = admin.describe_groups([group])[group]
    if g.state == "Dead":
        cg = admin.describe_consumer_groups([group])[group]
        if not cg.error.value:
            return cg.state, cg.assignor, {m.member_id: (m.client_id, m.group_instance_id,
                                                         {(tp.topic, tp.partition) for tp in m.assignment})
                                           for m in cg.members}
    return g.state, g.protocol, {m.member_id: (m.client_id, m.group_instance_id,
                                              {(tp.topic, tp.partition) for tp in m.assignment})
                                 for m in g.members}


def group_epoch(bootstrap: str, group: str) -> int:
    """A consumer-protocol group's epoch (ConsumerGroupDescribe)."""
    cg = _Admin.get(bootstrap).describe_consumer_groups([group])[group]
    assert not cg.error.value, cg
    return cg.group_epoch


def committed(bootstrap: str, group: str) -> dict:
    """{(topic, partition): committed offset} from OffsetFetch."""
    out = _Admin.get(bootstrap).list_group_offsets(group)
    return {(tp.topic, tp.partition): om.offset for tp, om in out.items() if om is not None and om.offset >= 0}


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict:
    from kgroup.client.types import TopicPartition
    out = _Admin.get(bootstrap).list_offsets({TopicPartition(topic, p): -1 for p in range(partitions)})
    return {(tp.topic, tp.partition): v[0] for tp, v in out.items()}


def wait_stable(bootstrap: str, group: str, n_members: int, partitions: set, timeout: float = 40.0,
                members: Members | None = None):
    """Wait until the group is Stable with ``n_members`` whose assignments partition ``partitions``
    (and, when ``members`` are given, each live member's own view equals one member's assignment
    on the broker)."""
    last = [None]

    def ok():
        state, protocol, by_member = last[0] = describe(bootstrap, group)
        if state != "Stable" or len(by_member) != n_members:
            return None
        owned = [tp for _, _, parts in by_member.values() for tp in parts]
        if sorted(owned) != sorted(partitions):
            return None
        if members is not None:
            # member by member: a stale view (the old owner still holding everything, the newcomer
            # nothing yet) covers the partitions too, so comparing the union would pass too early
            views = sorted(sorted(m.owned()) for m in members if m.alive)
            if views != sorted(sorted(tuple(tp) for tp in parts) for _, _, parts in by_member.values()):
                return None
        return last[0]
    return wait_until(ok, timeout, lambda: f"{group} Stable with {n_members} members owning {sorted(partitions)}: "
                      f"{last[0]}\n{members.describe() if members is not None else ''}", interval=0.25)


def wait_committed(bootstrap: str, group: str, target: dict, timeout: float = 30.0) -> dict:
    last = [None]

    def ok():
        last[0] = committed(bootstrap, group)
        return all(last[0].get(tp) == o for tp, o in target.items())
    wait_until(ok, timeout, lambda: f"{group}'s commits to reach {target}: {last[0]}", interval=0.2)
    return last[0]


def topic_partitions(topic: str, n: int) -> set:
    return {(topic, p) for p in range(n)}


# -- one scenario, several clients at once -------------------------------------------------------

def run_per_client(scenario, clients, *args, **kwargs) -> dict:
    """Run ``scenario(client, *args, **kwargs)`` for every client in its own thread; returns
    {client: (True, result) | (False, "traceback")}. Tests assert per client on the result."""
    results: dict = {}

    def one(c):
        try:
            results[c] = (True, scenario(c, *args, **kwargs))
        except BaseException:  # noqa: BLE001 - handed to the per-client test
            results[c] = (False, traceback.format_exc())
    threads = [threading.Thread(target=one, args=(c,), name=f"scenario-{c}", daemon=True) for c in clients]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def check_result(results: dict, client: str):
    ok, value = results.get(client, (False, f"{client}: the scenario did not run"))
    if not ok:
        pytest.fail(f"{client}:\n{value}", pytrace=False)
    return value


def tag(record_property, client: str, scenario: str) -> None:
    """Label a test's junit entry for scripts/compat_matrix.py."""
    record_property("matrix_client", client)
    record_property("matrix_scenario", scenario)


# -- what each client negotiates: a recording proxy ------------------------------------------------

def _uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


class RecordingProxy:
    """A TCP proxy in front of a broker that records every request's header (API key, version,
    client id) per connection, the client software named by ApiVersions v3+ (KIP-511), and each
    response's size and time. Start the broker with ``advertised_listener()`` among its overrides
    so the clients come back through the proxy after bootstrapping."""

    def __init__(self):
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self.upstream_port = None
        self.requests: list[dict] = []     # {conn, t, api_key, version, corr, client_id}
        self.responses: list[dict] = []    # {conn, t, corr, size}
        self.software: dict[int, tuple] = {}
        self.lock = threading.Lock()
        self._conns = 0
        self._sockets: list[socket.socket] = []
        self._closed = False

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def advertised_listener(self) -> str:
        return f"advertised.listeners=PLAINTEXT://127.0.0.1:{self.port}"

    def start(self, upstream_port: int) -> "RecordingProxy":
        self.upstream_port = upstream_port
        threading.Thread(target=self._accept, daemon=True, name="proxy-accept").start()
        return self

    def close(self):
        self._closed = True
        for s in [self.listener, *self._sockets]:
            try:
                s.close()
            except OSError:
                pass

    def _accept(self):
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            except OSError:
                client.close()
                continue
            with self.lock:
                self._conns += 1
                conn = self._conns
                self._sockets += [client, upstream]
            threading.Thread(target=self._pump, args=(conn, client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(conn, upstream, client, False), daemon=True).start()

    def _pump(self, conn, src, dst, requests: bool):
        buf = b""
        try:
            while True:
                data = src.recv(262144)
                if not data:
                    break
                dst.sendall(data)
                buf += data
                while len(buf) >= 4:
                    size = int.from_bytes(buf[:4], "big", signed=True)
                    if len(buf) < 4 + size:
                        break
                    frame, buf = buf[4:4 + size], buf[4 + size:]
                    (self._request if requests else self._response)(conn, frame)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def _request(self, conn, frame: bytes):
        api_key = int.from_bytes(frame[0:2], "big", signed=True)
        version = int.from_bytes(frame[2:4], "big", signed=True)
        corr = int.from_bytes(frame[4:8], "big", signed=True)
        n = int.from_bytes(frame[8:10], "big", signed=True)
        client_id = frame[10:10 + n].decode(errors="replace") if n >= 0 else None
        with self.lock:
            self.requests.append({"conn": conn, "t": time.time(), "api_key": api_key, "version": version,
                                  "corr": corr, "client_id": client_id})
        if api_key == 18 and version >= 3:  # KIP-511: ClientSoftwareName/Version after header v2's tags
            try:
                pos = 10 + max(n, 0)
                tags, pos = _uvarint(frame, pos)
                for _ in range(tags):
                    _, pos = _uvarint(frame, pos)
                    size, pos = _uvarint(frame, pos)
                    pos += size
                ln, pos = _uvarint(frame, pos)
                name = frame[pos:pos + ln - 1].decode()
                pos += ln - 1
                lv, pos = _uvarint(frame, pos)
                self.software[conn] = (name, frame[pos:pos + lv - 1].decode())
            except (IndexError, UnicodeDecodeError):
                pass

    def _response(self, conn, frame: bytes):
        with self.lock:
            self.responses.append({"conn": conn, "t": time.time(), "corr": int.from_bytes(frame[:4], "big", signed=True),
                                   "size": len(frame)})

    def transcript(self, client_ids, since: float = 0.0, limit: int = 200) -> str:
        """The requests of connections whose client id is in ``client_ids``, each with when (and
        whether) its response came: for diagnosing a stuck client from the wire."""
        from kgroup.protocol.api import API_BY_KEY
        with self.lock:
            reqs = [r for r in self.requests if r["client_id"] in client_ids and r["t"] >= since]
            resps = {(r["conn"], r["corr"]): r for r in self.responses}
        lines = []
        for r in reqs[-limit:]:
            name = API_BY_KEY[r["api_key"]].request.__name__[:-7] if r["api_key"] in API_BY_KEY else r["api_key"]
            got = resps.get((r["conn"], r["corr"]))
            answer = f"answered +{got['t'] - r['t']:.3f}s ({got['size']} B)" if got else "NO RESPONSE"
            lines.append(f"{time.strftime('%H:%M:%S', time.localtime(r['t']))}.{int(r['t'] % 1 * 1000):03d} "
                         f"conn {r['conn']} {r['client_id']} {name} v{r['version']} corr {r['corr']}: {answer}")
        return "\n".join(lines)

    def negotiated(self) -> dict[int, set]:
        """{api_key: {versions used}} over every connection."""
        out: dict[int, set] = {}
        with self.lock:
            for r in self.requests:
                out.setdefault(r["api_key"], set()).add(r["version"])
        return out


def group_generations(data_dir: str, group: str, num_partitions: int = 50) -> list[tuple]:
    """[(generation, protocol, {member ids})] of every GroupMetadata record of ``group`` in its
    __consumer_offsets partition, in log order (what the coordinator persisted per generation)."""
    return [(v.generation, v.protocol, {m.member_id for m in v.members})
            for v in group_records(data_dir, group, num_partitions)]
