"""Options, offsets and range planning of the kgroup Spark source, without Spark."""
from __future__ import annotations

import pytest

from kgroup.client.assignors import TopicPartition as TP
from kgroup.spark.offsets import OffsetRange, from_json, plan_ranges, rate_limit, split_ranges, to_json
from kgroup.spark.options import OptionError, parse_options

BASE = {"kafka.bootstrap.servers": "h:9092"}


def opts(**kw):
    return parse_options({**BASE, **{k.replace("__", "."): v for k, v in kw.items()}})


def test_spark_names_case_insensitive_and_defaults():
    o = parse_options({"KAFKA.BOOTSTRAP.SERVERS": "h:1", "Subscribe": "a, b", "STARTINGOFFSETS": "Earliest",
                       "maxOffsetsPerTrigger": "10", "failondataloss": "false", "includeHeaders": "TRUE",
                       "kafka.group.id": "g", "minPartitions": "4", "kafka.fetch.max.bytes": "1000"})
    assert o.subscribe == ["a", "b"] and o.starting_offsets == "earliest" and o.max_offsets_per_trigger == 10
    assert not o.fail_on_data_loss and o.include_headers and o.group_id == "g" and o.min_partitions == 4
    assert o.kafka_params == {"fetch.max.bytes": "1000"} and o.group_mode == "standalone"


def test_assign_pattern_and_offsets_json():
    o = opts(assign='{"t":[1,0,1]}', startingOffsets='{"t":{"0":5,"1":-2}}', endingOffsets='{"t":{"0":9,"1":-1}}')
    assert o.assign == {"t": [0, 1]}
    assert o.starting_offsets == {("t", 0): 5, ("t", 1): -2} and o.ending_offsets == {("t", 0): 9, ("t", 1): -1}
    assert opts(subscribePattern="t-.*").subscribe_pattern == "t-.*"


