"""Every real client of the matrix (confluent-kafka, kafka-python, aiokafka, kafkajs, kcat, and
kgroup's own) produces, consumes in a group and commits over SASL_SSL with SCRAM-SHA-512, over
SASL_PLAINTEXT with PLAIN and over mutual TLS (the client's certificate, required by the SSL
listener); a wrong password gets SASL_AUTHENTICATION_FAILED and writes nothing. One broker with
all four listeners and openssl-generated certificates serves the whole module."""
from __future__ import annotations

import asyncio
import json
import subprocess

import pytest

from kgroup.testing.broker import KafkaBroker
from tests.interop.test_matrix_harness import NODE_DIR, kcat_bin, node_bin

pytestmark = pytest.mark.interop

USERS = {"alice": "alice-secret"}
CLIENTS = ["kgroup", "confluent-kafka", "kafka-python", "aiokafka", "kafkajs", "kcat"]
MODES = {"sasl_ssl_scram512": ("SASL_SSL", "SCRAM-SHA-512"), "sasl_plaintext_plain": ("SASL_PLAINTEXT", "PLAIN"),
         "mtls": ("SSL", None)}
N = 10


@pytest.fixture(scope="module")
def secure(tmp_path_factory):
    with KafkaBroker(tmp_path_factory.mktemp("secure") / "data", security=True, users=USERS,
                     client_certs=("alice",)) as b:
        yield b


class Sec:
    """What one client needs to reach one listener."""

    def __init__(self, broker, listener, mechanism, password=None):
        self.listener, self.mechanism = listener, mechanism
        self.bootstrap = broker.bootstrap(listener)
        self.user, self.password = "alice", password or USERS["alice"]
        self.tls = listener in ("SSL", "SASL_SSL")
        self.ca = broker.certs.ca_cert
        self.cert, self.key = broker.certs.client_cert("alice") if listener == "SSL" else (None, None)
        self.kgroup = broker.security_config(listener, "alice", mechanism or "PLAIN", password=password,
                                             client_cert="alice")

    def librdkafka(self) -> dict:
        c = {"bootstrap.servers": self.bootstrap, "security.protocol": self.listener.lower()}
        if self.tls:
            c["ssl.ca.location"] = self.ca
        if self.cert:
            c.update({"ssl.certificate.location": self.cert, "ssl.key.location": self.key})
        if self.mechanism:
            c.update({"sasl.mechanisms": self.mechanism, "sasl.username": self.user, "sasl.password": self.password})
        return c

    def kafka_python(self) -> dict:
        c = {"bootstrap_servers": self.bootstrap, "security_protocol": self.listener}
        if self.tls:
            c.update({"ssl_cafile": self.ca, "ssl_check_hostname": True})
        if self.cert:
            c.update({"ssl_certfile": self.cert, "ssl_keyfile": self.key})
        if self.mechanism:
            c.update({"sasl_mechanism": self.mechanism, "sasl_plain_username": self.user,
                      "sasl_plain_password": self.password})
        return c

    def aiokafka(self) -> dict:
        from aiokafka.helpers import create_ssl_context
        c = {"bootstrap_servers": self.bootstrap, "security_protocol": self.listener}
        if self.tls:
            c["ssl_context"] = create_ssl_context(cafile=self.ca, certfile=self.cert, keyfile=self.key)
        if self.mechanism:
            c.update({"sasl_mechanism": self.mechanism, "sasl_plain_username": self.user,
                      "sasl_plain_password": self.password})
        return c

    def kafkajs(self) -> dict:
        c = {"bootstrap": self.bootstrap, "ssl": None, "sasl": None}
        if self.tls:
            c["ssl"] = {"ca": open(self.ca).read(), "cert": self.cert and open(self.cert).read(),
                        "key": self.key and open(self.key).read()}
        if self.mechanism:
            c["sasl"] = {"mechanism": self.mechanism.lower(), "username": self.user, "password": self.password}
        return c


