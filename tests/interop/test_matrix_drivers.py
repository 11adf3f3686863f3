"""Consumer drivers for the compatibility matrix: one real client (kafka-python, aiokafka,
confluent-kafka or our own kgroup client) in its own process, so a test can SIGKILL it, driven by one JSON argument and
reporting what it does as JSON lines on stdout. This module holds no tests; the matrix tests
(tests/interop/test_matrix_*.py) start it as ``python tests/interop/test_matrix_drivers.py CONF``
and tests/interop/node/driver.js speaks the same language for kafkajs.

CONF keys: client, bootstrap, group, topics, assignors (names: range, roundrobin, sticky,
cooperative-sticky), instance_id, client_id, session_ms, heartbeat_ms, commit ("sync": commit
synchronously after every non-empty batch; "none"), incremental (confluent-kafka: call
incremental_assign/incremental_unassign itself in its rebalance callbacks), group_protocol
("consumer": KIP-848, confluent-kafka and kgroup; the first of ``assignors`` is then the
server-side assignor asked for).

Events, one JSON object a line: {"ev": "started"}; {"ev": "assigned", "added": [[t, p]...],
"owned": [[t, p]...], "member": id, "gen": n, "protocol": name}; {"ev": "revoked", "parts": ...,
"owned": ...}; {"ev": "records", "recs": [[t, p, offset, value]...]}; {"ev": "committed",
"offsets": [[t, p, offset]...]}; {"ev": "error", "where": ..., "type": ..., "msg": ...};
{"ev": "closed"}. Closing the driver's stdin closes the consumer gracefully (LeaveGroup).
"""
from __future__ import annotations

import json
import sys
import threading
import time


def emit(**kw):
    kw.setdefault("t", time.time())
    sys.stdout.write(json.dumps(kw) + "\n")
    sys.stdout.flush()


def _error(where, e):
    emit(ev="error", where=where, type=type(e).__name__, msg=str(e))


class Owned:
    def __init__(self):
        self.parts: set = set()

    def add(self, parts):
        self.parts |= set(parts)
        return sorted(map(list, self.parts))

    def remove(self, parts):
        self.parts -= set(parts)
        return sorted(map(list, self.parts))


def _stdin_closed() -> threading.Event:
    ev = threading.Event()

    def watch():
        try:
            while sys.stdin.readline():
                pass
        finally:
            ev.set()
    threading.Thread(target=watch, daemon=True).start()
    return ev


def _retry_bootstrap(make, attempts: int = 60):
    """Build a client, retrying while no broker answers (as a supervised application would)."""
    for i in range(attempts):
        try:
            return make()
        except Exception as e:  # noqa: BLE001 - NoBrokersAvailable while the broker restarts
            if i == attempts - 1:
                raise
            _error("start", e)
            time.sleep(1)


# -- kafka-python ----------------------------------------------------------------------------------

