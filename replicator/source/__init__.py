"""The source stage: reading an upstream's binlog, decoding its rows, routing its
tables, and the positions it is read at."""
