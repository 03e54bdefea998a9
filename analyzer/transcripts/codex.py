"""OpenAI Codex CLI rollout JSONL (~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl[.zst]).

Shape followed (openai/codex codex-rs: protocol/src/models.rs, core/src/rollout/
recorder.rs and policy.rs, core/src/tools/handlers/unified_exec.rs): one `{timestamp,
type, payload}` per line; `type` is session_meta | turn_context | response_item |
event_msg. A response_item `{type: "function_call", name, arguments: "<JSON>",
call_id}` is answered by `{type: "function_call_output", call_id, output}`:
- `shell` / `container.exec` (`{command: [argv]}`), `shell_command` (`{command: "str"}`),
  `local_shell_call` (`action.command`);
- the unified-exec pair: `exec_command {cmd, yield_time_ms=10000, ...}` returns after
  10 s with `Process running with session ID N` while the process runs, and each later
  `write_stdin {session_id, chars}` returns the next chunk (a foreground server's crash
  arrives there): the chunks are the launch's own output, read back;
- `custom_tool_call {name, input}` / `custom_tool_call_output` (freeform tools):
  `apply_patch` (the files it adds or updates are written files, a launch script among
  them) and code mode's `exec` (JavaScript whose `tools.exec_command({cmd})` calls are
  the commands run).
Output shapes are in codex_shapes.py. `exec_command_end` events are not persisted by
default (policy.rs) and, in extended mode, hold no output: their exit code is used only
when the output itself gives none. The user's words are response_item messages with role
"user" (`input_text` items) other than the fragments Codex injects (`<environment_context>`,
`<turn_aborted>`, `<subagent_notification>`, `<skill>`, AGENTS.md, ...);
`<user_shell_command>` is a command the user ran, read as one. The earliest rollouts
wrote a bare `{id, timestamp[, instructions]}` line, then bare items (no envelope).
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from analyzer.core import bounded_json
from analyzer.transcripts.codex_shapes import (
    cell_output,
    exec_commands,
    parse_output,
    patch_writes,
    user_shell_command,
)
from analyzer.transcripts.events import Event, FileWrite, ShellCall, Transcript, UserMessage
from analyzer.transcripts.jsonstream import RecordLines

SHELL_TOOLS = frozenset({"shell", "container.exec", "local_shell", "exec_command", "shell_command"})
STDIN_TOOLS = frozenset({"write_stdin"})
CODE_MODE_TOOLS = frozenset({"exec"})
PATCH_TOOLS = frozenset({"apply_patch"})
# Context Codex injects on the user's side (core/src/context/*.rs).
INJECTED = (
    "<environment_context>",
    "<user_instructions>",
    "# AGENTS.md",
    "<INSTRUCTIONS>",
    "<turn_aborted>",
    "<subagent_notification>",
    "<skill>",
    "<permissions instructions>",
    "<collaboration_mode>",
    "<hook_prompt",
    "<codex_internal_context",
    "<goal_context>",
    "<user_shell_command>",
)
INTERRUPT = "\x03"


@dataclass
class _Pending:
    kind: str  # shell | stdin | cell
    command: str
    timestamp: str | None
    session: str | None = None


class _Rollout:
    """What reading keeps between lines: calls awaiting output, live unified-exec sessions."""

    def __init__(self) -> None:
        self.pending: dict[str, _Pending] = {}
        self.exit_codes: dict[str, int] = {}
        self.sessions: dict[str, str] = {}  # unified-exec session id -> the exec call's id
        self.files: dict[str, str] = {}


def read_codex(
    stream: IO[bytes], transcript: Transcript, path: Path | None = None
) -> Iterator[Event]:
    """Yield the session's events in order; a call is yielded when its output arrives
    (`path`: unused, a rollout holds everything)."""
    state = _Rollout()
    records = RecordLines()
    for number, record in records.read(stream):
        enveloped = isinstance(record.get("payload"), dict)
        payload = record["payload"] if enveloped else record
        timestamp = record.get("timestamp") if isinstance(record.get("timestamp"), str) else None
        kind = record.get("type") if "payload" in record else "response_item"
        if kind == "session_meta" or (not enveloped and _bare_meta(record)):
            version = payload.get("cli_version")
            if isinstance(payload.get("id"), str):
                transcript.sessions.append(payload["id"])
            transcript.notes.append(
                f"codex session {payload.get('id', '?')}"
                + (f", codex {version}" if version else "")
            )
        elif kind == "event_msg" and payload.get("type") == "exec_command_end":
            if isinstance(payload.get("exit_code"), int):
                state.exit_codes[str(payload.get("call_id"))] = payload["exit_code"]
        elif kind == "response_item":
            yield from _response_item(payload, timestamp, number, state)
    for call_id, call in state.pending.items():
        command = call.command if call.kind != "stdin" else f"write_stdin {call.session}"
        yield ShellCall(
            command, "", state.exit_codes.get(call_id), call.timestamp, call_id, status="no result"
        )
    transcript.lines = records.lines
    transcript.notes.extend(records.notes())


def _bare_meta(record: dict[str, Any]) -> bool:
    return "type" not in record and {"id", "timestamp"} <= set(record)


def _response_item(
    payload: dict[str, Any], timestamp: str | None, number: int, state: _Rollout
) -> Iterator[Event]:
    kind = payload.get("type")
    call_id = str(payload.get("call_id") or payload.get("id") or f"line-{number}")
    name = payload.get("name")
    if kind == "message" and payload.get("role") == "user":
        yield from _user_message(payload, timestamp, number, call_id)
    elif kind == "function_call" and name in SHELL_TOOLS:
        command = _command(_arguments(payload.get("arguments")))
        if _is_patch(command):
            yield from _patch(_patch_text(command), timestamp, call_id, state)
        elif command:
            state.pending[call_id] = _Pending("shell", command, timestamp)
    elif kind == "function_call" and name in STDIN_TOOLS:
        arguments = _arguments(payload.get("arguments"))
        session = str(arguments.get("session_id", "?"))
        chars = arguments.get("chars") if isinstance(arguments.get("chars"), str) else ""
        state.pending[call_id] = _Pending("stdin", chars, timestamp, session)
    elif kind == "function_call" and name in PATCH_TOOLS:
        patch = _arguments(payload.get("arguments")).get("input")
        yield from _patch(patch if isinstance(patch, str) else "", timestamp, call_id, state)
    elif kind == "custom_tool_call" and name in PATCH_TOOLS:
        patch = payload.get("input")
        yield from _patch(patch if isinstance(patch, str) else "", timestamp, call_id, state)
    elif kind == "custom_tool_call" and name in CODE_MODE_TOOLS:
        source = payload.get("input") if isinstance(payload.get("input"), str) else ""
        commands = exec_commands(source)
        if commands:
            state.pending[call_id] = _Pending("cell", "\n".join(commands), timestamp)
    elif kind == "local_shell_call":
        action = payload.get("action") if isinstance(payload.get("action"), dict) else {}
        command = _command(action)
        if command:
            state.pending[call_id] = _Pending("shell", command, timestamp)
    elif kind in ("function_call_output", "local_shell_call_output", "custom_tool_call_output"):
        call = state.pending.pop(call_id, None)
        if call is not None:
            yield _answered(call, call_id, payload.get("output"), state)


def _answered(call: _Pending, call_id: str, raw: Any, state: _Rollout) -> ShellCall:
    parsed = cell_output(raw) if call.kind == "cell" else parse_output(raw)
    exit_code = parsed.exit_code
    if exit_code is None:
        exit_code = state.exit_codes.get(call_id)
    if call.kind != "stdin":
        if parsed.session_id is not None:
            state.sessions[parsed.session_id] = call_id
        return ShellCall(call.command, parsed.text, exit_code, call.timestamp, call_id)
    owner = state.sessions.get(str(call.session))
    if exit_code is not None:
        state.sessions.pop(str(call.session), None)
    shown = f"write_stdin {call.session}" + (f" {call.command!r}" if call.command else "")
    return ShellCall(
        shown,
        parsed.text,
        exit_code,
        call.timestamp,
        call_id,
        status="killed" if INTERRUPT in call.command else None,
        output_of=owner,
    )


def _user_message(
    payload: dict[str, Any], timestamp: str | None, number: int, ref: str
) -> Iterator[Event]:
    for item in payload.get("content") or ():
        text = item.get("text") if isinstance(item, dict) else None
        if not isinstance(text, str) or not text.strip():
            continue
        ran = user_shell_command(text)
        if ran is not None:
            command, result = ran
            yield ShellCall(command, result.text, result.exit_code, timestamp, ref)
        elif not text.lstrip().startswith(INJECTED):
            yield UserMessage(text, timestamp, ref, number)


def _patch(patch: str, timestamp: str | None, ref: str, state: _Rollout) -> Iterator[Event]:
    for path, content in patch_writes(patch, state.files):
        yield FileWrite(path, content, timestamp, ref)


def _is_patch(command: str) -> bool:
    return (
        command.lstrip().startswith(("apply_patch", "applypatch")) and "*** Begin Patch" in command
    )


def _patch_text(command: str) -> str:
    start = command.find("*** Begin Patch")
    end = command.find("*** End Patch", start)
    return command[start : end + len("*** End Patch")] if end >= 0 else command[start:]


def _arguments(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    try:
        value = bounded_json.loads(raw) if isinstance(raw, str) else None
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
    if len(command) == 2 and command[0] in ("apply_patch", "applypatch"):
        return f"{command[0]} {command[1]}"
    return shlex.join(command)
