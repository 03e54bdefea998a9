"""opencode's storage folder and database: every session of every project, one picked.

Shapes followed (anomalyco/opencode, packages/opencode/src):
- storage folder (storage/json.ts era): `storage/session/<project>/<session>.json` (`{id,
  title, time: {created, updated}}`), `storage/message/<session>/<message>.json`,
  `storage/part/<message>/<part>.json`;
- database (session/session.sql.ts, storage/json-migration.ts; opencode.db): tables
  `session(id, project_id, parent_id, title, time_created, time_updated, ...)`,
  `message(id, session_id, time_created, data)` and `part(id, message_id, session_id,
  time_created, data)`, `data` being the message/part JSON without its ids. opencode runs
  it in WAL mode: recent rows may live only in `opencode.db-wal`. It is opened read-only
  through SQLite, which reads the WAL with it; where SQLite cannot open it in place (a
  read-only folder), the database and its WAL are copied together, never the main file
  alone.
Both hold every session opencode ran, of every project: one session is read (`--session
ID`, else the one active last) and a note lists the others.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from analyzer.core import bounded_json
from analyzer.core.read import InputError
from analyzer.transcripts.events import Event, Transcript, iso_from_epoch_ms
from analyzer.transcripts.opencode import FullOutputs, json_dict, message_events

MAX_LISTED = 8


@dataclass(frozen=True)
class SessionInfo:
    id: str
    title: str
    active: Any  # epoch ms of the last activity (or an id that sorts by time)
    messages: int | None = None


def read_storage(root: Path, transcript: Transcript, session: str | None = None) -> Iterator[Event]:
    """Events of one session of a storage folder (the requested one, else the newest)."""
    bad: list[str] = []
    chosen = _choose(_storage_sessions(root), session, transcript, "storage folder")
    if chosen is None:
        return
    outputs = FullOutputs([root.parent, root])
    messages = [_load(p, bad) for p in sorted((root / "message" / chosen).glob("*.json"))]
    for info in sorted(filter(None, messages), key=_message_order):
        part_dir = root / "part" / str(info.get("id"))
        parts = [_load(p, bad) for p in sorted(part_dir.glob("*.json"))]
        yield from message_events(info, [p for p in parts if p], outputs)
    transcript.notes.extend(outputs.notes())
    if bad:
        transcript.notes.append(f"{len(bad)} storage file(s) were not valid JSON: skipped")


def read_database(
    path: Path, transcript: Transcript, session: str | None = None
) -> Iterator[Event]:
    """Events of one session of opencode.db (read-only; opencode need not be installed)."""
    try:
        with connect_read_only(path) as (connection, copied):
            if Path(f"{path}-wal").is_file():
                transcript.notes.append(
                    "read with its write-ahead log (opencode.db-wal)"
                    + (", both copied aside: the folder is read-only" if copied else "")
                )
            chosen = _choose(_database_sessions(connection), session, transcript, "database")
            if chosen is None:
                return
            yield from _database_events(connection, chosen, FullOutputs([path.parent]), transcript)
    except sqlite3.Error as exc:
        transcript.notes.append(f"opencode database read stopped early ({exc})")


def _database_events(
    connection: sqlite3.Connection, session_id: str, outputs: FullOutputs, transcript: Transcript
) -> Iterator[Event]:
    rows = connection.execute(
        "SELECT id, data FROM message WHERE session_id = ? ORDER BY time_created, id",
        (session_id,),
    ).fetchall()
    for message_id, data in rows:
        info = {**json_dict(data), "id": message_id}
        parts = [
            {**json_dict(part_data), "id": part_id}
            for part_id, part_data in connection.execute(
                "SELECT id, data FROM part WHERE message_id = ? ORDER BY id", (message_id,)
            )
        ]
        yield from message_events(info, parts, outputs)
    transcript.notes.extend(outputs.notes())


@contextmanager
def connect_read_only(path: Path):
    """(connection, copied): read-only in place, else a copy of the db with its WAL."""
    connection = sqlite3.connect(f"file:{quote(str(path))}?mode=ro", uri=True)
    try:
        connection.execute("SELECT name FROM sqlite_master LIMIT 1").fetchall()
    except sqlite3.OperationalError:
        connection.close()
        with tempfile.TemporaryDirectory(prefix="loganalyze-opencode-") as folder:
            copy = Path(folder) / path.name
            for suffix in ("", "-wal"):
                if Path(f"{path}{suffix}").is_file():
                    shutil.copyfile(f"{path}{suffix}", f"{copy}{suffix}")
            connection = sqlite3.connect(f"file:{quote(str(copy))}?mode=ro", uri=True)
            try:
                yield connection, True
            finally:
                connection.close()
        return
    try:
        yield connection, False
    finally:
        connection.close()


def has_opencode_tables(path: Path) -> bool:
    """True for an SQLite file with opencode's `message` and `part` tables."""
    try:
        with connect_read_only(path) as (connection, _):
            names = {row[0] for row in connection.execute("SELECT name FROM sqlite_master")}
    except sqlite3.Error:
        return False
    return {"message", "part"} <= names


