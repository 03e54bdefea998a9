"""opencode sessions: the `opencode export` JSON, the storage folder, and the SQLite database.

Shapes followed (opencode's source, packages/opencode/src):
- export (cli/cmd/export.ts): `{info, messages: [{info, parts}], todos}`, pretty-printed;
- message info (session/message-v2.ts): `{id, sessionID, role, time: {created}}`;
- a bash tool part: `{id, type: "tool", tool: "bash", callID, state: {status, input:
  {command, description}, output, metadata: {output, exit, description}, error,
  time: {start, end}}}` (tool/bash.ts); a `write` tool part has `input: {filePath,
  content}`; a user's text part `{type: "text", text, synthetic?}`;
- storage folder (storage/json.ts era): `storage/session/<project>/<session>.json`,
  `storage/message/<session>/<message>.json`, `storage/part/<message>/<part>.json`;
- database (session/session.sql.ts, opencode.db): tables `message(id, session_id,
  time_created, data)` and `part(id, message_id, session_id, time_created, data)`,
  `data` being the JSON above without its ids.
Times are epoch milliseconds. Ids sort in creation order.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any
from urllib.parse import quote

from analyzer.transcripts.jsonstream import JsonStreamError, ObjectStream
from analyzer.transcripts.model import (
    Event,
    FileWrite,
    ShellCall,
    Transcript,
    UserMessage,
    iso_from_epoch_ms,
)


def read_export(stream: IO[bytes], transcript: Transcript) -> Iterator[Event]:
    """Events of an `opencode export` file, one message in memory at a time."""
    members = ObjectStream(stream, frozenset({"messages"}))
    try:
        for key, value in members:
            if key == "info" and isinstance(value, dict):
                transcript.notes.append(_session_note(value))
            elif key == "messages" and isinstance(value, dict):
                yield from message_events(_dict(value.get("info")), _list(value.get("parts")))
    except JsonStreamError as exc:
        transcript.notes.append(f"export is not complete JSON ({exc}); read what came before")
    transcript.lines = members.newlines + 1


def read_storage(root: Path, transcript: Transcript) -> Iterator[Event]:
    """Events of every session in a storage folder, oldest session first."""
    sessions = _session_ids(root)
    bad: list[str] = []
    for session_id in sessions:
        messages = [_load(p, bad) for p in sorted((root / "message" / session_id).glob("*.json"))]
        for info in sorted(filter(None, messages), key=_message_order):
            part_dir = root / "part" / str(info.get("id"))
            parts = [_load(p, bad) for p in sorted(part_dir.glob("*.json"))]
            yield from message_events(info, [p for p in parts if p])
    if len(sessions) > 1:
        transcript.notes.append(f"{len(sessions)} sessions read, oldest first")
    if bad:
        transcript.notes.append(f"{len(bad)} storage file(s) were not valid JSON: skipped")


def read_database(path: Path, transcript: Transcript) -> Iterator[Event]:
    """Events of every session in opencode.db (read-only; opencode need not be installed)."""
    try:
        connection = sqlite3.connect(f"file:{quote(str(path))}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        transcript.notes.append(f"cannot open the opencode database ({exc})")
        return
    try:
        yield from _database_events(connection, transcript)
    except sqlite3.Error as exc:
        transcript.notes.append(f"opencode database read stopped early ({exc})")
    finally:
        connection.close()


def _database_events(connection: sqlite3.Connection, transcript: Transcript) -> Iterator[Event]:
    sessions = [row[0] for row in connection.execute(_SESSIONS_SQL)]
    for session_id in sessions:
        rows = connection.execute(
            "SELECT id, data FROM message WHERE session_id = ? ORDER BY time_created, id",
            (session_id,),
        ).fetchall()
        for message_id, data in rows:
            info = {**_json_dict(data), "id": message_id}
            parts = [
                {**_json_dict(part_data), "id": part_id}
                for part_id, part_data in connection.execute(
                    "SELECT id, data FROM part WHERE message_id = ? ORDER BY id", (message_id,)
                )
            ]
            yield from message_events(info, parts)
    if len(sessions) > 1:
        transcript.notes.append(f"{len(sessions)} sessions read, oldest first")


_SESSIONS_SQL = (
    "SELECT session_id FROM message GROUP BY session_id ORDER BY MIN(time_created), session_id"
)


def has_opencode_tables(path: Path) -> bool:
    """True for an SQLite file with opencode's `message` and `part` tables."""
    try:
        connection = sqlite3.connect(f"file:{quote(str(path))}?mode=ro", uri=True)
        try:
            names = {row[0] for row in connection.execute("SELECT name FROM sqlite_master")}
        finally:
            connection.close()
    except sqlite3.Error:
        return False
    return {"message", "part"} <= names


def message_events(info: dict[str, Any], parts: Iterable[Any]) -> Iterator[Event]:
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
            event = _tool_event(part, ref)
            if event is not None:
                yield event


def _tool_event(part: dict[str, Any], ref: str) -> Event | None:
    state = _dict(part.get("state"))
    arguments = _dict(state.get("input"))
    started = iso_from_epoch_ms(_dict(state.get("time")).get("start"))
    tool = part.get("tool")
    if tool == "bash" and isinstance(arguments.get("command"), str):
        metadata = _dict(state.get("metadata"))
        exit_code = metadata.get("exit")
        return ShellCall(
            command=arguments["command"],
            output=_output(state, metadata),
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


def _session_ids(root: Path) -> list[str]:
    """Session ids, oldest first; from session files, else from the message folders."""
    found: list[tuple[Any, str]] = []
    for path in root.glob("session/**/*.json"):
        try:
            info = json.loads(path.read_text("utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(info, dict) and isinstance(info.get("id"), str):
            found.append((_dict(info.get("time")).get("created") or 0, info["id"]))
    ids = [session_id for _, session_id in sorted(found)]
    folders = sorted(p.name for p in (root / "message").glob("*") if p.is_dir())
    return [i for i in ids if i in folders] + [f for f in folders if f not in ids]


def _message_order(info: dict[str, Any]) -> tuple[Any, str]:
    created = _dict(info.get("time")).get("created")
    return (created if isinstance(created, (int, float)) else 0, str(info.get("id", "")))


def _load(path: Path, bad: list[str]) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text("utf-8", errors="replace"))
    except (OSError, ValueError):
        bad.append(str(path))
        return None
    return data if isinstance(data, dict) else None


def _session_note(info: dict[str, Any]) -> str:
    title = info.get("title") or "untitled"
    version = info.get("version")
    return f"opencode session {info.get('id', '?')} ({title})" + (
        f", opencode {version}" if version else ""
    )


def _json_dict(text: Any) -> dict[str, Any]:
    try:
        value = json.loads(text) if isinstance(text, (str, bytes)) else None
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
