"""The test-control HTTP API from a non-Python client: docs/testing.md's Node.js example
(tests/interop/node/test_control_example.js, kafkajs) run against a broker with the JSON API."""
import json
import os
import subprocess

import pytest

from kgroup.testing.broker import KafkaBroker
from tests.interop.test_matrix_harness import NODE_DIR, node_bin

pytestmark = pytest.mark.interop


def test_the_nodejs_example_waits_and_time_travels_over_http(tmp_path):
    node = node_bin()
    with KafkaBroker(tmp_path / "d", metrics=True) as b:
        out = subprocess.run([node, os.path.join(NODE_DIR, "test_control_example.js"), b.bootstrap_servers,
                              b.http_url], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        seen = json.loads(out.stdout.strip().splitlines()[-1])
        assert seen["before"] != seen["after"] and seen["deadlines"] >= 1
        assert seen["groups"] == ["billing"] and seen["state"] == "Stable"
        assert seen["expired_ms"] < 30_000            # not the 45 s session timeout
        expired = [e for e in b.timeline("billing") if e["event"] == "member-expired"]
        assert [e["member_id"] for e in expired] == [seen["before"]]
