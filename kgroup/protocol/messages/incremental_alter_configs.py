"""IncrementalAlterConfigs (API key 44): versions 0-1, flexible 1+ (KIP-339)."""
from ..schema import F, message

IncrementalAlterConfigsRequest = message('IncrementalAlterConfigsRequest', 44, '0-1', flexible='1+',
    fields=[
        F('resources', '[]AlterConfigsResource', '0+', fields=[
            F('resource_type', 'int8', '0+'),
            F('resource_name', 'string', '0+'),
            F('configs', '[]AlterableConfig', '0+', fields=[
                F('name', 'string', '0+'),
                F('config_operation', 'int8', '0+'),
                F('value', 'string', '0+', nullable='0+'),
            ]),
        ]),
        F('validate_only', 'bool', '0+'),
])

IncrementalAlterConfigsResponse = message('IncrementalAlterConfigsResponse', 44, '0-1', flexible='1+',
    fields=[
        F('throttle_time_ms', 'int32', '0+'),
        F('responses', '[]AlterConfigsResourceResponse', '0+', fields=[
            F('error_code', 'int16', '0+'),
            F('error_message', 'string', '0+', nullable='0+'),
            F('resource_type', 'int8', '0+'),
            F('resource_name', 'string', '0+'),
        ]),
])
