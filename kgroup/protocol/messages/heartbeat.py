"""Heartbeat (API key 12): versions 0-4, flexible 4+."""
from ..schema import F, message

HeartbeatRequest = message('HeartbeatRequest', 12, '0-4', flexible='4+',
    fields=[
        F('group_id', 'string', '0+'),
        F('generation_id', 'int32', '0+'),
        F('member_id', 'string', '0+'),
        F('group_instance_id', 'string', '3+', nullable='3+', default="null"),
])

HeartbeatResponse = message('HeartbeatResponse', 12, '0-4', flexible='4+',
    fields=[
        F('throttle_time_ms', 'int32', '1+'),
        F('error_code', 'int16', '0+'),
])
