"""The schema stage, pure: the coordinator joining a group's shards (its state, the
shards it accepts, the renames in progress, the downstream table and the fixes rows
need), no I/O of its own; and `plan`, which plays a scenario through it."""
