"""kgroup's pytest plugin, loaded through the ``pytest11`` entry point when kgroup is installed.

Fixtures (each yields a started :class:`kgroup.testing.broker.KafkaBroker` on 127.0.0.1 with an
ephemeral port and a fresh data directory under pytest's ``tmp_path``):

* ``kafka_broker`` — one broker per test, in-process (its own thread and event loop; ready in
  milliseconds). ``restart()`` keeps its data and port.
* ``kafka_broker_session`` — one in-process broker shared by every test of the session (use
  unique topic and group names per test).
* ``kafka_broker_clean`` — that session broker, ``reset()`` to empty before the test (topics,
  groups, offsets, transactions, configs, faults, clock): the same names in every test, for a
  few milliseconds instead of a broker per test.
* ``kafka_broker_process`` — one ``kgroup serve`` subprocess per test: what ``kill()`` (SIGKILL)
  and ``kill_and_restart()`` need.
* ``kafka_broker_secure`` — one in-process broker per test with Kafka's four listeners (PLAINTEXT,
  SSL with required client certificates, SASL_PLAINTEXT, SASL_SSL), certificates generated for
  the run (``.certs``: CA, client certificate "client"), and users ``alice`` / ``admin``
  (passwords ``alice-secret`` / ``admin-secret``) for PLAIN and SCRAM; ``security_config(listener,
  user, mechanism)`` gives a client's keys (docs/security.md).
* ``kafka_cluster`` — a :class:`kgroup.testing.cluster.KafkaCluster`: a ZooKeeper (Debian's
  ``zookeeper`` package) and three ``kgroup serve`` brokers (node ids 1-3) over it; ``kill(n)``,
  ``stop(n)``, ``pause(n)``, ``resume(n)``, ``start_broker(n)``, ``leader(topic, p)``,
  ``controller()`` (docs/cluster.md).

When a test that used one of these fixtures fails, its report gets two sections: the tail of
the broker's log and the rebalance timelines of the groups the broker knows (the state it
last had, as ``KafkaBroker.groups()`` shows it).

``@pytest.mark.kafka_broker_config(key=value, ...)`` on a test sets broker config keys (Kafka's
names with dots as underscores, or a dict as the single argument) for the function fixtures
(every broker of ``kafka_cluster``).
"""
from __future__ import annotations

import pytest

from .broker import KafkaBroker, format_timeline_event

FIXTURES = ("kafka_broker", "kafka_broker_session", "kafka_broker_clean", "kafka_broker_process", "kafka_broker_secure")


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
def kafka_broker_clean(kafka_broker_session):
    kafka_broker_session.reset()
    yield kafka_broker_session


@pytest.fixture
def kafka_broker_process(request, tmp_path):
    with KafkaBroker(tmp_path / "kafka-data", _overrides(request), process=True) as b:
        yield b


@pytest.fixture
def kafka_cluster(request, tmp_path):
    """Three kgroup brokers and a ZooKeeper (Debian's zookeeper package) on 127.0.0.1: kill,
    stop, pause, resume and start a broker by its node id (kgroup.testing.cluster)."""
    from .cluster import KafkaCluster
    with KafkaCluster(3, tmp_path / "kafka-cluster", _overrides(request)) as c:
        yield c


SECURE_USERS = {"alice": "alice-secret", "admin": "admin-secret"}


@pytest.fixture
def kafka_broker_secure(request, tmp_path):
    with KafkaBroker(tmp_path / "kafka-data", _overrides(request), security=True, users=SECURE_USERS) as b:
        yield b


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when != "call" or not report.failed:
        return
    funcargs = getattr(item, "funcargs", {})
    for name in FIXTURES:
        b = funcargs.get(name)
        if isinstance(b, KafkaBroker) and b.running:
            for title, text in _failure_sections(b):
                report.sections.append((f"kgroup broker ({name}): {title}", text))


def _failure_sections(b: KafkaBroker) -> list[tuple[str, str]]:
    out = []
    try:
        out.append(("log tail", b.log_tail(40) or "(empty)"))
    except Exception as e:      # noqa: BLE001 - a report must not fail the run
        out.append(("log tail", f"(unavailable: {e})"))
    try:
        lines = []
        for g in b.groups():
            lines.append(f"group {g['group_id']} ({g['type']}): {g['state']}, generation {g['generation']}, "
                         f"{len(g['members'])} member(s)")
            for m in g["members"]:
                lines.append(f"  member {m['member_id']} client {m['client_id']}: {m['assignment']}")
            if g["type"] in ("classic", "consumer"):
                lines += ["  " + format_timeline_event(e) for e in b.timeline(g["group_id"])[-30:]]
        out.append(("groups and rebalance timelines", "\n".join(lines) or "(no groups)"))
    except Exception as e:      # noqa: BLE001
        out.append(("groups and rebalance timelines", f"(unavailable: {e})"))
    return out
