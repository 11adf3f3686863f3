"""The bytes embedded in JoinGroup/SyncGroup for protocol type "consumer" (each prefixed by an int16 version)."""
from .primitives import DecodeError
from .schema import F, message

ConsumerProtocolSubscription = message('ConsumerProtocolSubscription', None, '0-3', flexible='none',
    fields=[
        F('topics', '[]string', '0+'),
        F('user_data', 'bytes', '0+', nullable='0+', default="null"),
        F('owned_partitions', '[]TopicPartition', '1+', fields=[
            F('topic', 'string', '1+'),
            F('partitions', '[]int32', '1+'),
        ]),
        F('generation_id', 'int32', '2+', default=-1),
        F('rack_id', 'string', '3+', nullable='3+', default="null"),
])

ConsumerProtocolAssignment = message('ConsumerProtocolAssignment', None, '0-3', flexible='none',
    fields=[
        F('assigned_partitions', '[]TopicPartition', '0+', fields=[
            F('topic', 'string', '0+'),
            F('partitions', '[]int32', '0+'),
        ]),
        F('user_data', 'bytes', '0+', nullable='0+', default="null"),
])

# Java's ConsumerProtocol: every reader and writer of these bytes goes through the helpers below.
LOWEST_VERSION, HIGHEST_VERSION = ConsumerProtocolSubscription.VERSIONS
assert ConsumerProtocolAssignment.VERSIONS == (LOWEST_VERSION, HIGHEST_VERSION)


def check_version(version: int) -> int:
    """``ConsumerProtocol.checkSubscriptionVersion``/``checkAssignmentVersion``: below the lowest
    is an error, above the highest is read (or written) with the newest layout we know, since the
    versions only ever append fields."""
    if version < LOWEST_VERSION:
        raise DecodeError(f"Unsupported consumer protocol version: {version}")
    return min(version, HIGHEST_VERSION)


def deserialize_version(buf) -> int:
    """``ConsumerProtocol.deserializeVersion`` checked: the int16 prefix of the bytes, capped at the
    newest version we know."""
    if len(buf) < 2:
        raise DecodeError("the embedded consumer protocol is too short for its version")
    return check_version(int.from_bytes(bytes(buf[:2]), "big", signed=True))


def decode_subscription(buf, version: int | None = None):
    """``ConsumerProtocol.deserializeConsumerProtocolSubscription``: the subscription after its
    version prefix, read with the layout of that version, or of ``version`` when given
    (``ClassicGroup.computeSubscribedTopics`` reads only the v0 prefix: the topics)."""
    view = memoryview(buf)
    v = deserialize_version(view)
    obj, _ = ConsumerProtocolSubscription.decode(view, v if version is None else version, 2)
    return obj


def decode_assignment(buf):
    """``ConsumerProtocol.deserializeConsumerProtocolAssignment``."""
    view = memoryview(buf)
    obj, _ = ConsumerProtocolAssignment.decode(view, deserialize_version(view), 2)
    return obj
