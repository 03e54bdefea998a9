"""OpenAI Codex CLI rollout JSONL (~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl).

Shape followed (codex-rs rollout recorder, CLI 0.4x-0.6x): one `{timestamp, type,
payload}` per line; `type` is session_meta | turn_context | response_item | event_msg.
A response_item payload `{type: "function_call", name: "shell" | "exec_command" | ...,
arguments: "<JSON>", call_id}` is answered by `{type: "function_call_output", call_id,
output}`; output is either JSON `{output, metadata: {exit_code, duration_seconds}}` or
text `Exit code: N\\nWall time: ...\\nOutput:\\n...`. `local_shell_call` carries
`action.command`. event_msg `exec_command_end` holds `exit_code`. The user's words are
response_item messages with role "user" (`input_text` items). Early rollouts wrote the
payload at the top level (no `payload` key); both are read.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator
from typing import IO, Any

import regex

from analyzer.transcripts.model import Event, ShellCall, Transcript, UserMessage

SHELL_TOOLS = frozenset({"shell", "container.exec", "local_shell", "exec_command", "shell_command"})
TEXT_EXIT = regex.compile(r"^Exit code: (?P<code>-?\d+)")
TEXT_OUTPUT = regex.compile(r"^Output:\n", regex.M)
# Context Codex injects as user messages.
INJECTED = ("<environment_context>", "<user_instructions>", "# AGENTS.md", "<INSTRUCTIONS>")
MAX_RECORD_BYTES = 256 << 20


def read_codex(stream: IO[bytes], transcript: Transcript) -> Iterator[Event]:
    """Yield the session's events in order; a call is yielded when its output arrives."""
    pending: dict[str, tuple[str, str | None]] = {}
    exit_codes: dict[str, int] = {}
    bad = number = 0
    for number, raw in enumerate(stream, start=1):
        record = _record(raw)
        if record is None:
            bad += raw.strip() != b""
            continue
        payload = record.get("payload") if isinstance(record.get("payload"), dict) else record
        timestamp = record.get("timestamp") if isinstance(record.get("timestamp"), str) else None
        kind = record.get("type") if "payload" in record else "response_item"
        if kind == "session_meta":
            version = payload.get("cli_version")
            transcript.notes.append(
                f"codex session {payload.get('id', '?')}"
                + (f", codex {version}" if version else "")
            )
        elif kind == "event_msg" and payload.get("type") == "exec_command_end":
            if isinstance(payload.get("exit_code"), int):
                exit_codes[str(payload.get("call_id"))] = payload["exit_code"]
        elif kind == "response_item":
            yield from _response_item(payload, timestamp, number, pending, exit_codes)
    for call_id, (command, timestamp) in pending.items():
        yield ShellCall(
            command, "", exit_codes.get(call_id), timestamp, call_id, status="no result"
        )
    transcript.lines = number
    if bad:
        transcript.notes.append(f"{bad} line(s) were not JSON records: skipped")


def _record(raw: bytes) -> dict[str, Any] | None:
    if len(raw) > MAX_RECORD_BYTES:
        return None
    try:
        record = json.loads(raw)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def _response_item(
    payload: dict[str, Any],
    timestamp: str | None,
    number: int,
    pending: dict[str, tuple[str, str | None]],
    exit_codes: dict[str, int],
) -> Iterator[Event]:
    kind = payload.get("type")
    call_id = str(payload.get("call_id") or payload.get("id") or f"line-{number}")
    if kind == "message" and payload.get("role") == "user":
        for item in payload.get("content") or ():
            text = item.get("text") if isinstance(item, dict) else None
            if isinstance(text, str) and text.strip() and not text.lstrip().startswith(INJECTED):
                yield UserMessage(text, timestamp, call_id, number)
    elif kind == "function_call" and payload.get("name") in SHELL_TOOLS:
        command = _command(_arguments(payload.get("arguments")))
        if command:
            pending[call_id] = (command, timestamp)
    elif kind == "local_shell_call":
        action = payload.get("action") if isinstance(payload.get("action"), dict) else {}
        command = _command(action)
        if command:
            pending[call_id] = (command, timestamp)
    elif kind in ("function_call_output", "local_shell_call_output") and call_id in pending:
        command, started = pending.pop(call_id)
        output, exit_code = _output(payload.get("output"))
        if exit_code is None:
            exit_code = exit_codes.get(call_id)
        yield ShellCall(command, output, exit_code, started, call_id)


def _arguments(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw) if isinstance(raw, str) else None
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _command(arguments: dict[str, Any]) -> str:
    """The shell text: `bash -lc SCRIPT` gives SCRIPT; an argv list is joined as a shell would."""
    command = arguments.get("command", arguments.get("cmd"))
    if isinstance(command, str):
        return command
    if not isinstance(command, list) or not all(isinstance(w, str) for w in command):
        return ""
    if (
        len(command) == 3
        and command[0].rsplit("/", 1)[-1] in ("bash", "sh", "zsh")
        and (command[1] in ("-lc", "-c"))
    ):
        return command[2]
    return shlex.join(command)


def _output(raw: Any) -> tuple[str, int | None]:
    """(output text, exit code) from either output shape."""
    if isinstance(raw, dict):
        raw = raw.get("content", "")
    if not isinstance(raw, str):
        return "", None
    try:
        value = json.loads(raw)
    except ValueError:
        value = None
    if isinstance(value, dict) and "output" in value:
        metadata = value.get("metadata") if isinstance(value.get("metadata"), dict) else {}
        code = metadata.get("exit_code")
        return str(value.get("output") or ""), code if isinstance(code, int) else None
    found = TEXT_EXIT.match(raw)
    if not found:
        return raw, None
    body = TEXT_OUTPUT.search(raw)
    return (raw[body.end() :] if body else raw[found.end() :].lstrip("\n")), int(found["code"])
