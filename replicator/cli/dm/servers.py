"""The servers: DM's target-database, and its mysql-instances with their DM source files
(which hold each source's host, port, user, password, flavor, server-id and TLS), as our
`target` and `sources`; each instance's `meta` as the source's `start`.

Passwords are kept out of the written config unless asked (`keep_passwords`): each server
gets a `password_env` naming the variable to set, as the operator must act anyway where
DM's file holds a password encrypted by `dmctl encrypt`, which only DM can decrypt."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from replicator.cli.dm.fields import Field, safe_name
from replicator.cli.dm.notes import Note, NoteKind, Notes
from replicator.config import (
    SOURCE_FLAVORS,
    check_binlog_file,
    check_binlog_pos,
    check_gtid,
    check_port,
    check_readable_file,
    check_server_id,
)

TARGET_PASSWORD_ENV = "SHARDMERGE_TARGET_PASSWORD"
# The replica server ids our streams use where DM's source file gives none (DM picks its own
# at random): far above the small ids servers are usually given (1, 2, 101), so unlikely to be an
# upstream's own @@server_id; `shardmerge check` says if one is.
SERVER_ID_BASE = 4_200_000_000
MASKED_PASSWORD = "******"  # as `dmctl get-config` prints a password
# Where no source file says: .invalid never resolves (RFC 2606), so a run fails to connect
# rather than reach some server.
PLACEHOLDER_HOST = "CHANGE-ME.invalid"
PLACEHOLDER_USER = "CHANGE_ME"

_LOGIN_FIELDS = ("host", "port", "user", "password", "max-allowed-packet", "session", "security")
_SECURITY_FIELDS = ("ssl-ca", "ssl-cert", "ssl-key", "cert-allowed-cn")
_META_FIELDS = ("binlog-name", "binlog-pos", "binlog-gtid")
_RELAY = "no relay log is needed: each source's binlog is read directly, positions checkpointed downstream"
# A source file's fields with nothing to set here, and why (noted when set to something).
_SOURCE_FILE_NOTES = {
    "enable-relay": _RELAY,
    "relay-dir": _RELAY,
    "relay-binlog-name": f"{_RELAY}; where a task starts is its meta (sources[].start)",
    "relay-binlog-gtid": f"{_RELAY}; where a task starts is its meta (sources[].start)",
    "purge": f"purges relay log files: {_RELAY}",
    "meta-dir": "DM-worker's local state; shardmerge keeps its state in the target's meta schema",
    "checker": "DM's automatic task resume; the daemon reconnects with backoff itself (options.max_backoff)",
    "auto-fix-gtid": "shardmerge keeps each saved position's GTID and moves positions by it on a failover",
    "charset": "shardmerge reads the character sets the binlog and the tables carry",
    "tracer": "DM's tracing service: not offered",
    "case-sensitive": "shardmerge matches names case-sensitively, as table names on Linux servers",
}
_SOURCE_FILE_FIELDS = ("source-id", "from", "flavor", "server-id", "enable-gtid", "enable", "filters")


def source_password_env(source_id: str) -> str:
    return f"SHARDMERGE_{re.sub(r'[^A-Z0-9]', '_', source_id.upper())}_PASSWORD"


# -- DM source files -----------------------------------------------------------------------------


def source_files(files: Sequence[Field]) -> dict[str, Field]:
    """DM source-id -> its source file; a task file, or a source-id given twice, refused."""
    by_id: dict[str, Field] = {}
    for root in files:
        root.mapping()
        if root.child("mysql-instances").given:
            raise root.error(
                "a DM task file, not a source file: give the task file first, then its source files"
            )
        source_id = root.child("source-id").text(required=True) or ""
        if not root.child("from").given:
            raise root.child("from").error(
                "missing: a DM source file gives the source's host, port and user there"
            )
        if source_id in by_id:
            raise root.child("source-id").error(
                f"{source_id!r} is also the source-id of {by_id[source_id].where}"
            )
        by_id[source_id] = root
    return by_id


def source_file_notes(root: Field) -> Notes:
    notes: list[Note] = list(root.unknown((*_SOURCE_FILE_FIELDS, *_SOURCE_FILE_NOTES)))
    for key, why in _SOURCE_FILE_NOTES.items():
        field = root.child(key)
        if field.given and field.value is not False:
            notes.append(field.note(NoteKind.NOT_NEEDED, why))
    if root.child("enable").value is False:
        notes.append(
            root.child("enable").note(NoteKind.NOT_MAPPED, "DM does not run this source; shardmerge would")
        )
    return tuple(notes)


# -- target --------------------------------------------------------------------------------------


def target(field: Field, *, keep_passwords: bool) -> tuple[dict[str, Any], Notes]:
    if not field.given:
        raise field.error("missing; DM requires it (the downstream server)")
    login, notes = _login(field, TARGET_PASSWORD_ENV, keep_passwords=keep_passwords)
    flavor = field.note(
        NoteKind.MAPPED, "flavor tidb: DM writes to TiDB (make it mysql or mariadb for another downstream)"
    )
    return {**login, "flavor": "tidb"}, (*notes, flavor)


def _login(field: Field, env_name: str, *, keep_passwords: bool) -> tuple[dict[str, Any], Notes]:
    """host, port, user, password and security: DM's target-database and a source file's `from`."""
    notes: list[Note] = list(field.unknown(_LOGIN_FIELDS))
    out: dict[str, Any] = {"host": field.child("host").text(required=True)}
    if field.child("port").given:
        out["port"] = field.child("port").check(check_port)
    out["user"] = field.child("user").text(required=True)
    password, password_notes = _password(field.child("password"), env_name, keep=keep_passwords)
    out.update(password)
    notes += password_notes
    tls, tls_notes = _tls(field.child("security"))
    if tls is not None:
        out["tls"] = tls
    notes += tls_notes
    if field.child("max-allowed-packet").given:
        notes.append(
            field.child("max-allowed-packet").note(
                NoteKind.NOT_NEEDED, "deprecated in DM, which asks the server"
            )
        )
    session = field.child("session")
    if session.given:
        names = ", ".join(str(k) for k in session.mapping())
        notes.append(
            session.note(
                NoteKind.NOT_MAPPED,
                f"{names}: not set; shardmerge sets its own session (time_zone +00:00, a strict sql_mode: "
                "replicator/servers.py)",
            )
        )
    return out, tuple(notes)


def _password(field: Field, env_name: str, *, keep: bool) -> tuple[dict[str, str], Notes]:
    if not field.given:
        return {}, ()  # no password: ours too
    value = str(field.value)
    if value == MASKED_PASSWORD:
        note = field.note(NoteKind.OPERATOR, f"masked by dmctl get-config: set {env_name} to the password")
        return {"password_env": env_name}, (note,)
    if keep:
        note = field.note(
            NoteKind.OPERATOR,
            "kept as written (--keep-passwords); if dmctl encrypt made it, write the plain password there: "
            "shardmerge cannot decrypt it",
        )
        return {"password": value}, (note,)
    note = field.note(
        NoteKind.OPERATOR,
        f"password_env {env_name}: set it to the password before `shardmerge run` (DM's may be encrypted "
        "by dmctl encrypt, which shardmerge cannot decrypt; --keep-passwords writes DM's into the file)",
    )
    return {"password_env": env_name}, (note,)


def _tls(field: Field) -> tuple[dict[str, str] | None, Notes]:
    """DM's security (ssl-ca, ssl-cert, ssl-key) as our tls: verify_ca with a CA. Files that
    cannot be read here keep TLS required (encrypted) and are noted, as our config checks that
    its files are readable."""
    if not field.given:
        return None, ()
    notes: list[Note] = list(field.unknown(_SECURITY_FIELDS))
    if field.child("cert-allowed-cn").given:
        notes.append(
            field.child("cert-allowed-cn").note(
                NoteKind.NOT_MAPPED, "not offered (tls mode verify_identity checks the server's host name)"
            )
        )
    paths = {
        ours: field.child(dm).text()
        for ours, dm in (("ca", "ssl-ca"), ("cert", "ssl-cert"), ("key", "ssl-key"))
    }
    given = {k: v for k, v in paths.items() if v}
    unreadable = [v for v in given.values() if not _readable(v)]
    if unreadable or ("cert" in given) != ("key" in given):
        why = (
            f"{', '.join(unreadable)} cannot be read here"
            if unreadable
            else "a client certificate needs its key"
        )
        notes.append(
            field.note(
                NoteKind.NOT_MAPPED,
                f"{why}: tls mode required (encrypted, the server's certificate unchecked) until you set "
                "ca (mode verify_ca), cert and key to files shardmerge can read",
            )
        )
        return {"mode": "required"}, tuple(notes)
    mode = "verify_ca" if "ca" in given else "required"
    if mode == "verify_ca":
        notes.append(
            field.note(NoteKind.MAPPED, "tls mode verify_ca; verify_identity also checks the host name")
        )
    return {"mode": mode, **given}, tuple(notes)


def _readable(path: str) -> bool:
    try:
        check_readable_file(path)
    except ValueError:
        return False
    return True


# -- sources -------------------------------------------------------------------------------------


def sources(
    instances: Field, files: dict[str, Field], task_mode: str, *, keep_passwords: bool
) -> tuple[list[dict[str, Any]], list[tuple[str, Field]], Notes]:
    """Our sources, and (our source id, DM instance) pairs for the sections that name rules
    per instance."""
    items = instances.items()
    if not items:
        raise instances.error("expected at least one source")
    notes: list[Note] = []
    ids: list[tuple[str, str, Field]] = []  # (DM source-id, ours, instance)
    for item in items:
        item.mapping()
        dm_id = item.child("source-id").text(required=True) or ""
        ours, id_notes = safe_name(item.child("source-id"), "source id")
        notes += id_notes
        for _, other, _ in ids:
            if other == ours:
                raise item.child("source-id").error(f"source id {ours!r} is given twice")
        ids.append((dm_id, ours, item))
    server_ids, id_notes = _server_ids([files.get(dm_id) for dm_id, _, _ in ids], instances)
    notes += id_notes
    out = []
    for (dm_id, ours, item), server_id in zip(ids, server_ids, strict=True):
        source, source_notes = _source(item, ours, files.get(dm_id), task_mode, keep_passwords=keep_passwords)
        out.append({**source, "server_id": server_id})
        notes += source_notes
    used = {dm_id for dm_id, _, _ in ids}
    for dm_id, root in files.items():
        if dm_id not in used:
            notes.append(
                root.child("source-id").note(NoteKind.NOT_NEEDED, "no mysql-instance of the task: not used")
            )
    return out, [(ours, item) for _, ours, item in ids], tuple(notes)


def _source(
    item: Field, source_id: str, file: Field | None, task_mode: str, *, keep_passwords: bool
) -> tuple[dict[str, Any], Notes]:
    env_name = source_password_env(source_id)
    out: dict[str, Any] = {"id": source_id}
    notes: list[Note] = []
    flavor = None
    enable_gtid = None
    if file is None:
        out.update({"host": PLACEHOLDER_HOST, "user": PLACEHOLDER_USER, "password_env": env_name})
        notes.append(
            item.child("source-id").note(
                NoteKind.NOT_MAPPED,
                f"no DM source file with source-id {item.child('source-id').value} was given: host "
                f"{PLACEHOLDER_HOST}, user {PLACEHOLDER_USER} and password_env {env_name} are placeholders; "
                "give its source file after the task file, or fill them in",
            )
        )
    else:
        login, login_notes = _login(file.child("from"), env_name, keep_passwords=keep_passwords)
        out.update(login)
        notes += login_notes
        flavor, flavor_notes = _flavor(file.child("flavor"))
        notes += flavor_notes
        if flavor is not None:
            out["flavor"] = flavor
        enable_gtid = file.child("enable-gtid").flag()
        notes += source_file_notes(file)
    start, start_notes = start_position(item.child("meta"), task_mode, enable_gtid, flavor)
    if start is not None:
        out["start"] = start
    return out, (*notes, *start_notes)


def _flavor(field: Field) -> tuple[str | None, Notes]:
    text = (field.text() or "").lower()
    if not text or text in SOURCE_FLAVORS:
        return text or None, ()  # none: ours detects it from VERSION(), as DM does
    return None, (field.note(NoteKind.NOT_MAPPED, "expected mysql or mariadb; left to be detected"),)


def _server_ids(files: list[Field | None], instances: Field) -> tuple[list[int], Notes]:
    """Each source's replica server id: its source file's server-id, else one of ours,
    distinct in the task."""
    given: list[int | None] = []
    for file in files:
        field = file.child("server-id") if file is not None else None
        given.append(field.check(check_server_id) if field is not None and field.given else None)
    used = {g for g in given if g is not None}
    chosen: list[int] = []
    candidate = SERVER_ID_BASE
    for value in given:
        if value is None:
            candidate += 1
            while candidate in used:
                candidate += 1
            value = candidate
        elif value in chosen:
            raise instances.error(f"server-id {value} is in two source files; each stream needs its own")
        chosen.append(value)
    picked = [c for c, g in zip(chosen, given, strict=True) if g is None]
    if not picked:
        return chosen, ()
    note = instances.note(
        NoteKind.MAPPED,
        f"server_id {', '.join(map(str, picked))} chosen where no source file gives a server-id: the "
        "replica server ids of the binlog streams, distinct in the task; `shardmerge check` says if an "
        "upstream has one",
    )
    return chosen, (note,)


def start_position(
    meta: Field, task_mode: str, enable_gtid: bool | None, flavor: str | None
) -> tuple[dict[str, Any] | None, Notes]:
    """DM's meta (where a task-mode incremental task starts without a checkpoint) as our
    start: binlog-gtid where the source's enable-gtid is true, else binlog-name and -pos."""
    if not meta.given:
        return None, ()
    notes: list[Note] = list(meta.unknown(_META_FIELDS))
    if task_mode != "incremental":
        why = (
            f"DM reads meta only in task-mode incremental; with {task_mode} the stream starts where the "
            "backfill began"
        )
        return None, (*notes, meta.note(NoteKind.NOT_NEEDED, why))
    name, pos, gtid = (meta.child(k) for k in _META_FIELDS)
    if gtid.given and (enable_gtid or not name.given):
        value = gtid.check(lambda v: check_gtid(str(v).strip(), flavor))
        if name.given:
            notes.append(
                name.note(
                    NoteKind.MAPPED, "left out: the source's enable-gtid is true, so binlog-gtid starts it"
                )
            )
        return {"gtid": value}, tuple(notes)
    if not name.given:
        raise (pos if pos.given else meta).error("binlog-pos needs binlog-name (or give binlog-gtid)")
    file = name.text()
    start: dict[str, Any] = {"file": name.check(lambda _: check_binlog_file(file))}
    if pos.given:
        start["pos"] = pos.check(check_binlog_pos)
    if gtid.given:
        why = (
            "the source's enable-gtid is false" if enable_gtid is False else "no source file says enable-gtid"
        )
        notes.append(gtid.note(NoteKind.MAPPED, f"left out: {why}, so binlog-name and binlog-pos start it"))
    return start, tuple(notes)
