"""LeaveGroup (13): handled by the group's coordinator shard (kgroup.coordinator)."""


def handle(broker, ctx, req, version):
    return broker.groups.execute(req.group_id, lambda shard, now, token: shard.handle_leave_group(req, version, now, token))
