"""AlterConfigs (33) v0-2: replace a TOPIC's overrides or a BROKER's dynamic configs (this node's,
or the cluster default with an empty name) with the given set; what is left out returns to its
default, as Kafka's legacy AlterConfigs does."""
from ...protocol.messages.alter_configs import AlterConfigsResponse
from .. import admin


def handle(broker, ctx, req, version):
    def new_configs(r):
        admin.current_configs(broker, r.resource_type, r.resource_name)   # the resource exists
        return {c.name: c.value for c in r.configs}
    resp = AlterConfigsResponse(throttle_time_ms=0, responses=admin.alter_resources(
        broker, req, AlterConfigsResponse.AlterConfigsResourceResponse, new_configs, ctx))
    # in a cluster, answered once the new configs are in ZooKeeper; a resource whose write failed
    # gets ZkAdminManager's ApiError.fromThrowable of it
    return admin.after_writes(broker, resp, lambda failed: admin.unknown_server_error([r for r, _ in failed if r is not None]))
