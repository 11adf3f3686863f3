"""SyncGroup (API key 14): versions 0-5, flexible 4+."""
from ..schema import F, message

SyncGroupRequest = message('SyncGroupRequest', 14, '0-5', flexible='4+',
    fields=[
        F('group_id', 'string', '0+'),
        F('generation_id', 'int32', '0+'),
        F('member_id', 'string', '0+'),
        F('group_instance_id', 'string', '3+', nullable='3+', default="null"),
        F('protocol_type', 'string', '5+', nullable='5+', default="null"),
        F('protocol_name', 'string', '5+', nullable='5+', default="null"),
        F('assignments', '[]SyncGroupRequestAssignment', '0+', fields=[
            F('member_id', 'string', '0+'),
            F('assignment', 'bytes', '0+'),
        ]),
])

SyncGroupResponse = message('SyncGroupResponse', 14, '0-5', flexible='4+',
    fields=[
        F('throttle_time_ms', 'int32', '1+'),
        F('error_code', 'int16', '0+'),
        F('protocol_type', 'string', '5+', nullable='5+', default="null"),
        F('protocol_name', 'string', '5+', nullable='5+', default="null"),
        F('assignment', 'bytes', '0+'),
])
