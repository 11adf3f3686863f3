"""Fault injection for tests, like librdkafka's mock cluster (``rd_kafka_mock_push_request_errors``,
``rd_kafka_mock_broker_push_request_error_rtts``) and franz-go's kfake control functions, but
driven from Python and over the wire.

Off unless the broker config says ``kgroup.fault.injection.enable=true``: then the broker has a
``FaultInjector`` (``broker.faults``) and the server hands it every request instead of calling the
handler directly; otherwise ``broker.faults`` is None and the request path pays one attribute
check. A broker without it refuses injection commands (see CONTROL_TOPIC).

Faults (each rule may be narrowed to one ``client_id`` and/or one ``group``):

- ``errors``: the next matching requests of an API are answered with these error codes, one per
  request in order, without reaching the handler (code 0 lets that request through); Kafka's own
  ``getErrorResponse`` shape: every requested partition/group/key carries the error.
- ``delay``: the answers to the next ``count`` matching requests (every one when ``count`` is
  None) leave ``ms`` later; the request itself is handled at once (what a slow network shows).
- ``drop``: after ``after`` matching requests, the connection that sends the next one is closed
  without an answer (``count`` times).
- ``loading``: the group coordinator answers COORDINATOR_LOAD_IN_PROGRESS for ``ms`` to the
  group APIs of ``group`` (every group when None), as while ``__consumer_offsets`` loads;
  Heartbeat is answered normally and FindCoordinator still names this broker, as in Kafka.
- ``pause-heartbeat-expiry`` / ``resume-heartbeat-expiry``: while paused no member's session
  expires (the broker keeps every member's session alive, as a heartbeat would); resuming gives
  each member a fresh session timeout from then.
- ``clear`` removes every rule (and resumes expiry); ``list`` shows them.
- ``advance-time``, ``clock``, ``reset``, ``groups``, ``group``, ``transactions``, ``topics``,
  ``wait``: test control (time travel, reset, state, waits), run by test_control.py; a wait's
  answer comes when it ends.

Commands are dicts (JSON over the wire): ``{"fault": "errors", "api": "OffsetCommit", "errors":
["NOT_COORDINATOR"], "group": "g"}``. Over the wire a command is the JSON value of one record
produced to partition 0 of CONTROL_TOPIC, a name Kafka forbids (``/``), so a broker without fault
injection answers INVALID_TOPIC_EXCEPTION and never creates it; the answer's ``error_message`` is
the command's JSON result (Produce v8+). ``kgroup inject`` and ``KafkaBroker.inject`` send these.
"""
from __future__ import annotations

import asyncio
import json
import logging

from ..protocol.api import API_BY_KEY, ApiKey
from ..protocol.errors import ErrorCode
from ..protocol.messages.fetch import FetchResponse
from ..protocol.messages.find_coordinator import FindCoordinatorResponse
from ..protocol.messages.heartbeat import HeartbeatResponse
from ..protocol.messages.produce import ProduceResponse
from ..protocol.records import decode_records, iter_batches
from ..coordinator.responses import (FetchGroup, describe_error_group, join_response, leave_response,
                                     offset_commit_error_response, offset_fetch_response, sync_response)
from ..protocol.messages.describe_groups import DescribeGroupsResponse
from ..protocol.messages.describe_share_group_offsets import DescribeShareGroupOffsetsResponse
from .pending import PendingResponse

log = logging.getLogger("kgroup.faults")
CONTROL_TOPIC = "kgroup/fault-injection"
API_BY_NAME = {a.request.__name__[:-len("Request")]: k for k, a in API_BY_KEY.items()}
# The group coordinator's APIs answered COORDINATOR_LOAD_IN_PROGRESS while a group is "loading".
LOADING_APIS = (ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP, ApiKey.LEAVE_GROUP, ApiKey.OFFSET_COMMIT,
                ApiKey.OFFSET_FETCH, ApiKey.DESCRIBE_GROUPS)
