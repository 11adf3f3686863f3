"""IncrementalAlterConfigs (44) v0-1 (KIP-339): SET / DELETE / APPEND / SUBTRACT on a TOPIC's
overrides or a BROKER's dynamic configs; all of a resource's changes apply or none."""
from ...protocol.messages.incremental_alter_configs import IncrementalAlterConfigsResponse
from .. import admin


def handle(broker, ctx, req, version):
    def new_configs(r):
        return admin.incremental(broker, r.resource_type, r.resource_name,
                                 [(c.name, c.config_operation, c.value) for c in r.configs])
    resp = IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=admin.alter_resources(
        broker, req, IncrementalAlterConfigsResponse.AlterConfigsResourceResponse, new_configs, ctx))
    # in a cluster, answered once the new configs are in ZooKeeper; a resource whose write failed
    # gets ZkAdminManager's ApiError.fromThrowable of it
    return admin.after_writes(broker, resp, lambda failed: admin.unknown_server_error([r for r, _ in failed if r is not None]))
