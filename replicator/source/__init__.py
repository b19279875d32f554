"""The source stage: reading an upstream's binlog, decoding its rows, routing its
tables, the positions it is read at, and each shard's tracked schema, whose changes
it sends as typed schema changes."""
