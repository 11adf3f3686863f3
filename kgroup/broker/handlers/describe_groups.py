"""DescribeGroups (15) v0-6: split across the shards that own the groups, with Kafka's state names
(Empty, PreparingRebalance, CompletingRebalance, Stable, Dead). A group the coordinator does not
have is answered Dead; from v6 also with GROUP_ID_NOT_FOUND and a message (KIP-1043,
GroupMetadataManager.describeGroups)."""
from ...coordinator import GroupCoordinatorShard as Shard
from ...protocol.errors import ErrorCode
from ...protocol.messages.describe_groups import DescribeGroupsResponse
from ..authorized_operations import with_group_operations


def handle(broker, ctx, req, version):
    asked = version >= 3 and req.include_authorized_operations

    def merge(rs):
        groups = [g for r in rs for g in r.groups]
        if version >= 6:
            for g in groups:
                if g.error_code == 0 and g.group_state == "Dead":
                    g.error_code = int(ErrorCode.GROUP_ID_NOT_FOUND)
                    g.error_message = f"Group {g.group_id} not found."
        return with_group_operations(DescribeGroupsResponse(throttle_time_ms=0, groups=groups), asked)
    return broker.group_coordinator.execute_split(req, "groups", Shard.handle_describe_groups, version, merge)
