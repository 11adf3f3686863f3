"""A real kgroup broker for tests and scripts: ``KafkaBroker`` and the ``broker()`` context manager.

Two ways to run it, one object:

* **in-process** (the default): the broker runs on its own event loop in a daemon thread of the
  test process. Nothing is spawned or imported anew, so it is ready in milliseconds (the figures
  are in benchmarks/testing_bench.py and docs/benchmarks.md). Clients still talk to it over a real
  socket on 127.0.0.1, exactly as to ``kgroup serve``.
* **a subprocess** (``process=True``): ``python -m kgroup serve``, as an operator runs it. Slower
  to start (a new interpreter imports kgroup), but the only way to *kill -9* a broker without
  killing the test: ``kill()`` sends SIGKILL, so nothing is flushed and no clean-shutdown marker is
  written, and ``restart()`` brings it back on the same data directory and port.

Both bind an ephemeral port on 127.0.0.1 and keep it across restarts (clients reconnect to the
same bootstrap address). The data directory is a fresh temporary one unless given, removed by
``close()`` when it was ours.

Test defaults differ from a production broker in two keys: ``group.initial.rebalance.delay.ms=0``
(the first join of a group is not held 3 s, as in Kafka's own test harnesses) and
``kgroup.fault.injection.enable=true`` (``inject()`` and friends work; kgroup/broker/faults.py).
Pass ``overrides`` to change any key.

``security=True`` starts a broker with Kafka's four listeners (PLAINTEXT first, which the helpers
below use; SSL with required client certificates, i.e. mutual TLS; SASL_PLAINTEXT; SASL_SSL), a CA
and certificates generated with ``openssl`` when it starts (``certs``: the CA file clients trust,
the client certificates named in ``client_certs``), and ``users`` (name -> password) able to log in
with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 (their SCRAM credentials salted into the data
directory before the first start). ``port_of(listener)`` / ``bootstrap(listener)`` give each
listener's address. ``listeners`` (e.g. ``("SASL_SSL",)``) starts only those of the four, the
first being the one ``bootstrap_servers`` names; ``certs`` shares one ``TestCertificates`` (one
CA) between brokers, as a cluster's need.
"""
from __future__ import annotations

import asyncio
import collections
import contextlib
import gc
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Iterable, Mapping

TEST_DEFAULTS = {"group.initial.rebalance.delay.ms": "0", "kgroup.fault.injection.enable": "true"}
SECURE_LISTENERS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER"


