"""The control stage: the admin API and shardctl, status, preflight checks, the
command line and spark-submit's entry point."""
