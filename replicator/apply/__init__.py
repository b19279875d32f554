"""The apply stage: rows into the downstream table in transactions, with the
checkpoints and meta tables that make them exactly-once."""