class KafkaBroker:
    """A kgroup broker on 127.0.0.1 with helpers for tests (see the module docstring)."""

    def __init__(self, data_dir: str | os.PathLike | None = None, overrides: Mapping[str, object] | None = None,
                 *, process: bool = False, metrics: bool = False, start_timeout: float = 20.0,
                 security: bool = False, users: Mapping[str, str] | None = None,
                 client_certs: Iterable[str] = ("client",), listeners: Iterable[str] | None = None,
                 certs=None):
        self._own_dir = data_dir is None
        self.data_dir = str(data_dir) if data_dir is not None else tempfile.mkdtemp(prefix="kgroup-test-")
        self.overrides = {**TEST_DEFAULTS, **{k: str(v) for k, v in (overrides or {}).items()}}
        self.process = process
        if metrics:
            self.overrides.setdefault("metrics.listener", "http://127.0.0.1:0")
        self.http_port = 0
        self.start_timeout = start_timeout
        self.port = 0                 # 0 until the first start picks an ephemeral port, then kept
        self.security = security
        self.users = dict(users or {})
        self.client_cert_names = tuple(client_certs)
        self.certs = certs            # TestCertificates, when security is on (generated unless given)
        names = tuple(n.upper() for n in (listeners or (SECURE_LISTENERS if security else ("PLAINTEXT",))))
        if any(n != "PLAINTEXT" for n in names) and not security:
            raise ValueError("listeners other than PLAINTEXT need security=True")
        self.ports: dict[str, int] = {n: 0 for n in names}
        self._credentials_written = False
        self.broker = None            # the in-process Broker (None in subprocess mode)
        self.proc: subprocess.Popen | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._log_file = None
        self._log_records: collections.deque = collections.deque(maxlen=500)
        self._log_handler = None

    # -- addresses -----------------------------------------------------------------------------
    @property
    def host(self) -> str:
        return "127.0.0.1"

    @property
    def bootstrap_servers(self) -> str:
        """``host:port`` for a client's ``bootstrap.servers``."""
        return f"{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        if self.process:
            return self.proc is not None and self.proc.poll() is None
        return self.broker is not None

    @property
    def log_path(self) -> str:
        """The subprocess broker's log (its stdout and stderr)."""
        return self.data_dir.rstrip(os.sep) + ".log"

    @property
    def http_url(self) -> str:
        """``http://127.0.0.1:port`` of the metrics/console/admin listener (``metrics=True``)."""
        if not self.http_port:
            raise RuntimeError("no HTTP listener: start the broker with metrics=True "
                               "(or a metrics.listener override)")
        return f"http://127.0.0.1:{self.http_port}"

    def port_of(self, listener: str) -> int:
        return self.ports[listener.upper()]

    def bootstrap(self, listener: str = "PLAINTEXT") -> str:
        return f"{self.host}:{self.port_of(listener)}"

    def _security_items(self) -> dict[str, str]:
        if self.certs is None:
            from .certs import TestCertificates
            self.certs = TestCertificates.generate(self.data_dir.rstrip(os.sep) + "-certs", self.client_cert_names)
        if not self._credentials_written:        # salted once, before the first start
            self._write_scram_credentials()
            self._credentials_written = True
        jaas = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
                + " ".join(f'user_{u}="{p}"' for u, p in self.users.items()) + ";")
        items = {"ssl.keystore.type": "PEM", "ssl.keystore.location": self.certs.server_keystore,
                 "ssl.truststore.type": "PEM", "ssl.truststore.location": self.certs.ca_cert,
                 "listener.name.ssl.ssl.client.auth": "required",
                 "sasl.enabled.mechanisms": SASL_MECHANISMS}
        for listener in ("sasl_plaintext", "sasl_ssl"):
            items[f"listener.name.{listener}.plain.sasl.jaas.config"] = jaas
        return items

    def _write_scram_credentials(self) -> None:
        from ..broker.scram_credentials import ScramCredentialStore
        from ..security import scram
        os.makedirs(self.data_dir, exist_ok=True)
        store = ScramCredentialStore(self.data_dir)
        ups = []
        for user, password in self.users.items():
            for mech in (scram.SCRAM_SHA_256, scram.SCRAM_SHA_512):
                salt = os.urandom(32)
                ups.append((user, mech.type_code, 4096, salt, scram.salted_password(mech, password, salt, 4096)))
        for name, code, msg in store.alter([], [u for u in ups if u[1] == 1]) + store.alter([], [u for u in ups if u[1] == 2]):
            if code:
                raise RuntimeError(f"SCRAM credential for {name}: {msg}")

    def _config_items(self) -> dict[str, str]:
        listeners = ",".join(f"{n}://127.0.0.1:{p}" for n, p in self.ports.items())
        items = {**(self._security_items() if self.security else {}), **self.overrides,
                 "listeners": listeners, "log.dirs": self.data_dir}
        if self.http_port and items.get("metrics.listener"):   # a restart keeps its HTTP port too
            items["metrics.listener"] = f"http://127.0.0.1:{self.http_port}"
        return items

    # -- lifecycle -----------------------------------------------------------------------------
    def start(self) -> "KafkaBroker":
        if self.running:
            raise RuntimeError("the broker is already running")
        if self.process:
            self._start_process()
        else:
            self._start_in_process()
        return self

    def stop(self) -> None:
        """A clean shutdown, as on SIGTERM: in-flight requests finish, logs are flushed."""
        if self.process:
            if self.running:
                self.proc.send_signal(signal.SIGTERM)
                self.proc.wait(self.start_timeout)
            self._close_log()
            return
        if self.broker is None:
            return
        try:
            asyncio.run_coroutine_threadsafe(self.broker.stop(), self._loop).result(self.start_timeout)
        finally:
            self.broker = None
            self._stop_loop()

    def restart(self) -> "KafkaBroker":
        """Stop cleanly (if running) and start again on the same data directory and port."""
        self.stop()
        return self.start()

    def kill(self) -> int:
        """SIGKILL the broker process (no flush, no clean-shutdown marker); ``restart()`` or
        ``start()`` recovers it from the same data, as after a crash. Needs ``process=True``: a
        broker inside the test process cannot be killed without killing the test."""
        if not self.process:
            raise RuntimeError("kill -9 needs a broker process: use the kafka_broker_process fixture or "
                               "kgroup.testing.broker(process=True)")
        if not self.running:
            raise RuntimeError("the broker is not running")
        self.proc.kill()
        rc = self.proc.wait(self.start_timeout)
        self._close_log()
        return rc

    def kill_and_restart(self) -> "KafkaBroker":
        """kill -9, then start on the same data (the restart recovers the unflushed logs)."""
        self.kill()
        return self.start()

    def close(self) -> None:
        """Stop (cleanly) and remove the data directory if this object created it."""
        try:
            if self.process and self.running:
                # A test may leave the broker half-dead; never hang a teardown on it.
                try:
                    self.stop()
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
            else:
                self.stop()
        finally:
            self._close_log()
            if self._log_handler is not None:
                logging.getLogger("kgroup").removeHandler(self._log_handler)
                self._log_handler = None
            if self._own_dir:
                shutil.rmtree(self.data_dir, ignore_errors=True)
                with contextlib.suppress(OSError):
                    os.unlink(self.log_path)

    def __enter__(self) -> "KafkaBroker":
        if not self.running:
            self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- in-process ----------------------------------------------------------------------------
    def _start_in_process(self) -> None:
        from ..broker.broker import Broker
        from ..broker.config import BrokerConfig
        config = BrokerConfig(self._config_items())
        loop = asyncio.new_event_loop()
        ready = threading.Event()

        def main():
            asyncio.set_event_loop(loop)
            loop.call_soon(ready.set)
            loop.run_forever()

        thread = threading.Thread(target=main, name=f"kgroup-broker-{self.port or 'new'}-{id(self):x}",
                                  daemon=True)     # unique: log_tail keeps this broker's records
        self._capture_log(thread.name)
        thread.start()
        ready.wait()
        self._loop, self._thread = loop, thread
        # Broker.start() tunes the garbage collector for a broker process (gc.freeze, a young-
        # generation threshold of 50,000). In a test process those would outlive the broker and
        # change the tests' own memory behaviour, so they are put back once it has started.
        threshold, frozen = gc.get_threshold(), gc.get_freeze_count()

        async def create_and_start():
            broker = Broker(config)
            await broker.start()
            return broker
        try:
            broker = asyncio.run_coroutine_threadsafe(create_and_start(), loop).result(self.start_timeout)
        except BaseException:
            self._stop_loop()
            raise
        finally:
            gc.set_threshold(*threshold)
            if frozen == 0:
                gc.unfreeze()
        self.broker = broker
        self.port = broker.bound_port
        self.ports.update(broker.bound_ports)
        if broker.http is not None:
            self.http_port = broker.http.port

    def _capture_log(self, thread_name: str) -> None:
        """Keep the last records the broker's loop thread logs (log_tail, failure reports)."""
        if self._log_handler is not None:
            logging.getLogger("kgroup").removeHandler(self._log_handler)
        handler = _RingHandler(self._log_records, thread_name)
        logger = logging.getLogger("kgroup")
        logger.addHandler(handler)
        if logger.getEffectiveLevel() > logging.INFO:
            logger.setLevel(logging.INFO)
        self._log_handler = handler

    def _stop_loop(self) -> None:
        loop, thread = self._loop, self._thread
        self._loop = self._thread = None
        if loop is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        thread.join(self.start_timeout)
        if not loop.is_running():
            loop.close()

    def call(self, fn, *args):
        """Run ``fn(broker, *args)`` on the in-process broker's event loop and return its result
        (broker state is only touched from that loop)."""
        if self.broker is None:
            raise RuntimeError("call() needs a running in-process broker")

        async def run():
            return fn(self.broker, *args)
        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(self.start_timeout)

    # -- subprocess ----------------------------------------------------------------------------
    def _start_process(self) -> None:
        args = [sys.executable, "-m", "kgroup", "serve"]
        for k, v in self._config_items().items():
            args += ["--override", f"{k}={v}"]
        self._log_file = open(self.log_path, "ab")
        since = self._log_file.tell()
        self.proc = subprocess.Popen(args, stdout=self._log_file, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            text = self.log_text(since)
            m = re.search(r"serving on 127\.0\.0\.1:(\d+)", text)
            if m and ("metrics.listener" not in self.overrides or "metrics listener on" in text) and \
                    len(re.findall(r"listener \w+ \(\w+\) serving on", text)) >= len(self.ports) - 1:
                self.port = self.ports[next(iter(self.ports))] = int(m.group(1))
                for name, port in re.findall(r"listener (\w+) \(\w+\) serving on [^:]+:(\d+)", text):
                    self.ports[name] = int(port)
                h = re.search(r"metrics listener on http://[^:]+:(\d+)", text)
                if h:
                    self.http_port = int(h.group(1))
                return
            if self.proc.poll() is not None:
                self._close_log()
                raise RuntimeError(f"broker exited with {self.proc.returncode}:\n{self.log_text(since)}")
            time.sleep(0.005)
        self.proc.kill()
        self.proc.wait()
        self._close_log()
        raise RuntimeError("broker did not start:\n" + self.log_text(since))

    def log_text(self, since: int = 0) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(since)
                return f.read().decode(errors="replace")
        except FileNotFoundError:
            return ""

    def _close_log(self) -> None:
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def security_config(self, listener: str, user: str | None = None, mechanism: str = "SCRAM-SHA-512",
                        password: str | None = None, client_cert: str | None = None) -> dict:
        """Java-client keys (kgroup's client takes them) to reach ``listener`` as ``user`` (its
        password from ``users`` unless given) with ``mechanism``, or over SSL with the client
        certificate ``client_cert`` (default: the first of ``client_certs``)."""
        listener = listener.upper()
        cfg = {"bootstrap.servers": self.bootstrap(listener), "security.protocol": listener}
        if listener in ("SSL", "SASL_SSL"):
            cfg.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": self.certs.ca_cert})
        if listener == "SSL":
            cert, key = self.certs.client_cert(client_cert or self.client_cert_names[0])
            cfg.update({"ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": open(cert).read(),
                        "ssl.keystore.key": open(key).read()})
        if listener.startswith("SASL_"):
            module = "plain.PlainLoginModule" if mechanism == "PLAIN" else "scram.ScramLoginModule"
            pw = password if password is not None else self.users[user]
            cfg.update({"sasl.mechanism": mechanism,
                        "sasl.jaas.config": f'org.apache.kafka.common.security.{module} required '
                                            f'username="{user}" password="{pw}";'})
        return cfg

    # -- helpers (through the Kafka protocol, with kgroup's own client) ------------------------
    def client_config(self, **configs) -> dict:
        """``bootstrap.servers`` plus ``configs`` (Kafka's keys, or underscores)."""
        return {"bootstrap.servers": self.bootstrap_servers, **{k.replace("_", "."): v for k, v in configs.items()}}

    def admin(self, **configs):
        """A blocking admin client (``kgroup.client.sync.KafkaAdmin``); close it, or use ``with``."""
        from ..client.sync import KafkaAdmin
        return KafkaAdmin(self.client_config(**configs))

    def create_topics(self, *names: str, partitions: int = 1, configs: Mapping[str, str] | None = None) -> None:
        """Create topics (each with ``partitions``); an error (e.g. it exists) raises."""
        from ..client.admin import NewTopic
        with self.admin() as admin:
            result = admin.create_topics([NewTopic(n, partitions, -1, dict(configs or {})) for n in names])
        errors = {n: e for n, e in result.items() if e is not None}
        if errors:
            raise next(iter(errors.values()))

    def create_topic(self, name: str, partitions: int = 1, configs: Mapping[str, str] | None = None) -> None:
        self.create_topics(name, partitions=partitions, configs=configs)

    def produce(self, topic: str, values: Iterable, *, key=None, partition: int | None = None,
                **configs) -> list:
        """Produce each of ``values`` (bytes or str) and wait for every acknowledgement; returns
        their RecordMetadata (topic, partition, offset, ...)."""
        from ..client.sync import KafkaProducer

        def raw(v):
            return v.encode() if isinstance(v, str) else v
        with KafkaProducer(self.client_config(**configs)) as producer:
            futures = [producer.send(topic, raw(v), raw(key), partition=partition) for v in values]
            producer.flush()
            return [f.get(30) for f in futures]

    def consume(self, topic: str, count: int, *, group: str | None = None, timeout: float = 30.0,
                **configs) -> list:
        """Read ``count`` records of ``topic`` from the beginning and return them (ConsumerRecord:
        topic, partition, offset, key, value, ...). With ``group`` the records come through a group
        subscription and their offsets are committed; without, every partition is assigned."""
        from ..client.assignors import TopicPartition
        from ..client.sync import KafkaConsumer
        cfg = self.client_config(**{"auto.offset.reset": "earliest", **configs})
        if group is not None:
            cfg.update({"group.id": group, "enable.auto.commit": False})
        out: list = []
        with KafkaConsumer(config=cfg) as consumer:
            if group is not None:
                consumer.subscribe([topic])
            else:
                parts = consumer.partitions_for(topic) or set()
                tps = [TopicPartition(topic, p) for p in sorted(parts)]
                consumer.assign(tps)
                consumer.seek_to_beginning(*tps)
            deadline = time.monotonic() + timeout
            while len(out) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"consumed {len(out)} of {count} records of {topic} in {timeout}s")
                out += consumer.poll(timeout_ms=int(min(left, 1.0) * 1000))
            out = out[:count]
            if group is not None:
                # Commit what is returned, not the position (a poll may have fetched further).
                from ..client.types import OffsetAndMetadata
                last: dict = {}
                for r in out:
                    last[TopicPartition(r.topic, r.partition)] = OffsetAndMetadata(r.offset + 1, "")
                consumer.commit(last)
        return out

    def describe_group(self, group: str):
        """A consumer-protocol (KIP-848) group as ConsumerGroupDescribe shows it (state, epochs,
        members with assignments), any other as DescribeGroups does: Java's
        Admin.describeConsumerGroups asks the first and falls back to the second the same way."""
        from ..protocol.errors import ErrorCode
        with self.admin() as admin:
            described = admin.describe_consumer_groups([group])[group]
            if described.error == ErrorCode.GROUP_ID_NOT_FOUND:
                return admin.describe_groups([group])[group]
            return described

    def describe_groups(self, *groups: str) -> dict:
        with self.admin() as admin:
            return admin.describe_groups(list(groups))

    def list_groups(self) -> list:
        with self.admin() as admin:
            return admin.list_groups()

    def committed_offsets(self, group: str) -> dict:
        """{TopicPartition: offset} the group has committed."""
        with self.admin() as admin:
            got = admin.list_group_offsets(group)
        return {tp: (o.offset if o is not None else None) for tp, o in got.items()}

    # -- fault injection (kgroup/broker/faults.py), over the wire in both modes ------------------
    def inject(self, fault: str, **params) -> dict:
        """Apply one fault command, e.g. ``inject("errors", api="OffsetCommit",
        errors=["NOT_COORDINATOR"], group="g")``; returns the broker's fault state."""
        from ..client.fault_injection import send_fault_command
        return send_fault_command(self.bootstrap_servers, {"fault": fault, **params})

    def inject_errors(self, api, errors, *, client_id=None, group=None) -> dict:
        """The next requests of ``api`` (name or key) get ``errors`` (names or codes), one each."""
        return self.inject("errors", api=api, errors=list(errors), client_id=client_id, group=group)

    def inject_delay(self, api, ms: int, *, count: int | None = 1, client_id=None, group=None) -> dict:
        """Delay the answers to the next ``count`` requests of ``api`` (None: every one) by ``ms``."""
        return self.inject("delay", api=api, ms=ms, count=count, client_id=client_id, group=group)

    def drop_connection(self, *, after: int = 0, count: int | None = 1, api=None, client_id=None,
                        group=None) -> dict:
        """Close the connection of the request that follows ``after`` matching requests."""
        return self.inject("drop", after=after, count=count, api=api, client_id=client_id, group=group)

    def hold_loading(self, ms: int, *, group: str | None = None) -> dict:
        """The coordinator answers COORDINATOR_LOAD_IN_PROGRESS for ``group`` (all if None) for ``ms``."""
        return self.inject("loading", ms=ms, group=group)

    def pause_heartbeat_expiry(self) -> dict:
        return self.inject("pause-heartbeat-expiry")

    def resume_heartbeat_expiry(self) -> dict:
        return self.inject("resume-heartbeat-expiry")

    def clear_faults(self) -> dict:
        return self.inject("clear")

    # -- test control (kgroup/broker/test_control.py): time travel, reset, state, waits --------------
    def control(self, command: dict, timeout: float = 30.0):
        """Run one test-control command (``{"op": "advance-time", "ms": 1000}``, ...): on the
        loop of an in-process broker, over the wire (the fault-injection control topic) for a
        broker process; a wait's answer comes when it ends."""
        if self.broker is not None:
            if self.broker.test_control is None:
                raise RuntimeError("test control needs kgroup.fault.injection.enable=true")
            done = threading.Event()
            box: list = []

            def start(broker):
                answer = broker.test_control.command(command)
                if hasattr(answer, "listen"):       # a wait: a PendingResponse
                    answer.listen(lambda p: (box.append(p.response), done.set()))
                else:
                    box.append(answer)
                    done.set()
            self.call(start)
            if not done.wait(timeout):
                raise TimeoutError(f"the broker did not answer {command}")
            return box[0]
        from ..client.fault_injection import send_fault_command
        return send_fault_command(self.bootstrap_servers, {"fault": command["op"], **command}, timeout)

    def advance_time(self, seconds: float = 0.0, *, ms: int | None = None) -> dict:
        """Time travel: move the broker's clock forward (``seconds``, or ``ms``), running every
        coordinator timer due on the way at its own deadline (session and rebalance timeouts,
        transaction timeouts, offsets retention, ...), then retention and producer-id expiry.
        Returns the clock (``now_ms``, ``offset_ms``) and what fired."""
        return self.control({"op": "advance-time", "ms": int(seconds * 1000) if ms is None else int(ms)})

    def clock(self) -> dict:
        """The broker's clock: ``now_ms`` and the ``offset_ms`` time travel added."""
        return self.control({"op": "clock"})

    def reset(self) -> dict:
        """Back to an empty broker without a restart: topics, groups of every type, offsets,
        transactions, dynamic configs, faults, timelines and the clock's offset."""
        return self.control({"op": "reset"})

    def groups(self) -> list[dict]:
        """Every group as JSON-able dicts (type, state, generation, members, assignments, offsets)."""
        return self.control({"op": "groups"})["groups"]

    def group(self, group: str) -> dict | None:
        return self.control({"op": "group", "group": group})["group"]

    def transactions(self) -> list[dict]:
        return self.control({"op": "transactions"})["transactions"]

    def topics(self, internal: bool = False) -> list[dict]:
        """Every topic with its partitions' log start offsets and high watermarks (the internal
        ones too with ``internal``)."""
        return self.control({"op": "topics", "internal": internal})["topics"]

    def _wait(self, cmd: dict, timeout: float) -> dict:
        cmd = {"op": "wait", **{k: v for k, v in cmd.items() if v is not None}, "timeout_ms": int(timeout * 1000)}
        answer = self.control(cmd, timeout + 10.0)
        if not answer.get("ok"):
            raise BrokerWaitTimeout(answer)
        return answer["state"]

    def wait_for_group(self, group: str, state: str | None = "Stable", members: int | None = None,
                       type: str | None = None, timeout: float = 10.0) -> dict:
        """Wait until ``group`` is in ``state`` (Kafka's names: Stable, Empty, PreparingRebalance,
        Reconciling, ...) with ``members`` members and of ``type`` (classic, consumer); returns
        the group. Raises BrokerWaitTimeout (an AssertionError) with what it last saw."""
        return self._wait({"for": "group", "group": group, "state": state, "members": members, "type": type},
                          timeout)

    def wait_for_assignment(self, group: str, assignment: Mapping, timeout: float = 10.0) -> dict:
        """Wait until each member (by member id, client id or instance id) of ``assignment``
        holds exactly its partitions: ``{"client-1": {"t": [0, 1]}}`` (or a list of
        ``(topic, partition)``)."""
        return self._wait({"for": "assignment", "group": group,
                           "assignment": {k: _partitions(v) for k, v in assignment.items()}}, timeout)

    def wait_for_committed(self, group: str, offsets: Mapping, timeout: float = 10.0) -> dict:
        """Wait until ``group`` has committed at least ``offsets``: ``{"t": {0: 5}}`` or
        ``{("t", 0): 5}``."""
        return self._wait({"for": "committed", "group": group, "offsets": _offsets(offsets)}, timeout)

    def wait_for_lag(self, group: str, lag: int = 0, topics: Iterable[str] = (), timeout: float = 10.0) -> dict:
        """Wait until the group's lag (high watermark minus committed, over the partitions it
        committed or holds, and every partition of ``topics``) is at most ``lag``."""
        return self._wait({"for": "lag", "group": group, "lag": lag, "topics": list(topics)}, timeout)

    def wait_for_transaction(self, transactional_id: str, state: str, timeout: float = 10.0) -> dict:
        """Wait until the transaction is in ``state`` (Ongoing, CompleteCommit, CompleteAbort, ...)."""
        return self._wait({"for": "transaction", "transactional_id": transactional_id, "state": state}, timeout)

    def wait_for_topic(self, name: str, partitions: int | None = None, *, deleted: bool = False,
                       timeout: float = 10.0) -> dict | None:
        """Wait until topic ``name`` exists (with ``partitions``), or, with ``deleted``, is gone."""
        return self._wait({"for": "topic", "topic": name, "partitions": partitions, "deleted": deleted or None},
                          timeout)

    def log_tail(self, lines: int = 50) -> str:
        """The last ``lines`` of the broker's log (the subprocess's output, or what the in-process
        broker's loggers wrote since it started)."""
        if self.process:
            return "\n".join(self.log_text().splitlines()[-lines:])
        return "\n".join(list(self._log_records)[-lines:])

    def timeline(self, group: str) -> list[dict]:
        """The group's rebalance timeline as the broker keeps it (kgroup/broker/timeline.py)."""
        from ..client.timeline import fetch_timeline
        return fetch_timeline(self.bootstrap_servers, group)

    def __repr__(self) -> str:
        mode = "process" if self.process else "in-process"
        return f"<KafkaBroker {self.bootstrap_servers} {mode} data={self.data_dir}>"


