"""The control stage: the admin API and shardctl, metrics, status, preflight checks
and the command line."""
