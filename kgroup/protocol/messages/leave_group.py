"""LeaveGroup (API key 13): versions 0-5, flexible 4+."""
from ..schema import F, message

LeaveGroupRequest = message('LeaveGroupRequest', 13, '0-5', flexible='4+',
    fields=[
        F('group_id', 'string', '0+'),
        F('member_id', 'string', '0-2'),
        F('members', '[]MemberIdentity', '3+', fields=[
            F('member_id', 'string', '3+'),
            F('group_instance_id', 'string', '3+', nullable='3+', default="null"),
            F('reason', 'string', '5+', nullable='5+', default="null"),
        ]),
])

LeaveGroupResponse = message('LeaveGroupResponse', 13, '0-5', flexible='4+',
    fields=[
        F('throttle_time_ms', 'int32', '1+'),
        F('error_code', 'int16', '0+'),
        F('members', '[]MemberResponse', '3+', fields=[
            F('member_id', 'string', '3+'),
            F('group_instance_id', 'string', '3+', nullable='3+'),
            F('error_code', 'int16', '3+'),
        ]),
])
