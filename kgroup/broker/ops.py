"""Operations features, each off unless configured, and the one request hook they share.

- fault injection (faults.py) and test control (test_control.py: time travel, reset, waits):
  ``kgroup.fault.injection.enable``
- metrics (metrics.py) and the HTTP listener with the web console (http.py, console.py):
  ``metrics.listener``
- rebalance timelines (timeline.py): kept whenever either of the above is on

The server calls ``broker.request_hook(handler, broker, ctx, body, version)`` instead of the
handler when it is not None; with every feature off it is None, and the request path pays two
attribute checks. With metrics alone (a production broker) there is no hook: the server counts
each request itself in ``broker.request_counts`` (BrokerMetrics.recent), without a call layer,
and calls BrokerMetrics.dispatch_sampled only for the requests sampled for timing and the kinds
metrics watch.
"""
from __future__ import annotations

import functools

from .faults import FaultInjector
from .test_control import TestControl
from .metrics import BrokerMetrics
from .timeline import TIMELINE_TOPIC, GroupTimelines


def attach_operations(broker) -> None:
    """Set ``broker.faults``, ``.metrics``, ``.timelines`` (each None when off),
    ``.request_hook``, ``.request_counts`` (None unless metrics alone) and ``.control_topics``."""
    config = broker.config
    broker.faults = FaultInjector(broker) if config["kgroup.fault.injection.enable"] else None
    # time travel, reset, waits and state as JSON (test_control.py): a test broker's, with faults
    broker.test_control = TestControl(broker) if broker.faults is not None else None
    broker.metrics = BrokerMetrics(broker) if config["metrics.listener"] else None
    broker.timelines = GroupTimelines(broker) if broker.faults or broker.metrics else None
    # Queries produced to a topic name Kafka forbids (handlers/produce.py): topic -> fn(request)
    # returning the ProduceResponse. Looked up by the Produce handler, so no request layer
    # watches every Produce for them.
    broker.control_topics = {}
    if broker.timelines is not None:
        broker.control_topics[TIMELINE_TOPIC] = broker.timelines.answer_query
        # consumer groups change only by their records: compared after each write of theirs
        broker.timelines.watch_writes(broker.group_coordinator)
    broker.request_counts = None
    if broker.metrics is not None and broker.faults is None:
        # Production with metrics: no request layer. The server counts each request inline in
        # these counts and calls the handler directly, and dispatch_sampled only for sampled
        # requests and the kinds metrics or timelines watch.
        broker.metrics.attach_timelines(broker.timelines)
        broker.request_hook = None
        broker.request_counts = broker.metrics.recent
    else:
        broker.request_hook = request_hook(broker.metrics, broker.faults, broker.timelines)


def request_hook(*layers):
    """The layers' ``dispatch`` methods chained, the first outermost (metrics time what fault
    injection answers too); None when every layer is None."""
    hook = None
    for layer in reversed([layer for layer in layers if layer is not None]):
        # Each layer's dispatch runs ``inner(handler, ...)`` (the next layer) or the handler.
        hook = layer.dispatch if hook is None else functools.partial(layer.dispatch, inner=hook)
    return hook