def run_kafka_python(conf, stop):
    from kafka import KafkaConsumer
    from kafka.consumer.subscription_state import ConsumerRebalanceListener
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
    names = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor,
             "sticky": StickyPartitionAssignor, "cooperative-sticky": CooperativeStickyAssignor}

    def make():
        return _retry_bootstrap(lambda: KafkaConsumer(
            bootstrap_servers=conf["bootstrap"], group_id=conf["group"], client_id=conf.get("client_id", "kp-matrix"),
            group_instance_id=conf.get("instance_id"),
            partition_assignment_strategy=[names[a] for a in conf.get("assignors", ["range"])],
            session_timeout_ms=conf.get("session_ms", 6000), heartbeat_interval_ms=conf.get("heartbeat_ms", 1000),
            max_poll_interval_ms=conf.get("max_poll_interval_ms", 30000), enable_auto_commit=False,
            auto_offset_reset="earliest", request_timeout_ms=conf.get("request_timeout_ms", 15000),
            reconnect_backoff_max_ms=500, retry_backoff_ms=100))
    owned = Owned()
    current = {"consumer": None, "joined": False}

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            parts = [(tp.topic, tp.partition) for tp in revoked]
            emit(ev="revoked", parts=sorted(map(list, parts)), owned=owned.remove(parts))

        def on_partitions_assigned(self, assigned):
            co = current["consumer"]._coordinator
            md = co.group_metadata()
            parts = [(tp.topic, tp.partition) for tp in assigned]
            if parts:
                current["joined"] = True
            emit(ev="assigned", added=sorted(map(list, parts)), owned=owned.add(parts), member=md.member_id,
                 gen=md.generation_id, protocol=getattr(getattr(co, "_generation", None), "protocol", None))

        def on_partitions_lost(self, lost):
            parts = [(tp.topic, tp.partition) for tp in lost]
            emit(ev="lost", parts=sorted(map(list, parts)), owned=owned.remove(parts))

    # Supervisor for a kafka-python 3.0.12 hang on its first join (about 1 run in 8 of the consume
    # module here; wire transcripts in the matrix report): the first JoinGroup often completes before
    # the subscription's metadata is processed, so the leader rejoins at once (metadata snapshot
    # changed); in that second round, with another metadata update landing, kafka-python sometimes
    # never acts on the SyncGroup answer the broker sent (no Heartbeat follows; with
    # cooperative-sticky its IO loop spins: "Task ... ran for 1.080s ... blocking the event loop")
    # and the coordinator expires it. Like an application's liveness check, a consumer that has not
    # been assigned any partition within join_watchdog_s is closed and made again (a "stalled"
    # event says so).
    watchdog = conf.get("join_watchdog_s", 15)
    restarts = 0
    while True:
        consumer = current["consumer"] = make()
        current["joined"] = False
        consumer.subscribe(conf["topics"], listener=Listener())
        emit(ev="started" if restarts == 0 else "restarted")
        started = time.monotonic()
        try:
            while not stop.is_set():
                if not current["joined"] and restarts < 2 and time.monotonic() - started > watchdog:
                    break
                try:
                    batch = consumer.poll(200)
                except Exception as e:  # noqa: BLE001 - reported, the test decides
                    _error("poll", e)
                    time.sleep(0.5)
                    continue
                recs = [[m.topic, m.partition, m.offset, m.value.decode()] for ms in batch.values() for m in ms]
                if not recs:
                    continue
                emit(ev="records", recs=recs)
                if conf.get("commit", "sync") == "sync":
                    offsets = {}
                    for t, p, o, _ in recs:
                        offsets[(t, p)] = max(offsets.get((t, p), 0), o + 1)
                    try:
                        consumer.commit()
                        emit(ev="committed", offsets=[[t, p, o] for (t, p), o in sorted(offsets.items())])
                    except Exception as e:  # noqa: BLE001
                        _error("commit", e)
        finally:
            try:
                consumer.close(autocommit=False, timeout_ms=5000)
            except Exception as e:  # noqa: BLE001
                _error("close", e)
        if stop.is_set():
            emit(ev="closed")
            return
        restarts += 1
        emit(ev="stalled", msg=f"no assignment {watchdog} s after subscribing: consumer closed and made again")


# -- aiokafka --------------------------------------------------------------------------------------

