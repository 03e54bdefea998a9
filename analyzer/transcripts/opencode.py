"""opencode sessions: the `opencode export` JSON, and the message/part shapes all forms share.

Shapes followed (opencode's source, packages/opencode/src; anomalyco/opencode, was
sst/opencode):
- export (cli/cmd/export.ts): `{info, messages: [{info, parts}], todos}`, pretty-printed;
- message info (session/message-v2.ts): `{id, sessionID, role, time: {created}}`;
- a bash tool part: `{id, type: "tool", tool: "bash", callID, state: {status, input:
  {command, description}, output, metadata: {output, exit, description, truncated,
  outputPath}, error, time: {start, end}}}` (tool/bash.ts); a `write` tool part has
  `input: {filePath, content}`; a user's text part `{type: "text", text, synthetic?}`;
- truncation (tool/truncation.ts, tool/tool.ts): output over 2,000 lines or 50 KB keeps
  only its head in `output`, followed by `...N lines truncated...` and a hint naming the
  full output file (`<data>/tool-output/tool_...`), also in `metadata.outputPath`. The
  full file is read when it is there (at that path, or in a `tool-output/` folder beside
  the input); else the head is kept and a note says so.
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
The storage folder and the database hold every session opencode ran, of every project: one
session is read (`--session ID`, else the one active last) and a note lists the others.
Times are epoch milliseconds. Ids sort in creation order.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any
from urllib.parse import quote

import regex

from analyzer.core import bounded_json
from analyzer.core.read import InputError
from analyzer.transcripts.events import (
    Event,
    FileWrite,
    ShellCall,
    Transcript,
    UserMessage,
    iso_from_epoch_ms,
)
from analyzer.transcripts.jsonstream import JsonStreamError, ObjectStream

TRUNCATION_NOTICE = regex.compile(
    r"\n\n\.\.\.(?P<count>\d+) (?P<unit>lines|bytes) truncated\.\.\.\n\n"
    r"(?:The tool call succeeded but the output was truncated\. )?"
    r"Full output saved to: (?P<path>\S+)[\s\S]*\Z"
)
MAX_FULL_OUTPUT_BYTES = 256 << 20
MAX_LISTED = 8


class FullOutputs:
    """Finds the full output files truncated bash parts point to; counts what it found."""

    def __init__(self, folders: Iterable[Path] = ()) -> None:
        self.folders = [f for f in folders if f is not None]
        self.followed = 0
        self.missing: list[str] = []

    def read(self, recorded: str) -> str | None:
        for candidate in self._candidates(recorded):
            try:
                if candidate.is_file() and candidate.stat().st_size <= MAX_FULL_OUTPUT_BYTES:
                    self.followed += 1
                    return candidate.read_text("utf-8", errors="replace")
            except OSError:
                continue
        self.missing.append(recorded)
        return None

    def _candidates(self, recorded: str) -> Iterator[Path]:
        yield Path(recorded).expanduser()
        name = Path(recorded).name
        for folder in self.folders:
            yield folder / "tool-output" / name
            yield folder / name

    def notes(self) -> list[str]:
        notes = []
        if self.followed:
            notes.append(f"{self.followed} truncated bash output(s) read in full from tool-output/")
        if self.missing:
            notes.append(
                f"{len(self.missing)} bash output(s) were truncated by opencode and the full "
                f"output file is not here ({self.missing[0]}): only their head was read"
            )
        return notes


def read_export(
    stream: IO[bytes], transcript: Transcript, path: Path | None = None
) -> Iterator[Event]:
    """Events of an `opencode export` file (at `path`, whose folder may hold the full
    outputs), one message in memory at a time."""
    members = ObjectStream(stream, frozenset({"messages"}))
    outputs = FullOutputs([path.parent] if path is not None else [])
    try:
        for key, value in members:
            if key == "info" and isinstance(value, dict):
                transcript.notes.append(_session_note(value))
                if isinstance(value.get("id"), str):
                    transcript.sessions.append(value["id"])
            elif key == "messages" and isinstance(value, dict):
                yield from message_events(
                    _dict(value.get("info")), _list(value.get("parts")), outputs
                )
    except JsonStreamError as exc:
        transcript.notes.append(f"export is not complete JSON ({exc}); read what came before")
    transcript.lines = members.newlines + 1
    if members.skipped:
        transcript.notes.append(
            f"{members.skipped} value(s) nested too deep or too big to read: skipped"
        )
    transcript.notes.extend(outputs.notes())


def message_events(
    info: dict[str, Any], parts: Iterable[Any], outputs: FullOutputs | None = None
) -> Iterator[Event]:
    """The events of one message: the user's text, bash calls and written files."""
    role = info.get("role")
    message_id = str(info.get("id", "?"))
    created = iso_from_epoch_ms(_dict(info.get("time")).get("created"))
    for part in parts:
        if not isinstance(part, dict):
            continue
        ref = f"{message_id}/{part.get('id', '?')}"
        kind = part.get("type")
        if kind == "text" and role == "user" and not part.get("synthetic"):
            text = part.get("text")
            if isinstance(text, str) and text.strip():
                yield UserMessage(text, created, ref)
        elif kind == "tool":
            event = _tool_event(part, ref, outputs)
            if event is not None:
                yield event


def _tool_event(part: dict[str, Any], ref: str, outputs: FullOutputs | None) -> Event | None:
    state = _dict(part.get("state"))
    arguments = _dict(state.get("input"))
    started = iso_from_epoch_ms(_dict(state.get("time")).get("start"))
    tool = part.get("tool")
    if tool == "bash" and isinstance(arguments.get("command"), str):
        metadata = _dict(state.get("metadata"))
        exit_code = metadata.get("exit")
        return ShellCall(
            command=arguments["command"],
            output=_full_output(_output(state, metadata), metadata, outputs),
            exit_code=exit_code if isinstance(exit_code, int) else None,
            timestamp=started,
            ref=ref,
            status=state.get("status") if isinstance(state.get("status"), str) else None,
        )
    if tool == "write" and isinstance(arguments.get("filePath"), str):
        content = arguments.get("content")
        return FileWrite(
            arguments["filePath"], content if isinstance(content, str) else "", started, ref
        )
    return None


def _output(state: dict[str, Any], metadata: dict[str, Any]) -> str:
    """A completed call has `output`; a running or failed one only metadata.output/error."""
    output = state.get("output")
    if not isinstance(output, str):
        output = metadata.get("output") if isinstance(metadata.get("output"), str) else ""
    error = state.get("error")
    if isinstance(error, str) and error and error not in output:
        output = f"{output}\n{error}" if output else error
    return output


def _full_output(output: str, metadata: dict[str, Any], outputs: FullOutputs | None) -> str:
    """A truncated output: the full file when it is there, else the head without the hint."""
    notice = TRUNCATION_NOTICE.search(output)
    recorded = metadata.get("outputPath")
    if not isinstance(recorded, str):
        recorded = notice["path"] if notice else None
    if recorded is None or (notice is None and metadata.get("truncated") is not True):
        return output
    full = (outputs or FullOutputs()).read(recorded)
    if full is not None:
        return full
    return output[: notice.start()] if notice else output


def _session_note(info: dict[str, Any]) -> str:
    title = info.get("title") or "untitled"
    version = info.get("version")
    return f"opencode session {info.get('id', '?')} ({title})" + (
        f", opencode {version}" if version else ""
    )


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def json_dict(text: Any) -> dict[str, Any]:
    try:
        value = bounded_json.loads(text) if isinstance(text, (str, bytes)) else None
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


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
