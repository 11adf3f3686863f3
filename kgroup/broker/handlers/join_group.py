"""JoinGroup (11) v0-9: handled by the group's coordinator shard (kgroup.coordinator)."""
from ...coordinator import GroupCoordinatorShard as Shard

from ..authorization import GROUP_AUTHORIZATION_FAILED, READ, group_denied, whole_request_error


def handle(broker, ctx, req, version):
    if broker.authorizer is not None and group_denied(broker, ctx, READ, req.group_id):   # KafkaApis: READ group
        return whole_request_error(broker, ctx, version, req, GROUP_AUTHORIZATION_FAILED)
    host = "/" + ctx.client_host  # Kafka prints the member's host as InetAddress.toString does
    return broker.group_coordinator.execute(req.group_id, Shard.handle_join_group, req, version, ctx.client_id, host)
