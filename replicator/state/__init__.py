"""Persistent state below the stages: what the daemon and the backfill record, as values
and their records (the meta schema that stores them is apply/meta.py for now)."""
