"""``kgroup cluster up | status | kill | start | stop | pause | resume | down``: a local 2-broker
cluster in the background, on consecutive ports."""
import os
import socket
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.interop


def consecutive_free_ports(n):
    for _ in range(50):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        base = s.getsockname()[1]
        s.close()
        if base + n >= 65535:
            continue
        ok = True
        for p in range(base, base + n):
            t = socket.socket()
            try:
                t.bind(("127.0.0.1", p))
            except OSError:
                ok = False
            finally:
                t.close()
        if ok:
            return base
    raise RuntimeError("no consecutive free ports")


def kgroup(*args, timeout=120):
    out = subprocess.run([sys.executable, "-m", "kgroup", "cluster", *args], capture_output=True, text=True,
                         timeout=timeout)
    assert out.returncode == 0, out.stderr + out.stdout
    return out.stdout


def serves(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def test_overrides_apply_to_every_broker_with_its_port():
    """``--override`` reaches every broker; ``{node}``/``{port}``/``{dir}`` are each broker's, so
    a secured cluster's listeners can be given on the command line."""
    from kgroup.cluster.local import broker_overrides
    given = ["listeners=SASL_SSL://127.0.0.1:{port},INTERNAL://127.0.0.1:1{port}",
             "listener.security.protocol.map=SASL_SSL:SASL_SSL,INTERNAL:SSL", "inter.broker.listener.name=INTERNAL",
             "listener.name.sasl_ssl.plain.sasl.jaas.config=PlainLoginModule required username=\"b\" password=\"x=y\";",
             "ssl.keystore.location={dir}/broker-{node}.pem"]
    got = broker_overrides("2", 9093, "/c", "127.0.0.1:2181", given)
    assert got["node.id"] == "2" and got["log.dirs"] == "/c/broker-2" and got["zookeeper.connect"] == "127.0.0.1:2181"
    assert got["listeners"] == "SASL_SSL://127.0.0.1:9093,INTERNAL://127.0.0.1:19093"
    assert got["inter.broker.listener.name"] == "INTERNAL"
    assert got["listener.name.sasl_ssl.plain.sasl.jaas.config"].endswith('password="x=y";')
    assert got["ssl.keystore.location"] == "/c/broker-2.pem"
    with pytest.raises(SystemExit, match="key=value"):
        broker_overrides("1", 9092, "/c", "z:1", ["listeners"])


def test_up_act_down(tmp_path):
    d = str(tmp_path / "cluster")
    port = consecutive_free_ports(2)
    try:
        out = kgroup("up", "--brokers", "2", "--dir", d, "--port", str(port),
                     "--override", "zookeeper.session.timeout.ms=4000")
        assert out.strip() == f"127.0.0.1:{port},127.0.0.1:{port + 1}"
        assert serves(port) and serves(port + 1)
        assert "broker 1" in kgroup("status", "--dir", d) and "down" not in kgroup("status", "--dir", d)
        from confluent_kafka.admin import AdminClient
        a = AdminClient({"bootstrap.servers": out.strip()})
        assert sorted(a.list_topics(timeout=10).brokers) == [1, 2]
        kgroup("kill", "1", "--dir", d)
        assert "broker 1 127.0.0.1:%d down" % port in kgroup("status", "--dir", d)
        kgroup("start", "1", "--dir", d)          # waits out the killed session's registration
        assert serves(port)
        kgroup("pause", "2", "--dir", d)
        kgroup("resume", "2", "--dir", d)
        kgroup("stop", "2", "--dir", d)
        assert not serves(port + 1)
        assert "controlled shutdown completed" in open(os.path.join(d, "broker-2.log")).read()
        kgroup("start", "2", "--dir", d)
        deadline = time.monotonic() + 20
        while sorted(a.list_topics(timeout=10).brokers) != [1, 2]:
            assert time.monotonic() < deadline
            time.sleep(0.2)
    finally:
        kgroup("down", "--dir", d)
    status = kgroup("status", "--dir", d)
    assert "up" not in status.replace("zookeeper", ""), status
    assert not serves(port) and not serves(port + 1)
