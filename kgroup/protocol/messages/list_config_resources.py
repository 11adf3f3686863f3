"""ListConfigResources (API key 74): versions 0-1, flexible 0+ (KIP-1142: the resources that have
configs)."""
from ..schema import F, message

ListConfigResourcesRequest = message('ListConfigResourcesRequest', 74, '0-1', flexible='0+',
    fields=[
        F('resource_types', '[]int8', '1+'),
])

ListConfigResourcesResponse = message('ListConfigResourcesResponse', 74, '0-1', flexible='0+',
    fields=[
        F('throttle_time_ms', 'int32', '0+'),
        F('error_code', 'int16', '0+'),
        F('config_resources', '[]ConfigResource', '0+', fields=[
            F('resource_name', 'string', '0+'),
            F('resource_type', 'int8', '1+', default=16),
        ]),
])