# --------------------------------------------------------------------------- sessions


def _choose(
    sessions: list[SessionInfo], wanted: str | None, transcript: Transcript, where: str
) -> str | None:
    """The session to read, with a note naming it and the others."""
    if not sessions and wanted is None:
        return None
    by_id = {s.id: s for s in sessions}
    if wanted is not None and wanted not in by_id:
        raise InputError(
            f"{transcript.path}: no session {wanted} in this {where}; it holds: "
            + (_listing(sessions) or "no session")
        )
    newest = max(sessions, key=lambda s: (_sortable(s.active), s.id))
    chosen = by_id[wanted] if wanted is not None else newest
    how = "as asked" if wanted is not None else "the one active last"
    note = f"opencode session {chosen.id} ({chosen.title or 'untitled'}) read, {how}"
    others = [s for s in sessions if s.id != chosen.id]
    if others:
        note += (
            f"; {len(others)} other session(s) in this {where} were not read"
            f" (--session ID picks one): {_listing(others)}"
        )
    transcript.notes.append(note)
    return chosen.id


def _listing(sessions: list[SessionInfo]) -> str:
    ordered = sorted(sessions, key=lambda s: (_sortable(s.active), s.id), reverse=True)
    shown = []
    for info in ordered[:MAX_LISTED]:
        when = iso_from_epoch_ms(info.active) if isinstance(info.active, (int, float)) else None
        shown.append(f"{info.id} ({info.title or 'untitled'}" + (f", {when})" if when else ")"))
    more = len(ordered) - MAX_LISTED
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


def _sortable(active: Any) -> tuple[int, Any]:
    return (1, active) if isinstance(active, (int, float)) else (0, str(active))


def _database_sessions(connection: sqlite3.Connection) -> list[SessionInfo]:
    titles: dict[str, str] = {}
    tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master")}
    if "session" in tables:
        columns = {row[1] for row in connection.execute("PRAGMA table_info(session)")}
        if {"id", "title"} <= columns:
            titles = dict(connection.execute("SELECT id, title FROM session"))
    rows = connection.execute(
        "SELECT session_id, MAX(time_created), COUNT(*) FROM message GROUP BY session_id"
    )
    return [SessionInfo(str(s), str(titles.get(s) or ""), t, n) for s, t, n in rows]


def _storage_sessions(root: Path) -> list[SessionInfo]:
    """Sessions from session files; message folders without one count too."""
    found: dict[str, SessionInfo] = {}
    for path in root.glob("session/**/*.json"):
        try:
            info = bounded_json.loads(path.read_text("utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(info, dict) and isinstance(info.get("id"), str):
            time = info.get("time") if isinstance(info.get("time"), dict) else {}
            active = time.get("updated") or time.get("created") or 0
            found[info["id"]] = SessionInfo(info["id"], str(info.get("title") or ""), active)
    folders = [p for p in (root / "message").glob("*") if p.is_dir()]
    sessions = [found[p.name] for p in folders if p.name in found]
    for folder in folders:
        if folder.name not in found:
            last = max((p.stem for p in folder.glob("*.json")), default="")
            sessions.append(SessionInfo(folder.name, "", last))
    return sessions


def _message_order(info: dict[str, Any]) -> tuple[Any, str]:
    time = info.get("time") if isinstance(info.get("time"), dict) else {}
    created = time.get("created")
    return (created if isinstance(created, (int, float)) else 0, str(info.get("id", "")))


def _load(path: Path, bad: list[str]) -> dict[str, Any] | None:
    try:
        data = bounded_json.loads(path.read_text("utf-8", errors="replace"))
    except (OSError, ValueError):
        bad.append(str(path))
        return None
    return data if isinstance(data, dict) else None