class BrokerWaitTimeout(AssertionError):
    """A wait_for_* helper timed out: the message shows what the broker last saw and, for a
    group, its rebalance timeline."""

    def __init__(self, answer: dict):
        self.answer = answer
        lines = [answer.get("error") or "wait failed",
                 "waited for: " + json.dumps({k: v for k, v in (answer.get("wait") or {}).items() if k != "op"}),
                 "last seen: " + json.dumps(answer.get("last_seen"), indent=1, default=str)]
        timeline = answer.get("timeline")
        if timeline:
            lines.append("rebalance timeline:")
            lines += ["  " + format_timeline_event(e) for e in timeline[-30:]]
        super().__init__("\n".join(lines))


def format_timeline_event(e: dict) -> str:
    detail = " ".join(f"{k}={v}" for k, v in e.items() if k not in ("time_ms", "event"))
    return f"{e.get('time_ms')} {e.get('event')} {detail}"


class _RingHandler(logging.Handler):
    def __init__(self, records: collections.deque, thread_name: str):
        super().__init__(logging.INFO)
        self.records = records
        self.thread_name = thread_name
        self.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))

    def emit(self, record) -> None:
        if record.threadName == self.thread_name:
            try:
                self.records.append(self.format(record))
            except Exception:   # noqa: BLE001 - a log line must never fail the broker
                pass


def _partitions(v) -> dict:
    if isinstance(v, Mapping):
        return {t: sorted(int(p) for p in ps) for t, ps in v.items()}
    out: dict = {}
    for item in v:
        t, p = (item.topic, item.partition) if hasattr(item, "topic") else item
        out.setdefault(t, []).append(int(p))
    return {t: sorted(ps) for t, ps in out.items()}


def _offsets(offsets: Mapping) -> dict:
    out: dict = {}
    for k, v in offsets.items():
        if isinstance(v, Mapping):
            for p, o in v.items():
                out.setdefault(k, {})[str(p)] = int(o)
        else:
            t, p = (k.topic, k.partition) if hasattr(k, "topic") else k
            out.setdefault(t, {})[str(p)] = int(getattr(v, "offset", v))
    return out


@contextlib.contextmanager
def broker(data_dir=None, overrides: Mapping[str, object] | None = None, *, process: bool = False,
           metrics: bool = False):
    """``with kgroup.testing.broker() as b:`` a started broker, closed (and its temporary data
    directory removed) on exit; for unittest and scripts."""
    b = KafkaBroker(data_dir, overrides, process=process, metrics=metrics).start()
    try:
        yield b
    finally:
        b.close()
