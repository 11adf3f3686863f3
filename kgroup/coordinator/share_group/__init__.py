"""Share groups (KIP-932) in the group coordinator's shards: the group model and its records,
ShareGroupHeartbeat and ShareGroupDescribe, and the ``simple`` server assignor."""
