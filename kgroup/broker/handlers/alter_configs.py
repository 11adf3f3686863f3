"""AlterConfigs (33) v0-2: replace a TOPIC's overrides or a BROKER's dynamic configs (this node's,
or the cluster default with an empty name) with the given set; what is left out returns to its
default, as Kafka's legacy AlterConfigs does."""
from ...protocol.errors import ErrorCode, KafkaError
from ...protocol.messages.alter_configs import AlterConfigsResponse
from .. import admin

Result = AlterConfigsResponse.AlterConfigsResourceResponse


def handle(broker, ctx, req, version):
    resp = AlterConfigsResponse(throttle_time_ms=0, responses=[])
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
            admin.current_configs(broker, r.resource_type, r.resource_name)   # exists
            admin.apply_configs(broker, r.resource_type, r.resource_name,
                                {c.name: c.value for c in r.configs}, req.validate_only)
        except KafkaError as e:
            result.error_code, result.error_message = e.code, str(e)
        resp.responses.append(result)
    return resp