# Commands test_control.py runs (the same JSON over the wire, HTTP and in process).
CONTROL_COMMANDS = frozenset(("advance-time", "clock", "reset", "groups", "group", "transactions", "topics", "wait"))
KEEPALIVE_S = 0.1               # how often paused sessions are pushed forward


class FaultError(ValueError):
    """An injection command that cannot be applied (unknown API, error name, fault)."""


def api_key_of(api) -> int:
    if isinstance(api, int) or (isinstance(api, str) and api.isdigit()):
        key = int(api)
        if key in API_BY_KEY:
            return key
    elif api in API_BY_NAME:
        return API_BY_NAME[api]
    raise FaultError(f"unknown API {api!r} (one of {', '.join(sorted(API_BY_NAME))})")


def error_code_of(e) -> int:
    try:
        return int(ErrorCode(int(e))) if isinstance(e, int) or str(e).lstrip("-").isdigit() else int(ErrorCode[e])
    except (KeyError, ValueError):
        raise FaultError(f"unknown error code {e!r}") from None


def groups_of(api_key: int, body) -> tuple:
    """The group ids a request is about (empty when none)."""
    if api_key == ApiKey.FIND_COORDINATOR:
        if getattr(body, "key_type", 0) != 0:
            return ()
        keys = getattr(body, "coordinator_keys", None)
        return tuple(keys) if keys else (getattr(body, "key", None),)
    if api_key == ApiKey.DESCRIBE_GROUPS:
        return tuple(body.groups)
    if api_key == ApiKey.OFFSET_FETCH and getattr(body, "groups", None):
        return tuple(g.group_id for g in body.groups)
    if api_key == ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS:
        return tuple(g.group_id for g in body.groups)
    gid = getattr(body, "group_id", None)
    return (gid,) if gid is not None else ()


# -- error responses (Kafka's AbstractRequest.getErrorResponse, per API) ----------------------------

def error_response(api_key: int, version: int, body, code: int):
    """The response to ``body`` (at ``version``) in which everything it asked about fails with
    ``code``; FaultError for an API without one here."""
    if api_key == ApiKey.PRODUCE:
        T, P = ProduceResponse.TopicProduceResponse, ProduceResponse.TopicProduceResponse.PartitionProduceResponse
        return ProduceResponse(responses=[T(name=t.name, partition_responses=[
            P(index=p.index, error_code=code, base_offset=-1) for p in t.partition_data]) for t in body.topic_data])
    if api_key == ApiKey.FETCH:
        T, P = FetchResponse.FetchableTopicResponse, FetchResponse.FetchableTopicResponse.PartitionData
        return FetchResponse(error_code=0, responses=[T(topic=t.topic, topic_id=t.topic_id, partitions=[
            P(partition_index=p.partition, error_code=code, high_watermark=-1) for p in t.partitions])
            for t in body.topics])
    if api_key == ApiKey.FIND_COORDINATOR:
        if version >= 4:
            C = FindCoordinatorResponse.Coordinator
            return FindCoordinatorResponse(coordinators=[C(key=k, node_id=-1, host="", port=-1, error_code=code)
                                                         for k in body.coordinator_keys])
        return FindCoordinatorResponse(error_code=code, node_id=-1, host="", port=-1)
    if api_key == ApiKey.JOIN_GROUP:
        return join_response(version, code, member_id=body.member_id)
    if api_key == ApiKey.SYNC_GROUP:
        return sync_response(version, code)
    if api_key == ApiKey.HEARTBEAT:
        return HeartbeatResponse(error_code=code)
    if api_key == ApiKey.LEAVE_GROUP:
        if version >= 3:
            return leave_response(version, code, [(m.member_id, m.group_instance_id, code) for m in body.members])
        return leave_response(version, code)
    if api_key == ApiKey.OFFSET_COMMIT:
        return offset_commit_error_response(body, code)
    if api_key == ApiKey.OFFSET_FETCH:
        if version >= 8:
            return offset_fetch_response(version, [
                FetchGroup(g.group_id, error=code, requested=[(t.name, t.partition_indexes) for t in g.topics or ()])
                for g in body.groups])
        return offset_fetch_response(version, [FetchGroup(
            body.group_id, error=code, requested=[(t.name, t.partition_indexes) for t in body.topics or ()])])
    if api_key == ApiKey.DESCRIBE_GROUPS:
        return DescribeGroupsResponse(groups=[describe_error_group(g, code) for g in body.groups])
    if api_key == ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS:
        G = DescribeShareGroupOffsetsResponse.DescribeShareGroupOffsetsResponseGroup
        return DescribeShareGroupOffsetsResponse(groups=[G(group_id=g.group_id, error_code=code,
                                                           error_message=ErrorCode(code).message) for g in body.groups])
    response = API_BY_KEY[api_key].response
    if any(f.name == "error_code" for f in response.FIELDS):   # one top-level error (InitProducerId, ...)
        return response(error_code=code)
    raise FaultError(f"no error response for {response.__name__[:-8]}: inject a delay or drop instead")