def run_client(client: str, sec: Sec, topic: str, group: str, values: list[str]) -> list[str]:
    """Produce ``values``, consume them in ``group`` committing each; return the values consumed."""
    if client == "kgroup":
        from kgroup.client.sync import KafkaConsumer, KafkaProducer
        from kgroup.client.types import OffsetAndMetadata
        from kgroup.client.assignors import TopicPartition
        with KafkaProducer({**sec.kgroup, "max.block.ms": 10000}) as p:
            futs = [p.send(topic, v.encode()) for v in values]
            p.flush()
            [f.get(30) for f in futs]
        out = []
        with KafkaConsumer(config={**sec.kgroup, "group.id": group, "auto.offset.reset": "earliest",
                                   "enable.auto.commit": False}) as c:
            c.subscribe([topic])
            while len(out) < len(values):
                recs = c.poll(timeout_ms=1000)
                out += [r.value.decode() for r in recs]
                if recs:
                    c.commit({TopicPartition(r.topic, r.partition): OffsetAndMetadata(r.offset + 1, "") for r in recs})
        return out
    if client in ("confluent-kafka", "kcat"):
        conf = sec.librdkafka()
        if client == "kcat":
            args = [kcat_bin()] + [x for k, v in conf.items() for x in ("-X", f"{k}={v}")]
            subprocess.run(args + ["-P", "-t", topic], input="\n".join(values) + "\n", text=True, check=True,
                           timeout=60, capture_output=True)
            out = subprocess.run(args + ["-G", group, topic, "-X", "auto.offset.reset=earliest",
                                         "-X", "enable.auto.commit=true", "-X", "auto.commit.interval.ms=100",
                                         "-c", str(len(values)), "-e"],
                                 text=True, timeout=60, capture_output=True)
            assert out.returncode == 0, out.stderr[-2000:]
            return [line for line in out.stdout.splitlines() if line]
        from confluent_kafka import Consumer, Producer
        p = Producer(conf)
        for v in values:
            p.produce(topic, v.encode())
        assert p.flush(30) == 0
        c = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False})
        c.subscribe([topic])
        out = []
        try:
            for _ in range(60):
                m = c.poll(1.0)
                if m is None:
                    if len(out) >= len(values):
                        break
                    continue
                assert m.error() is None, m.error()
                out.append(m.value().decode())
                c.commit(message=m, asynchronous=False)
                if len(out) >= len(values):
                    break
        finally:
            c.close()
        return out
    if client == "kafka-python":
        from kafka import KafkaConsumer, KafkaProducer
        conf = sec.kafka_python()
        p = KafkaProducer(**conf, **({"max_block_ms": 5000} if sec.password != USERS["alice"] else {}))
        for v in values:
            p.send(topic, v.encode())
        p.flush(30)
        p.close()
        c = KafkaConsumer(topic, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False, **conf)
        out = []
        try:
            for _ in range(30):
                for recs in c.poll(timeout_ms=1000).values():
                    out += [r.value.decode() for r in recs]
                if out:
                    c.commit()
                if len(out) >= len(values):
                    break
        finally:
            c.close()
        return out
    if client == "aiokafka":
        from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

        async def go():
            p = AIOKafkaProducer(**sec.aiokafka())
            await p.start()
            try:
                for v in values:
                    await p.send_and_wait(topic, v.encode())
            finally:
                await p.stop()
            c = AIOKafkaConsumer(topic, group_id=group, auto_offset_reset="earliest", enable_auto_commit=False,
                                 **sec.aiokafka())
            await c.start()
            out = []
            try:
                while len(out) < len(values):
                    batch = await asyncio.wait_for(c.getmany(timeout_ms=1000), 30)
                    for recs in batch.values():
                        out += [r.value.decode() for r in recs]
                    if batch:
                        await c.commit()
            finally:
                await c.stop()
            return out
        return asyncio.run(go())
    if client == "kafkajs":
        conf = {**sec.kafkajs(), "topic": topic, "group": group, "messages": values,
                "retries": 0 if sec.password != USERS["alice"] else 5}
        out = subprocess.run([node_bin(), f"{NODE_DIR}/secure.js", json.dumps(conf)], capture_output=True,
                             text=True, timeout=120)
        evs = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
        err = [e for e in evs if e["ev"] == "error"]
        if err:
            raise RuntimeError(f"kafkajs: {err[0]['type']}: {err[0]['msg']}")
        return next(e["values"] for e in evs if e["ev"] == "consumed")
    raise ValueError(client)


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("client", CLIENTS)
def test_client_produces_consumes_commits(secure, client, mode):
    listener, mechanism = MODES[mode]
    topic = group = f"sec-{client}-{mode}"
    secure.create_topic(topic, 1)
    values = [f"{client}-{mode}-{i}" for i in range(N)]
    got = run_client(client, Sec(secure, listener, mechanism), topic, group, values)
    assert sorted(got) == sorted(values)
    committed = secure.committed_offsets(group)
    assert sum(v for v in committed.values() if v is not None) == N, committed


@pytest.mark.parametrize("mode", ["sasl_ssl_scram512", "sasl_plaintext_plain"])
@pytest.mark.parametrize("client", CLIENTS)
def test_wrong_password_gets_sasl_authentication_failed(secure, client, mode, caplog):
    listener, mechanism = MODES[mode]
    topic = f"bad-{client}-{mode}"
    secure.create_topic(topic, 1)
    sec = Sec(secure, listener, mechanism, password="not-the-password")
    failed = None
    try:
        if client in ("confluent-kafka", "kcat"):
            from confluent_kafka import KafkaException, Producer
            errors = []
            conf = {**sec.librdkafka(), "error_cb": errors.append}
            if client == "kcat":
                out = subprocess.run([kcat_bin()] + [x for k, v in sec.librdkafka().items() for x in ("-X", f"{k}={v}")]
                                     + ["-P", "-t", topic], input="x\n", text=True, timeout=60, capture_output=True)
                failed = out.stderr
            else:
                p = Producer(conf)
                p.produce(topic, b"x")
                p.flush(5)
                failed = " ".join(str(e) for e in errors)
                if not failed:
                    raise KafkaException("no error reported")
        else:
            run_client(client, sec, topic, f"g-{topic}", ["x"])
    except Exception as e:       # noqa: BLE001 - each client has its own exception type
        failed = (failed or "") + f" {type(e).__name__}: {e}"
    # kafka-python and aiokafka log the broker's answer and keep retrying until their timeout
    failed = (failed or "") + " ".join(r.getMessage() for r in caplog.records if not r.name.startswith("kgroup"))
    assert failed.strip(), "the client was let in with a wrong password"
    # Kafka's message for each mechanism (PLAIN's own, SCRAM's generic one), as each client shows it
    want = ("Invalid username or password" if mechanism == "PLAIN" else
            "Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512")
    assert want in failed, failed
    assert _end_offset(secure, topic) == 0       # nothing written


def _end_offset(secure, topic) -> int:
    from kgroup.client.assignors import TopicPartition
    from kgroup.client.sync import KafkaConsumer
    with KafkaConsumer(config={"bootstrap.servers": secure.bootstrap()}) as c:
        return c.end_offsets([TopicPartition(topic, 0)])[TopicPartition(topic, 0)]
