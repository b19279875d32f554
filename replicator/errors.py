"""Errors shared across the replicator, and the exit codes every command uses. Kept
apart from `cli` so `python -m replicator.cli.shardmerge` (which loads cli.py a second
time as __main__) still catches them."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """What a command's exit status says (docs/reference/commands.md "Exit codes"; every --help lists
    them)."""

    OK = 0
    INTERNAL = 1  # a bug: the one case with a traceback
    CONFIG = 2  # a bad config, argument or request: fix what the message names
    CONNECTION = 3  # a server or the daemon cannot be reached, refused the login or a privilege
    WAITING = 4  # the task waits for an operator: a conflict, a paused shard, not ready


# MySQL client and server errors that are about reaching a server or being let in: can't
# connect, unknown host, gone away, lost, access denied, no privilege
CONNECTION_ERRORS = frozenset({2002, 2003, 2005, 2006, 2013, 2026, 1045, 1044, 1142, 1143, 1227, 1370})


class CliError(Exception):
    """An error the user can fix (bad input, unreachable server); printed without a traceback."""

    def __init__(self, message: str, code: ExitCode = ExitCode.CONFIG):
        super().__init__(message)
        self.code = code


class DaemonError(RuntimeError):
    """The daemon cannot start or go on; `code` says what kind of thing is wrong."""

    def __init__(self, message: str, code: ExitCode = ExitCode.CONFIG):
        super().__init__(message)
        self.code = code


class StartAgain(RuntimeError):
    """The daemon (its start, or its main loop's own writes) met an error a retry cures
    (the downstream restarting, its connection killed): what it had started is stopped,
    and `shardmerge run` starts it again after a while (the cause: `__cause__`; `kind`:
    the error as the retries metric names it)."""

    def __init__(self, message: str, kind: str = "", ran: bool = False):
        """`ran`: it had started, and ran (its waits start again from the first)."""
        super().__init__(message)
        self.kind = kind
        self.ran = ran


def server_error(exc: BaseException) -> CliError | None:
    """A MySQL error from pymysql as one line and its exit code (None: not one). Told
    apart by its class's module, so that commands that never load pymysql need not."""
    if not type(exc).__module__.startswith("pymysql"):
        return None
    number = error_number(exc) or 0
    text = reason_of(exc)
    if number in (1045,):
        fix = "check the user and its password (password or password_env) in the task config"
    elif number in (1044, 1142, 1143, 1227, 1370):
        fix = "grant the privilege named (`shardmerge check` lists what each server needs)"
    elif number in CONNECTION_ERRORS:
        fix = "check the host and port in the task config, and that the server runs and is reachable"
    else:
        return CliError(f"the server refused: {text} (error {number})", ExitCode.CONFIG)
    return CliError(f"{text} (error {number}); {fix}", ExitCode.CONNECTION)


def connect_failure(field_path: str, host: str, port: int, exc: BaseException) -> tuple[str, str]:
    """Why the server at `field_path` of the task config (`sources[1]`, `target`) was not
    connected to, naming its address, and the fix: `shardmerge check` and the daemon's
    start say it alike."""
    number = error_number(exc)
    if number == 1045:  # access denied
        fix = f"check {field_path}.user and its password (password or password_env)"
    elif number in (2003, 2005, 2013):  # cannot connect, unknown host, lost connection at handshake
        fix = f"check {field_path}.host and port, and that the server is running and reachable from here"
    else:
        fix = f"check the connection settings of {field_path} and the server"
    return f"cannot connect to {host}:{port}: {reason_of(exc)}", fix


def reason_of(exc: BaseException) -> str:
    """A server error's text without its number (pymysql's args are (number, text))."""
    args = getattr(exc, "args", ())
    return str(args[1]) if len(args) > 1 else str(exc)


def error_number(exc: BaseException) -> int | None:
    """A server error's number (pymysql's args are (number, text)); None for others."""
    args = getattr(exc, "args", ())
    return args[0] if args and isinstance(args[0], int) else None