@pytest.mark.parametrize("extra, message", [
    ({"bogus": "1"}, "Unknown option 'bogus'"),
    ({"kafka.bogus.key": "1"}, "Unknown option 'kafka.bogus.key'"),
    ({"fetchOffset.numRetries": "1"}, "Option 'fetchOffset.numRetries' of Spark's Kafka source is not supported"),
    ({"startingTimestamp": "yesterday"}, "Expected a single long value, got yesterday"),
    ({"startingOffsetsByTimestamp": '{"t": 5}'}, 'Expected e.g. {"topicA": {"0": 123456789'),
    ({"endingOffsetsByTimestamp": "[]"}, 'Expected e.g. {"topicA"'),
    ({"startingOffsetsByTimestampStrategy": "newest"}, "No value found for 'NEWEST'"),
    ({"minOffsetsPerTrigger": "10", "maxOffsetsPerTrigger": "5"},
     "The value of minOffsetPerTrigger(10) is higher than the maxOffsetsPerTrigger(5)."),
    ({"maxTriggerDelay": "5 fortnights"}, "Time must be specified as seconds"),
    ({"maxRecordsPerPartition": "0"}, "maxrecordsperpartition must be positive"),
    ({"minPartitions": "0"}, "minPartitions must be positive"),
    ({"kafka.auto.offset.reset": "earliest"}, "'auto.offset.reset' is not supported"),
    ({"kafka.enable.auto.commit": "true"}, "'enable.auto.commit' is not supported"),
    ({"subscribePattern": "x"}, "Only one of the following options"),
    ({"startingOffsets": "{bad"}, "Invalid JSON in option 'startingOffsets'"),
    ({"startingOffsets": '{"t":{"0":-3}}'}, "must be an integer >= -2"),
    ({"maxOffsetsPerTrigger": "0"}, "'maxOffsetsPerTrigger': must be a positive integer"),
    ({"failOnDataLoss": "maybe"}, "'failOnDataLoss': must be 'true' or 'false'"),
    ({"groupMode": "shared"}, "for option 'groupMode'"),
    ({"assignor": "range"}, "'assignor' only applies with groupMode=coordinated"),
    ({"groupMode": "coordinated", "assignor": "cooperative-sticky"}, "for option 'assignor'"),
    ({"kafka.session.timeout.ms": "x"}, "Not a number"),
])
def test_invalid_options_name_the_option(extra, message):
    with pytest.raises(OptionError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_options({**BASE, "subscribe": "t", **extra})


def test_required_options():
    with pytest.raises(OptionError, match="kafka.bootstrap.servers"):
        parse_options({"subscribe": "t"})
    with pytest.raises(OptionError, match="One of the following options must be specified"):
        parse_options(BASE)
    with pytest.raises(OptionError, match="Option 'assign' must be JSON"):
        parse_options({**BASE, "assign": '["t"]'})


def test_mode_checks():
    with pytest.raises(OptionError, match="can't be latest for batch"):
        opts(subscribe="t", startingOffsets="latest").check_batch()
    with pytest.raises(OptionError, match="can't be earliest"):
        opts(subscribe="t", endingOffsets='{"t":{"0":-2}}').check_batch()
    opts(subscribe="t", maxOffsetsPerTrigger="5").check_batch()  # ignored by batch reads, as in Spark
    with pytest.raises(OptionError, match="ending offset not valid in streaming"):
        opts(subscribe="t", endingOffsets="latest").check_stream()
    with pytest.raises(OptionError, match="ending timestamp not valid in streaming"):
        opts(subscribe="t", endingOffsetsByTimestamp='{"t":{"0":1}}').check_stream()
    with pytest.raises(OptionError, match="needs 'kafka.group.id'"):
        opts(subscribe="t", groupMode="coordinated").check_stream()
    with pytest.raises(OptionError, match="needs 'subscribe' or 'subscribePattern'"):
        opts(assign='{"t":[0]}', groupMode="coordinated", kafka__group__id="g").check_stream()
    with pytest.raises(OptionError, match="only applies to streaming"):
        opts(subscribe="t", groupMode="coordinated", kafka__group__id="g").check_batch()
    opts(subscribe="t", groupMode="coordinated", kafka__group__id="g", assignor="sticky").check_stream()


def test_offset_json_round_trip_with_range_starts():
    offsets = {TP("a", 1): 7, TP("a", 0): 3, TP("b", 0): 0}
    data = to_json(offsets, {TP("a", 1): 2})
    assert data == {"a": {"0": 3, "1": 7}, "b": {"0": 0}, "$from": {"a": {"1": 2}}}
    assert from_json(data) == (offsets, {TP("a", 1): 2})
    assert plan_ranges({"a": {"0": 1, "1": 5}, "b": {"0": 0}}, data) == [OffsetRange("a", 0, 1, 3),
                                                                         OffsetRange("a", 1, 2, 7)]


def test_split_ranges_like_spark():
    ranges = [OffsetRange("t", 0, 0, 100), OffsetRange("t", 1, 0, 10), OffsetRange("t", 2, 5, 5)]
    assert split_ranges(ranges, None) == ranges[:2]
    assert split_ranges(ranges, 2) == ranges[:2]
    out = split_ranges(ranges, 11)  # ideal size 10: 10 pieces of partition 0, 1 of partition 1
    assert [r for r in out if r.partition == 1] == [ranges[1]]
    zero = [r for r in out if r.partition == 0]
    assert len(zero) == 10 and zero[0].from_offset == 0 and zero[-1].until_offset == 100
    assert all(a.until_offset == b.from_offset for a, b in zip(zero, zero[1:]))


def test_rate_limit_prorates_and_never_starves():
    start = {TP("t", 0): 0, TP("t", 1): 0, TP("t", 2): 10}
    latest = {TP("t", 0): 1000, TP("t", 1): 1, TP("t", 2): 10}
    assert rate_limit(start, latest, 100) == {TP("t", 0): 99, TP("t", 1): 1, TP("t", 2): 10}
    assert rate_limit(start, latest, 10**9) == latest


def test_group_protocol_consumer_uses_server_side_assignors():
    base = dict(subscribe="t", groupMode="coordinated", kafka__group__id="g", kafka__group__protocol="consumer")
    o = opts(**base)
    assert o.group_protocol == "consumer" and o.assignor is None  # the broker's default
    assert opts(**base, assignor="uniform").assignor == "uniform"
    assert opts(**base, assignor="Range").assignor == "range"
    with pytest.raises(OptionError, match="server-side assignors"):
        opts(**base, assignor="roundrobin")
    # the broker owns session timeout and heartbeat interval under KIP-848 (Java's check)
    with pytest.raises(OptionError, match="session.timeout.ms"):
        opts(**base, kafka__session__timeout__ms="60000")
    classic = opts(subscribe="t", groupMode="coordinated", kafka__group__id="g")
    assert classic.group_protocol == "classic" and classic.assignor == "range"


def test_timestamp_options_and_their_precedence():
    o = opts(subscribe="t", startingOffsets="earliest", startingOffsetsByTimestamp='{"t":{"0":5}}',
             startingTimestamp="7", endingOffsetsByTimestamp='{"t":{"0":9}}', startingOffsetsByTimestampStrategy="Latest",
             minOffsetsPerTrigger="3", maxTriggerDelay="30s", maxRecordsPerPartition="100")
    # Spark's getKafkaOffsetRangeLimit: startingTimestamp, then *OffsetsByTimestamp, then startingOffsets
    assert o.starting_spec("earliest") == ("timestamp", 7)
    assert o.ending_spec() == ("timestamp", {("t", 0): 9})
    assert o.timestamp_strategy == "latest" and o.min_offsets_per_trigger == 3
    assert o.max_trigger_delay_ms == 30000 and o.max_records_per_partition == 100
    assert opts(subscribe="t").max_trigger_delay_ms == 15 * 60 * 1000  # Spark's default 15m
    assert opts(subscribe="t", maxTriggerDelay="250").max_trigger_delay_ms == 250  # no unit: ms
    assert opts(subscribe="t", startingOffsetsByTimestamp='{"t":{"0":5}}').starting_spec("earliest") == \
        ("timestamp", {("t", 0): 5})
    # startingOffsets=latest is not checked when a timestamp takes precedence (batch)
    opts(subscribe="t", startingOffsets="latest", startingTimestamp="1").check_batch()


def test_offset_limit_validity_like_spark():
    with pytest.raises(OptionError, match="should have the same topic-partitions"):
        opts(subscribe="t", startingOffsets='{"t":{"0":1}}', endingOffsets='{"t":{"0":5,"1":5}}').check_batch()
    with pytest.raises(OptionError, match="The specified start offset 9 is greater than the end offset 5"):
        opts(subscribe="t", startingOffsets='{"t":{"0":9}}', endingOffsets='{"t":{"0":5}}').check_batch()
    with pytest.raises(OptionError, match="The specified start timestamp 9 is greater than the end timestamp 5"):
        opts(subscribe="t", startingOffsetsByTimestamp='{"t":{"0":9}}',
             endingOffsetsByTimestamp='{"t":{"0":5}}').check_batch()
    opts(subscribe="t", startingOffsets='{"t":{"0":-2}}', endingOffsets='{"t":{"0":-1}}').check_batch()


def test_max_records_per_partition_then_min_partitions():
    ranges = [OffsetRange("t", 0, 0, 100), OffsetRange("t", 1, 0, 10)]
    out = split_ranges(ranges, None, 30)  # ceil(100/30) = 4 pieces, 10 fits in one
    assert [(r.partition, r.size) for r in out] == [(0, 25), (0, 25), (0, 25), (0, 25), (1, 10)]
    assert all(r.size <= 30 for r in split_ranges(ranges, 3, 30))
    assert len(split_ranges(ranges, 20, 30)) >= 15  # then minPartitions splits further
