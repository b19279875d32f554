"""The schema stage: each shard's tracked schema, the coordinator joining a group's
shards, its journal, and the downstream DDL it runs."""
