"""kgroup's pytest plugin, loaded through the ``pytest11`` entry point when kgroup is installed.

Fixtures (each yields a started :class:`kgroup.testing.broker.KafkaBroker` on 127.0.0.1 with an
ephemeral port and a fresh data directory under pytest's ``tmp_path``):

* ``kafka_broker`` — one broker per test, in-process (its own thread and event loop; ready in
  milliseconds). ``restart()`` keeps its data and port.
* ``kafka_broker_session`` — one in-process broker shared by every test of the session (use
  unique topic and group names per test).
* ``kafka_broker_process`` — one ``kgroup serve`` subprocess per test: what ``kill()`` (SIGKILL)
  and ``kill_and_restart()`` need.
* ``kafka_broker_secure`` — one in-process broker per test with Kafka's four listeners (PLAINTEXT,
  SSL with required client certificates, SASL_PLAINTEXT, SASL_SSL), certificates generated for
  the run (``.certs``: CA, client certificate "client"), and users ``alice`` / ``admin``
  (passwords ``alice-secret`` / ``admin-secret``) for PLAIN and SCRAM; ``security_config(listener,
  user, mechanism)`` gives a client's keys (docs/security.md).

``@pytest.mark.kafka_broker_config(key=value, ...)`` on a test sets broker config keys (Kafka's
names with dots as underscores, or a dict as the single argument) for the function fixtures.
"""
from __future__ import annotations

import pytest

from .broker import KafkaBroker


def pytest_configure(config):
    config.addinivalue_line("markers", "kafka_broker_config(**keys): broker config keys for the kafka_broker "
                                       "and kafka_broker_process fixtures of this test")


def _overrides(request) -> dict:
    out: dict = {}
    for marker in reversed(list(request.node.iter_markers("kafka_broker_config"))):
        for arg in marker.args:
            out.update(arg)
        out.update({k.replace("_", "."): v for k, v in marker.kwargs.items()})
    return out


@pytest.fixture
def kafka_broker(request, tmp_path):
    with KafkaBroker(tmp_path / "kafka-data", _overrides(request)) as b:
        yield b


@pytest.fixture(scope="session")
def kafka_broker_session(tmp_path_factory):
    with KafkaBroker(tmp_path_factory.mktemp("kgroup-session") / "kafka-data") as b:
        yield b


@pytest.fixture
def kafka_broker_process(request, tmp_path):
    with KafkaBroker(tmp_path / "kafka-data", _overrides(request), process=True) as b:
        yield b


SECURE_USERS = {"alice": "alice-secret", "admin": "admin-secret"}


@pytest.fixture
def kafka_broker_secure(request, tmp_path):
    with KafkaBroker(tmp_path / "kafka-data", _overrides(request), security=True, users=SECURE_USERS) as b:
        yield b
