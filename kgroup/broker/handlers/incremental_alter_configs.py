"""IncrementalAlterConfigs (44) v0-1 (KIP-339): SET / DELETE / APPEND / SUBTRACT on a TOPIC's
overrides or a BROKER's dynamic configs; all of a resource's changes apply or none."""
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages.incremental_alter_configs import IncrementalAlterConfigsResponse
from .. import admin

Result = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse


def handle(broker, ctx, req, version):
    resp = IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=[])
    keys = [(r.resource_type, r.resource_name) for r in req.resources]
    for r in req.resources:
        result = Result(error_code=0, error_message=None, resource_type=r.resource_type,
                        resource_name=r.resource_name)
        try:
            if keys.count((r.resource_type, r.resource_name)) > 1:
                raise KafkaError(ErrorCode.INVALID_REQUEST, "Duplicate resource.")
            names = [c.name for c in r.configs]
            if len(set(names)) != len(names):
                raise KafkaError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
            configs = admin.incremental(broker, r.resource_type, r.resource_name,
                                        [(c.name, c.config_operation, c.value) for c in r.configs])
            admin.apply_configs(broker, r.resource_type, r.resource_name, configs, req.validate_only)
        except KafkaError as e:
            result.error_code, result.error_message = e.code, str(e)
        resp.responses.append(result)
    return resp
