"""Pure schema algebra for shard merging: the MySQL schema model, DDL parsing and
application, and the lattice of schema compatibility (seed 002). No I/O here."""
