"""``kgroup serve`` in cluster mode: a ZooKeeper it cannot reach, or its node id held by a live
broker, is one line on stderr and exit 1 (no traceback)."""
import subprocess
import sys

import pytest

from kgroup.testing.broker import KafkaBroker
from kgroup.testing.zookeeper import ZooKeeperServer, free_port

pytestmark = pytest.mark.interop


def serve(tmp_path, *overrides, timeout=60):
    args = [sys.executable, "-m", "kgroup", "serve", "--override", f"log.dirs={tmp_path}",
            "--override", "listeners=PLAINTEXT://127.0.0.1:0"]
    for o in overrides:
        args += ["--override", o]
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout)


def test_zookeeper_unreachable(tmp_path):
    out = serve(tmp_path, f"zookeeper.connect=127.0.0.1:{free_port()}", "zookeeper.connection.timeout.ms=1000")
    assert out.returncode == 1
    assert "kgroup: Timed out waiting for connection to ZooKeeper at 127.0.0.1:" in out.stderr
    assert "Traceback" not in out.stderr


def test_node_id_held_by_a_live_broker(tmp_path):
    with ZooKeeperServer(tmp_path / "zk") as zk, \
            KafkaBroker(tmp_path / "b1", {"node.id": 1, "zookeeper.connect": zk.connect,
                                          "zookeeper.session.timeout.ms": 2000}) as _first:
        out = serve(tmp_path / "b1-again", "node.id=1", f"zookeeper.connect={zk.connect}",
                    "zookeeper.session.timeout.ms=2000")
        assert out.returncode == 1, out.stderr[-2000:]
        assert "broker id 1 is registered in ZooKeeper by another live session" in out.stderr
        assert "Traceback" not in out.stderr