_PER_API = (ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.FIND_COORDINATOR, ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP,
            ApiKey.HEARTBEAT, ApiKey.LEAVE_GROUP, ApiKey.OFFSET_COMMIT, ApiKey.OFFSET_FETCH, ApiKey.DESCRIBE_GROUPS,
            ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS)


def has_error_response(api_key: int) -> bool:
    return api_key in _PER_API or any(f.name == "error_code" for f in API_BY_KEY[api_key].response.FIELDS)


class _Rule:
    __slots__ = ("fault", "api_key", "client_id", "group", "errors", "ms", "count", "after", "until_ms")

    def __init__(self, fault, api_key=None, client_id=None, group=None, errors=(), ms=0, count=None,
                 after=0, until_ms=None):
        self.fault, self.api_key, self.client_id, self.group = fault, api_key, client_id, group
        self.errors = list(errors)
        self.ms, self.count, self.after, self.until_ms = ms, count, after, until_ms

    def matches(self, api_key, client_id, groups) -> bool:
        return ((self.api_key is None or self.api_key == api_key)
                and (self.client_id is None or self.client_id == client_id)
                and (self.group is None or self.group in groups))

    def describe(self, now_ms: int) -> dict:
        d = {"fault": self.fault}
        if self.api_key is not None:
            d["api"] = API_BY_KEY[self.api_key].request.__name__[:-7]
        for k in ("client_id", "group"):
            if getattr(self, k) is not None:
                d[k] = getattr(self, k)
        if self.fault == "errors":
            d["errors"] = [ErrorCode(e).name for e in self.errors]
        if self.fault == "delay":
            d["ms"], d["count"] = self.ms, self.count
        if self.fault == "drop":
            d["after"], d["count"] = self.after, self.count
        if self.fault == "loading":
            d["remaining_ms"] = max(0, self.until_ms - now_ms)
        return d


