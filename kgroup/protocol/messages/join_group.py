"""JoinGroup (API key 11): versions 0-9, flexible 6+."""
from ..schema import F, message

JoinGroupRequest = message('JoinGroupRequest', 11, '0-9', flexible='6+',
    fields=[
        F('group_id', 'string', '0+'),
        F('session_timeout_ms', 'int32', '0+'),
        F('rebalance_timeout_ms', 'int32', '1+', default=-1),
        F('member_id', 'string', '0+'),
        F('group_instance_id', 'string', '5+', nullable='5+', default="null"),
        F('protocol_type', 'string', '0+'),
        F('protocols', '[]JoinGroupRequestProtocol', '0+', fields=[
            F('name', 'string', '0+'),
            F('metadata', 'bytes', '0+'),
        ]),
        F('reason', 'string', '8+', nullable='8+', default="null"),
])

JoinGroupResponse = message('JoinGroupResponse', 11, '0-9', flexible='6+',
    fields=[
        F('throttle_time_ms', 'int32', '2+'),
        F('error_code', 'int16', '0+'),
        F('generation_id', 'int32', '0+', default=-1),
        F('protocol_type', 'string', '7+', nullable='7+', default="null"),
        F('protocol_name', 'string', '0+', nullable='7+'),
        F('leader', 'string', '0+'),
        F('skip_assignment', 'bool', '9+', default=False),
        F('member_id', 'string', '0+'),
        F('members', '[]JoinGroupResponseMember', '0+', fields=[
            F('member_id', 'string', '0+'),
            F('group_instance_id', 'string', '5+', nullable='5+', default="null"),
            F('metadata', 'bytes', '0+'),
        ]),
])
