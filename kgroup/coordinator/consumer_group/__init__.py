"""The consumer group protocol (KIP-848) group type: members, reconciliation and the group model,
pure like the rest of the coordinator core (records in, state out; no I/O, no clock)."""
