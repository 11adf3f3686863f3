"""DescribeAcls (API key 29): versions 1-3 (v0 removed by KIP-896), flexible 2+."""
from ..schema import F, message

DescribeAclsRequest = message('DescribeAclsRequest', 29, '1-3', flexible='2+',
    fields=[
        F('resource_type_filter', 'int8', '0+'),
        F('resource_name_filter', 'string', '0+', nullable='0+'),
        F('pattern_type_filter', 'int8', '1+', default=3),
        F('principal_filter', 'string', '0+', nullable='0+'),
        F('host_filter', 'string', '0+', nullable='0+'),
        F('operation', 'int8', '0+'),
        F('permission_type', 'int8', '0+'),
])

DescribeAclsResponse = message('DescribeAclsResponse', 29, '1-3', flexible='2+',
    fields=[
        F('throttle_time_ms', 'int32', '0+'),
        F('error_code', 'int16', '0+'),
        F('error_message', 'string', '0+', nullable='0+'),
        F('resources', '[]DescribeAclsResource', '0+', fields=[
            F('resource_type', 'int8', '0+'),
            F('resource_name', 'string', '0+'),
            F('pattern_type', 'int8', '1+', default=3),
            F('acls', '[]AclDescription', '0+', fields=[
                F('principal', 'string', '0+'),
                F('host', 'string', '0+'),
                F('operation', 'int8', '0+'),
                F('permission_type', 'int8', '0+'),
            ]),
        ]),
])
