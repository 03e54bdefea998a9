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
The storage folder and the database are read by opencode_store.py. Times are epoch
milliseconds. Ids sort in creation order.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

import regex

from analyzer.core import bounded_json
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
    stream: IO[bytes], transcript: Transcript, folder: Path | None = None
) -> Iterator[Event]:
    """Events of an `opencode export` file, one message in memory at a time."""
    members = ObjectStream(stream, frozenset({"messages"}))
    outputs = FullOutputs([folder] if folder is not None else [])
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