def run_aiokafka(conf, stop):
    import asyncio

    from aiokafka import AIOKafkaConsumer
    from aiokafka.abc import ConsumerRebalanceListener
    from aiokafka.coordinator.assignors.range import RangePartitionAssignor
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from aiokafka.coordinator.assignors.sticky.sticky_assignor import StickyPartitionAssignor
    names = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor,
             "sticky": StickyPartitionAssignor}

    async def main():
        kwargs = {}
        if conf.get("assignors"):
            kwargs["partition_assignment_strategy"] = tuple(names[a] for a in conf["assignors"])
        def make():
            return AIOKafkaConsumer(
                bootstrap_servers=conf["bootstrap"], group_id=conf["group"],
                client_id=conf.get("client_id", "aio-matrix"), group_instance_id=conf.get("instance_id"),
                session_timeout_ms=conf.get("session_ms", 6000), heartbeat_interval_ms=conf.get("heartbeat_ms", 1000),
                max_poll_interval_ms=conf.get("max_poll_interval_ms", 30000), enable_auto_commit=False,
                auto_offset_reset="earliest", request_timeout_ms=conf.get("request_timeout_ms", 15000),
                retry_backoff_ms=100, **kwargs)
        owned = Owned()

        class Listener(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked):
                parts = [(tp.topic, tp.partition) for tp in revoked]
                emit(ev="revoked", parts=sorted(map(list, parts)), owned=owned.remove(parts))

            def on_partitions_assigned(self, assigned):
                co = consumer._coordinator
                parts = [(tp.topic, tp.partition) for tp in assigned]
                emit(ev="assigned", added=sorted(map(list, parts)), owned=owned.add(parts),
                     member=getattr(co, "member_id", None), gen=getattr(co, "generation", None), protocol=None)

        for attempt in range(60):  # as a supervised application would: the broker may be restarting
            consumer = make()
            try:
                await consumer.start()
                break
            except Exception as e:  # noqa: BLE001 - KafkaConnectionError: no broker yet
                _error("start", e)
                await consumer.stop()
                if attempt == 59:
                    raise
                await asyncio.sleep(1)
        consumer.subscribe(conf["topics"], listener=Listener())
        emit(ev="started")
        try:
            while not stop.is_set():
                try:
                    batch = await consumer.getmany(timeout_ms=200)
                except Exception as e:  # noqa: BLE001
                    _error("poll", e)
                    await asyncio.sleep(0.5)
                    continue
                recs = [[m.topic, m.partition, m.offset, m.value.decode()] for ms in batch.values() for m in ms]
                if not recs:
                    continue
                emit(ev="records", recs=recs)
                if conf.get("commit", "sync") == "sync":
                    offsets = {}
                    for t, p, o, _ in recs:
                        offsets[(t, p)] = max(offsets.get((t, p), 0), o + 1)
                    try:
                        await consumer.commit()
                        emit(ev="committed", offsets=[[t, p, o] for (t, p), o in sorted(offsets.items())])
                    except Exception as e:  # noqa: BLE001
                        _error("commit", e)
        finally:
            await consumer.stop()
            emit(ev="closed")

    asyncio.run(main())


# -- confluent-kafka -------------------------------------------------------------------------------

def run_confluent(conf, stop):
    from confluent_kafka import Consumer
    c = {"bootstrap.servers": conf["bootstrap"], "group.id": conf["group"],
         "client.id": conf.get("client_id", "ck-matrix"),
         "partition.assignment.strategy": ",".join(conf.get("assignors", ["range", "roundrobin"])),
         "session.timeout.ms": conf.get("session_ms", 6000), "heartbeat.interval.ms": conf.get("heartbeat_ms", 1000),
         "max.poll.interval.ms": conf.get("max_poll_interval_ms", 30000), "enable.auto.commit": False,
         "auto.offset.reset": "earliest", "topic.metadata.refresh.interval.ms": 2000,
         "reconnect.backoff.max.ms": 500}
    if conf.get("instance_id"):
        c["group.instance.id"] = conf["instance_id"]
    if conf.get("group_protocol") == "consumer":
        # KIP-848: the broker owns the assignor, session timeout and heartbeat interval
        for key in ("partition.assignment.strategy", "session.timeout.ms", "heartbeat.interval.ms"):
            del c[key]
        c["group.protocol"] = "consumer"
        if conf.get("assignors"):
            c["group.remote.assignor"] = conf["assignors"][0]
    consumer = Consumer(c, error_cb=lambda err: emit(ev="error", where="error_cb", type=err.name(), msg=err.str()))
    owned = Owned()
    incremental = conf.get("incremental", False)

    def on_assign(cons, partitions):
        parts = [(tp.topic, tp.partition) for tp in partitions]
        if incremental:
            cons.incremental_assign(partitions)
        emit(ev="assigned", added=sorted(map(list, parts)), owned=owned.add(parts), member=cons.memberid(),
             gen=None, protocol=cons.rebalance_protocol() if hasattr(cons, "rebalance_protocol") else None)

    def on_revoke(cons, partitions):
        parts = [(tp.topic, tp.partition) for tp in partitions]
        if incremental:
            cons.incremental_unassign(partitions)
        emit(ev="revoked", parts=sorted(map(list, parts)), owned=owned.remove(parts))

    def on_lost(cons, partitions):
        parts = [(tp.topic, tp.partition) for tp in partitions]
        if incremental:
            cons.incremental_unassign(partitions)
        emit(ev="lost", parts=sorted(map(list, parts)), owned=owned.remove(parts))

    consumer.subscribe(conf["topics"], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_lost)
    emit(ev="started")
    try:
        while not stop.is_set():
            msgs = consumer.consume(500, 0.2)
            recs = []
            for m in msgs:
                if m.error() is not None:
                    emit(ev="error", where="poll", type=m.error().name(), msg=m.error().str())
                    continue
                recs.append([m.topic(), m.partition(), m.offset(), m.value().decode()])
            if not recs:
                continue
            emit(ev="records", recs=recs)
            if conf.get("commit", "sync") == "sync":
                offsets = {}
                for t, p, o, _ in recs:
                    offsets[(t, p)] = max(offsets.get((t, p), 0), o + 1)
                try:
                    consumer.commit(asynchronous=False)
                    emit(ev="committed", offsets=[[t, p, o] for (t, p), o in sorted(offsets.items())])
                except Exception as e:  # noqa: BLE001
                    _error("commit", e)
    finally:
        consumer.close()
        emit(ev="closed")