class FaultInjector:
    """The broker's fault rules; every method runs on the broker's event loop."""

    def __init__(self, broker):
        self.broker = broker
        self.rules: list[_Rule] = []
        self._keepalive: asyncio.TimerHandle | None = None

    # -- the request path ------------------------------------------------------------------------
    def dispatch(self, handler, broker, ctx, body, version, inner=None):
        """What the server runs instead of ``handler(broker, ctx, body, version)``."""
        api_key = type(body).API_KEY
        if api_key == ApiKey.PRODUCE and self._is_control(body):
            return self._control(body, version)
        if not self.rules:
            return handler(broker, ctx, body, version) if inner is None else inner(handler, broker, ctx, body, version)
        client_id = ctx.client_id
        groups = groups_of(api_key, body)
        now = self.broker.clock.now_ms()
        delay_ms = 0
        for rule in list(self.rules):
            if not rule.matches(api_key, client_id, groups):
                continue
            if rule.fault == "drop":
                if rule.after > 0:
                    rule.after -= 1
                    continue
                self._used(rule)
                ctx.connection.close(f"fault injection: connection dropped at a {API_BY_KEY[api_key].request.__name__}")
                return None
            if rule.fault == "loading":
                if now >= rule.until_ms:
                    self.rules.remove(rule)
                    continue
                if api_key in LOADING_APIS:
                    return error_response(api_key, version, body, int(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS))
            elif rule.fault == "errors":
                code = rule.errors.pop(0)
                if not rule.errors:
                    self.rules.remove(rule)
                if code:
                    log.info("fault injection: %s from %r answered %s", type(body).__name__, client_id,
                             ErrorCode(code).name)
                    return error_response(api_key, version, body, code)
            elif rule.fault == "delay" and not delay_ms:
                delay_ms = rule.ms
                self._used(rule)
        result = handler(broker, ctx, body, version) if inner is None else inner(handler, broker, ctx, body, version)
        if delay_ms:
            return self._delayed(result, delay_ms)
        return result

    def _used(self, rule) -> None:
        if rule.count is not None:
            rule.count -= 1
            if rule.count <= 0:
                self.rules.remove(rule)

    @staticmethod
    def _delayed(result, delay_ms) -> PendingResponse | None:
        """The handler's answer (given now or later), sent ``delay_ms`` after it is ready."""
        if result is None:              # nothing to send (acks=0): nothing to delay
            return None
        delayed = PendingResponse()
        loop = asyncio.get_running_loop()

        def release(answered):      # its answer or failure, delay_ms later
            loop.call_later(delay_ms / 1000, lambda: answered.then(to=delayed))
        if type(result) is PendingResponse:
            result.listen(release)
        else:
            loop.call_later(delay_ms / 1000, delayed.answer, result)
        return delayed

    # -- commands --------------------------------------------------------------------------------
    def apply(self, cmd: dict) -> dict:
        """Apply one command (see the module docstring); returns {"rules": [...]} or raises FaultError."""
        if not isinstance(cmd, dict):
            raise FaultError("a command is a JSON object")
        fault = cmd.get("fault")
        if fault in CONTROL_COMMANDS:     # time travel, reset, state, waits (test_control.py)
            from .test_control import ControlError
            try:
                return self.broker.test_control.command(cmd)
            except ControlError as e:
                raise FaultError(str(e)) from None
        client_id, group = cmd.get("client_id"), cmd.get("group")
        api = cmd.get("api")
        api_key = api_key_of(api) if api is not None else None
        if fault == "errors":
            if api_key is None:
                raise FaultError("errors needs an api")
            codes = [error_code_of(e) for e in cmd.get("errors") or ()]
            if not codes:
                raise FaultError("errors needs at least one error code")
            if not has_error_response(api_key):
                raise FaultError(f"no error response for {api}: inject a delay or drop instead")
            self.rules.append(_Rule("errors", api_key, client_id, group, errors=codes))
        elif fault == "delay":
            ms = int(cmd.get("ms", 0))
            if ms <= 0:
                raise FaultError("delay needs ms > 0")
            count = cmd.get("count", 1)
            self.rules.append(_Rule("delay", api_key, client_id, group, ms=ms,
                                    count=None if count is None else int(count)))
        elif fault == "drop":
            count = cmd.get("count", 1)
            self.rules.append(_Rule("drop", api_key, client_id, group, after=int(cmd.get("after", 0)),
                                    count=None if count is None else int(count)))
        elif fault == "loading":
            ms = int(cmd.get("ms", 0))
            if ms <= 0:
                raise FaultError("loading needs ms > 0")
            self.rules.append(_Rule("loading", None, client_id, group, until_ms=self.broker.clock.now_ms() + ms))
        elif fault == "pause-heartbeat-expiry":
            self.pause_heartbeat_expiry()
        elif fault == "resume-heartbeat-expiry":
            self.resume_heartbeat_expiry()
        elif fault == "clear":
            self.rules.clear()
            self.resume_heartbeat_expiry()
        elif fault != "list":
            raise FaultError(f"unknown fault {fault!r} (errors, delay, drop, loading, pause-heartbeat-expiry, "
                             "resume-heartbeat-expiry, clear, list)")
        if fault != "list":
            log.warning("fault injection: %s", json.dumps(cmd, sort_keys=True))
        return self.state()

    def state(self) -> dict:
        return {"rules": [r.describe(self.broker.clock.now_ms()) for r in self.rules],
                "heartbeat_expiry_paused": self._keepalive is not None}

    # -- heartbeat expiry ------------------------------------------------------------------------
    def pause_heartbeat_expiry(self) -> None:
        if self._keepalive is None:
            self._keep_sessions_alive()

    def resume_heartbeat_expiry(self) -> None:
        if self._keepalive is not None:
            self._keepalive.cancel()
            self._keepalive = None
            self._refresh_sessions()      # a fresh session from now, as after a heartbeat

    def _keep_sessions_alive(self) -> None:
        self._refresh_sessions()
        self._keepalive = asyncio.get_running_loop().call_later(KEEPALIVE_S, self._keep_sessions_alive)

    def _refresh_sessions(self) -> None:
        """Push every member's session deadline to now + its session timeout, what a Heartbeat
        does (timers are not replayed state: records and durable state are untouched)."""
        now = self.broker.clock.now_ms()
        for shard in list(self.broker.group_coordinator.shards.values()):
            if not shard.is_loaded:
                continue
            shard.timer.now = now
            manager = shard.group_metadata_manager
            for group in manager.classic_groups():
                for member in list(group.members.values()):
                    manager.reschedule_heartbeat(group, member)

    # -- over the wire ---------------------------------------------------------------------------
    @staticmethod
    def _is_control(body) -> bool:
        td = body.topic_data
        return len(td) == 1 and td[0].name == CONTROL_TOPIC

    @staticmethod
    def _answer_later(waiting: PendingResponse, index: int) -> PendingResponse:
        T, P = ProduceResponse.TopicProduceResponse, ProduceResponse.TopicProduceResponse.PartitionProduceResponse
        out = PendingResponse()
        waiting.listen(lambda done: out.answer(ProduceResponse(responses=[T(
            name=CONTROL_TOPIC, partition_responses=[P(index=index, error_code=0, base_offset=-1,
                                                       error_message=json.dumps(done.response, default=str))])])))
        return out

    def _control(self, body, version):
        T, P = ProduceResponse.TopicProduceResponse, ProduceResponse.TopicProduceResponse.PartitionProduceResponse
        answers = []
        for pd in body.topic_data[0].partition_data:
            code, message = ErrorCode.NONE, None
            try:
                results = []
                for _, header, batch in iter_batches(pd.records or b""):
                    for r in decode_records(batch, header):
                        results.append(self.apply(json.loads(bytes(r.value or b"{}"))))
                if results and type(results[-1]) is PendingResponse:     # a wait: answered when it ends
                    if len(body.topic_data[0].partition_data) != 1 or body.acks == 0:
                        raise FaultError("a wait is sent alone, with acks")
                    return self._answer_later(results[-1], pd.index)
                message = json.dumps(results[-1] if results else self.state(), default=str)
            except (FaultError, ValueError) as e:
                code, message = ErrorCode.INVALID_REQUEST, str(e)
            answers.append(P(index=pd.index, error_code=int(code), base_offset=-1, error_message=message))
        if body.acks == 0:
            return None
        return ProduceResponse(responses=[T(name=CONTROL_TOPIC, partition_responses=answers)])
