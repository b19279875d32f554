"""The commands, on top of every stage: `shardmerge` (`shardmerge.py`, each subcommand in a
module of its own), `shardctl` (`shardctl.py`, a client of the admin API), preflight checks,
the import of DM tasks (`dm/`), progress, and spark-submit's entry point."""
