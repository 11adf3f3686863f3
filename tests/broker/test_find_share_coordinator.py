"""FindCoordinator key type 2 (the share coordinator of a share-partition's state; brokers use it,
KIP-932) on one node: this node for a well-formed "groupId:topicId:partition" key (the group id
may hold colons), INVALID_REQUEST for a malformed key or below v6; the key parser on its own."""
import base64

from kgroup.broker.handlers.find_coordinator import share_partition_key
from kgroup.protocol.messages.find_coordinator import FindCoordinatorRequest
from tests.harness import RawClient

TID = bytes(range(16))
TID_STR = base64.urlsafe_b64encode(TID).decode().rstrip("=")


def test_share_partition_key():
    assert share_partition_key(f"g:{TID_STR}:3") == ("g", TID, 3)
    assert share_partition_key(f"a:b:{TID_STR}:0") == ("a:b", TID, 0)
    for bad in ("", "g", f"g:{TID_STR}", f":{TID_STR}:0", f" :{TID_STR}:0", "g:notauuid:0", f"g:{TID_STR}:x",
                "g:AAAA:0"):
        assert share_partition_key(bad) is None, bad


def test_find_share_coordinator(kafka_broker):
    c = RawClient(kafka_broker.port)
    try:
        resp = c.request(FindCoordinatorRequest(key_type=2, coordinator_keys=[f"g:{TID_STR}:0", "g:x:0"]), 6)
        ok, bad = resp.coordinators
        assert (ok.error_code, ok.node_id, ok.port) == (0, 1, kafka_broker.port)
        assert (bad.error_code, bad.node_id) == (42, -1)        # INVALID_REQUEST
        old = c.request(FindCoordinatorRequest(key_type=2, coordinator_keys=[f"g:{TID_STR}:0"]), 5)
        assert old.coordinators[0].error_code == 42
    finally:
        c.close()
