"""Errors shared across the replicator. Kept apart from `cli` so `python -m
replicator.control.cli` (which loads cli.py a second time as __main__) still catches them."""


class CliError(Exception):
    """An error the user can fix (bad input, unreachable server); printed without a traceback."""
