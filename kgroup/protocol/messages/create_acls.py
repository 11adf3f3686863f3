"""CreateAcls (API key 30): versions 1-3 (v0 removed by KIP-896), flexible 2+."""
from ..schema import F, message

CreateAclsRequest = message('CreateAclsRequest', 30, '1-3', flexible='2+',
    fields=[
        F('creations', '[]AclCreation', '0+', fields=[
            F('resource_type', 'int8', '0+'),
            F('resource_name', 'string', '0+'),
            F('resource_pattern_type', 'int8', '1+', default=3),
            F('principal', 'string', '0+'),
            F('host', 'string', '0+'),
            F('operation', 'int8', '0+'),
            F('permission_type', 'int8', '0+'),
        ]),
])

CreateAclsResponse = message('CreateAclsResponse', 30, '1-3', flexible='2+',
    fields=[
        F('throttle_time_ms', 'int32', '0+'),
        F('results', '[]AclCreationResult', '0+', fields=[
            F('error_code', 'int16', '0+'),
            F('error_message', 'string', '0+', nullable='0+'),
        ]),
])
