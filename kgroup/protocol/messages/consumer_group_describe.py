"""ConsumerGroupDescribe (API key 69): versions 0-1, flexible 0+ (KIP-848; v1 adds the member type).

Describes consumer-protocol groups with what DescribeGroups cannot carry: group epoch, assignment
epoch, the selected server assignor, and per member its epoch, subscription and both its current
and target assignment.
"""
from ..schema import F, message

ConsumerGroupDescribeRequest = message('ConsumerGroupDescribeRequest', 69, '0-1', flexible='0+',
    fields=[
        F('group_ids', '[]string', '0+'),
        F('include_authorized_operations', 'bool', '0+'),
])

ConsumerGroupDescribeResponse = message('ConsumerGroupDescribeResponse', 69, '0-1', flexible='0+',
    common=[
        ('TopicPartitions', [
            F('topic_id', 'uuid', '0+'),
            F('topic_name', 'string', '0+'),
            F('partitions', '[]int32', '0+'),
        ]),
        ('Assignment', [
            F('topic_partitions', '[]TopicPartitions', '0+'),
        ]),
    ],
    fields=[
        F('throttle_time_ms', 'int32', '0+'),
        F('groups', '[]DescribedGroup', '0+', fields=[
            F('error_code', 'int16', '0+'),
            F('error_message', 'string', '0+', nullable='0+', default="null"),
            F('group_id', 'string', '0+'),
            F('group_state', 'string', '0+'),
            F('group_epoch', 'int32', '0+'),
            F('assignment_epoch', 'int32', '0+'),
            F('assignor_name', 'string', '0+'),
            F('members', '[]Member', '0+', fields=[
                F('member_id', 'string', '0+'),
                F('instance_id', 'string', '0+', nullable='0+', default="null"),
                F('rack_id', 'string', '0+', nullable='0+', default="null"),
                F('member_epoch', 'int32', '0+'),
                F('client_id', 'string', '0+'),
                F('client_host', 'string', '0+'),
                F('subscribed_topic_names', '[]string', '0+'),
                F('subscribed_topic_regex', 'string', '0+', nullable='0+', default="null"),
                F('assignment', 'Assignment', '0+'),
                F('target_assignment', 'Assignment', '0+'),
                F('member_type', 'int8', '1+', default=-1),
            ]),
            F('authorized_operations', 'int32', '0+', default=-2147483648),
        ]),
])