# -- kgroup (our client) ---------------------------------------------------------------------------

def run_kgroup(conf, stop):
    """Our blocking KafkaConsumer (the matrix runs it with group_protocol "consumer": KIP-848)."""
    from kgroup.client import ConsumerRebalanceListener
    from kgroup.client.sync import KafkaConsumer
    kw = {"bootstrap_servers": conf["bootstrap"], "group_id": conf["group"],
          "client_id": conf.get("client_id", "kgroup-matrix"), "group_instance_id": conf.get("instance_id"),
          "enable_auto_commit": False, "auto_offset_reset": "earliest", "reconnect_backoff_max_ms": 500,
          "group_protocol": conf.get("group_protocol", "classic")}
    if kw["group_protocol"] == "consumer" and conf.get("assignors"):
        kw["group_remote_assignor"] = conf["assignors"][0]
    owned = Owned()
    consumer = KafkaConsumer(**kw)

    class Listener(ConsumerRebalanceListener):
        def on_partitions_assigned(self, assigned):
            parts = [(tp.topic, tp.partition) for tp in assigned]
            emit(ev="assigned", added=sorted(map(list, parts)), owned=owned.add(parts), member=None, gen=None,
                 protocol=None)

        def on_partitions_revoked(self, revoked):
            parts = [(tp.topic, tp.partition) for tp in revoked]
            emit(ev="revoked", parts=sorted(map(list, parts)), owned=owned.remove(parts))

        def on_partitions_lost(self, lost):
            parts = [(tp.topic, tp.partition) for tp in lost]
            emit(ev="lost", parts=sorted(map(list, parts)), owned=owned.remove(parts))

    consumer.subscribe(conf["topics"], listener=Listener())
    emit(ev="started")
    try:
        while not stop.is_set():
            try:
                recs = [[r.topic, r.partition, r.offset, r.value.decode()] for r in consumer.poll(200)]
            except Exception as e:  # noqa: BLE001
                _error("poll", e)
                time.sleep(0.2)
                continue
            if not recs:
                continue
            emit(ev="records", recs=recs)
            if conf.get("commit", "sync") == "sync":
                offsets = {}
                for t, p, o, _ in recs:
                    offsets[(t, p)] = max(offsets.get((t, p), 0), o + 1)
                try:
                    consumer.commit()
                    emit(ev="committed", offsets=[[t, p, o] for (t, p), o in sorted(offsets.items())])
                except Exception as e:  # noqa: BLE001
                    _error("commit", e)
    finally:
        consumer.close()
        emit(ev="closed")


RUNNERS = {"kafka-python": run_kafka_python, "aiokafka": run_aiokafka, "confluent-kafka": run_confluent,
           "kgroup": run_kgroup}


def main(argv):
    import logging
    conf = json.loads(argv[1])
    logging.basicConfig(level=conf.get("log_level", "WARNING"), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    stop = _stdin_closed()
    try:
        RUNNERS[conf["client"]](conf, stop)
    except Exception as e:  # noqa: BLE001
        _error("fatal", e)
        raise


if __name__ == "__main__":
    main(sys.argv)
