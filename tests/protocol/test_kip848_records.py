"""KIP-848 ``__consumer_offsets`` records (record types 3-8): our declarative codec against the
independent decoder built from Kafka 4.3's facts table, on random values (hypothesis) and on a
byte-exact case for the one new wire shape (a nullable tagged struct)."""
import uuid

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kgroup.protocol import offsets_records as R
from kgroup.protocol.schema import _in
from tests.kafka_spec import spec_decode_offsets_record
from tests.protocol.strategies import message_strategy

TOPIC = uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0").bytes


def _camel(name):
    return "".join(p[:1].upper() + p[1:] for p in name.split("_"))


def _same(obj, spec: dict, version: int, where=""):
    """Our decoded object equals the independent decoder's dict, field by field, recursively."""
    for f in type(obj).FIELDS:
        if not _in(f.versions, version):
            continue
        mine, theirs = getattr(obj, f.name), spec[_camel(f.name)]
        here = f"{where}.{f.name}"
        if f.is_struct and mine is not None and _in(f.tagged, version) and theirs is None:
            # an absent tagged struct: Kafka's default is the empty struct
            assert mine == f.struct(), here
        elif f.is_struct and f.is_array:
            assert len(mine) == len(theirs), here
            for a, b in zip(mine, theirs):
                _same(a, b, version, here)
        elif f.is_struct and mine is not None:
            _same(mine, theirs, version, here)
        else:
            assert mine == theirs, (here, mine, theirs)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), record_type=st.sampled_from(sorted(R.CONSUMER_GROUP_RECORD_TYPES)))
def test_records_read_the_same_with_the_independent_decoder(data, record_type):
    key_cls, value_cls = R.RECORD_SCHEMAS[record_type]
    key = data.draw(message_strategy(key_cls, record_type))
    value = data.draw(message_strategy(value_cls, 0))
    key_bytes, value_bytes = key.to_versioned_bytes(record_type), value.to_versioned_bytes(0)
    assert key_bytes[:2] == record_type.to_bytes(2, "big") and value_bytes[:2] == b"\x00\x00"
    kind, k, v = spec_decode_offsets_record(key_bytes, value_bytes)
    assert kind == key_cls.__name__[:-3]
    _same(key, k, record_type)
    assert v.pop("_version") == 0
    _same(value, v, 0)
    # and our own decoder reads back what it wrote
    assert value_cls.from_versioned_bytes(value_bytes) == (value, 0)
    # a tombstone has no value
    assert spec_decode_offsets_record(key_bytes, None)[2] is None


def test_member_metadata_classic_member_metadata_is_a_nullable_tagged_struct():
    """Kafka writes ConsumerGroupMemberMetadataValue.ClassicMemberMetadata (tag 0) even when null:
    tag 0, size 1, unsigned-varint marker 0; when set: size = struct + 1, marker 1, struct. An
    absent tag reads as the empty struct (the field's default)."""
    V = R.ConsumerGroupMemberMetadataValue
    base = dict(instance_id=None, rack_id=None, client_id="c", client_host="/h",
                subscribed_topic_names=["t"], subscribed_topic_regex=None, rebalance_timeout_ms=300000,
                server_assignor="uniform")
    head = V(**base, classic_member_metadata=V.ClassicMemberMetadata()).to_bytes(0)[:-1]
    assert V(**base, classic_member_metadata=V.ClassicMemberMetadata()).to_bytes(0) == head + b"\x00"
    null = V(**base, classic_member_metadata=None).to_bytes(0)
    assert null == head + b"\x01" + b"\x00\x01\x00"
    assert V.from_bytes(null, 0).classic_member_metadata is None
    classic = V.ClassicMemberMetadata(session_timeout_ms=45000, supported_protocols=[
        V.ClassicMemberMetadata.ClassicProtocol(name="range", metadata=b"\x01\x02")])
    body = (45000).to_bytes(4, "big") + b"\x02" + b"\x06range" + b"\x03\x01\x02" + b"\x00" + b"\x00"
    raw = V(**base, classic_member_metadata=classic).to_bytes(0)
    assert raw == head + b"\x01" + b"\x00" + bytes([len(body) + 1]) + b"\x01" + body
    assert V.from_bytes(raw, 0).classic_member_metadata == classic
    _, _, spec = spec_decode_offsets_record(
        R.ConsumerGroupMemberMetadataKey(group_id="g", member_id="m").to_versioned_bytes(5),
        b"\x00\x00" + raw)
    assert spec["ClassicMemberMetadata"] == {"SessionTimeoutMs": 45000, "SupportedProtocols": [
        {"Name": "range", "Metadata": b"\x01\x02"}]}
    assert spec_decode_offsets_record(
        R.ConsumerGroupMemberMetadataKey(group_id="g", member_id="m").to_versioned_bytes(5),
        b"\x00\x00" + null)[2]["ClassicMemberMetadata"] is None


def test_current_member_assignment_bytes():
    """A byte-exact CurrentMemberAssignment (type 8) as Kafka lays it out."""
    V = R.ConsumerGroupCurrentMemberAssignmentValue
    value = V(member_epoch=7, previous_member_epoch=6, state=1,
              assigned_partitions=[V.TopicPartitions(topic_id=TOPIC, partitions=[0, 3])],
              partitions_pending_revocation=[])
    assert value.to_versioned_bytes(0) == (
        b"\x00\x00" b"\x00\x00\x00\x07" b"\x00\x00\x00\x06" b"\x01"
        b"\x02" + TOPIC + b"\x03\x00\x00\x00\x00\x00\x00\x00\x03" b"\x00"
        b"\x01" b"\x00")
    key = R.ConsumerGroupCurrentMemberAssignmentKey(group_id="g", member_id="m")
    assert key.to_versioned_bytes(8) == b"\x00\x08" b"\x00\x01g" b"\x00\x01m"
