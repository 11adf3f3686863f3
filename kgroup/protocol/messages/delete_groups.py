"""DeleteGroups (API key 42): versions 0-2, flexible 2+."""
from ..schema import F, message

DeleteGroupsRequest = message('DeleteGroupsRequest', 42, '0-2', flexible='2+',
    fields=[
        F('groups_names', '[]string', '0+'),
])

DeleteGroupsResponse = message('DeleteGroupsResponse', 42, '0-2', flexible='2+',
    fields=[
        F('throttle_time_ms', 'int32', '0+'),
        F('results', '[]DeletableGroupResult', '0+', fields=[
            F('group_id', 'string', '0+'),
            F('error_code', 'int16', '0+'),
        ]),
])
