"""ListGroups (API key 16): versions 0-5, flexible 3+."""
from ..schema import F, message

ListGroupsRequest = message('ListGroupsRequest', 16, '0-5', flexible='3+',
    fields=[
        F('states_filter', '[]string', '4+'),
        F('types_filter', '[]string', '5+'),
])

ListGroupsResponse = message('ListGroupsResponse', 16, '0-5', flexible='3+',
    fields=[
        F('throttle_time_ms', 'int32', '1+'),
        F('error_code', 'int16', '0+'),
        F('groups', '[]ListedGroup', '0+', fields=[
            F('group_id', 'string', '0+'),
            F('protocol_type', 'string', '0+'),
            F('group_state', 'string', '4+'),
            F('group_type', 'string', '5+'),
        ]),
])
