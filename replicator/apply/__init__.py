"""The apply stage: rows into the downstream table in transactions, with the
checkpoints and meta tables that make them exactly-once; the downstream DDL a
group's decisions call for, run in the order of their rows (the DDL gate and
executor, its journal, online ALTERs), and the downstream table read back."""
