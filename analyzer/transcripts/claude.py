"""Claude Code session JSONL (~/.claude/projects/<project>/<session>.jsonl).

Shape followed (Claude Code 1.x/2.x): one record per line, `{type: "user" | "assistant" |
"summary" | "system", uuid, timestamp, message: {role, content}}`. An assistant's
`content[]` holds `{type: "tool_use", id, name: "Bash", input: {command, description,
run_in_background?}}`; the next user record answers it with `{type: "tool_result",
tool_use_id, content, is_error}` and a top-level `toolUseResult: {stdout, stderr,
interrupted}`. There is no exit-code field: a failed command's content starts with
`Exit code N`. A background shell's output comes back through the `BashOutput` tool.
Read line by line; a record only lives until its tool call is answered.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import IO, Any

import regex

from analyzer.transcripts.model import Event, FileWrite, ShellCall, Transcript, UserMessage

EXIT_CODE = regex.compile(r"^(?:Error: )?Exit code (?P<code>-?\d+)\b")
BACKGROUND_ID = regex.compile(r"running in background with ID: (?P<id>\S+?)\.?\s*$", regex.M)
# Records Claude Code adds to the user's side that the user did not type.
NOT_TYPED = ("<command-", "<local-command-", "Caveat: ", "[Request interrupted")
MAX_RECORD_BYTES = 256 << 20
STREAM_TAG = regex.compile(r"<(?P<tag>stdout|stderr)>\n?(?P<text>.*?)\n?</(?P=tag)>", regex.S)


def read_claude(stream: IO[bytes], transcript: Transcript) -> Iterator[Event]:
    """Yield the session's events in order; a Bash call is yielded when its result arrives."""
    pending: dict[str, tuple[dict[str, Any], str | None, int]] = {}
    background: dict[str, str] = {}
    bad = 0
    number = 0
    for number, raw in enumerate(stream, start=1):
        record = _record(raw)
        if record is None:
            bad += raw.strip() != b""
            continue
        yield from _events(record, number, pending, background)
    for tool_id, (call, timestamp, _) in pending.items():
        yield _call(call, tool_id, timestamp, "", None, "no result")
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


def _events(
    record: dict[str, Any],
    number: int,
    pending: dict[str, tuple[dict[str, Any], str | None, int]],
    background: dict[str, str],
) -> Iterator[Event]:
    kind = record.get("type")
    message = record.get("message") if isinstance(record.get("message"), dict) else {}
    timestamp = record.get("timestamp") if isinstance(record.get("timestamp"), str) else None
    content = message.get("content")
    if kind == "assistant" and isinstance(content, list):
        for item in content:
            if isinstance(item, dict) and item.get("type") == "tool_use":
                yield from _tool_use(item, timestamp, number, pending)
    elif kind == "user":
        if isinstance(content, str):
            if not record.get("isMeta") and _typed(content):
                yield UserMessage(content, timestamp, record.get("uuid"), number)
            return
        for item in content if isinstance(content, list) else ():
            if not isinstance(item, dict):
                continue
            if item.get("type") == "text" and not record.get("isMeta") and _typed(item.get("text")):
                yield UserMessage(item["text"], timestamp, record.get("uuid"), number)
            elif item.get("type") == "tool_result":
                yield from _tool_result(item, record, pending, background)


def _typed(text: Any) -> bool:
    return isinstance(text, str) and bool(text.strip()) and not text.startswith(NOT_TYPED)


def _tool_use(
    item: dict[str, Any],
    timestamp: str | None,
    number: int,
    pending: dict[str, tuple[dict[str, Any], str | None, int]],
) -> Iterator[Event]:
    name, arguments = item.get("name"), item.get("input")
    if not isinstance(arguments, dict):
        return
    tool_id = str(item.get("id", f"line-{number}"))
    if name in ("Bash", "BashOutput"):
        pending[tool_id] = ({"name": name, **arguments}, timestamp, number)
    elif name == "Write" and isinstance(arguments.get("file_path"), str):
        content = arguments.get("content")
        yield FileWrite(
            arguments["file_path"], content if isinstance(content, str) else "", timestamp, tool_id
        )


def _tool_result(
    item: dict[str, Any],
    record: dict[str, Any],
    pending: dict[str, tuple[dict[str, Any], str | None, int]],
    background: dict[str, str],
) -> Iterator[Event]:
    tool_id = str(item.get("tool_use_id"))
    found = pending.pop(tool_id, None)
    if found is None:
        return
    call, timestamp, _ = found
    text = _result_text(item.get("content"), record.get("toolUseResult"))
    exit_code = _exit_code(text, bool(item.get("is_error")))
    text = EXIT_CODE.sub("", text, count=1).lstrip("\n") if exit_code else text
    if call["name"] == "BashOutput":
        shell = str(call.get("bash_id") or call.get("shell_id") or "")
        yield ShellCall(
            command=f"BashOutput {shell}",
            output=_tagged_output(text),
            timestamp=timestamp,
            ref=tool_id,
            output_of=background.get(shell),
        )
        return
    shown = BACKGROUND_ID.search(text)
    if shown:
        background[shown["id"]] = tool_id
    yield _call(call, tool_id, timestamp, text, exit_code, None, shown["id"] if shown else None)


def _call(
    call: dict[str, Any],
    tool_id: str,
    timestamp: str | None,
    output: str,
    exit_code: int | None,
    status: str | None,
    background_id: str | None = None,
) -> ShellCall:
    command = call.get("command")
    return ShellCall(
        command=command if isinstance(command, str) else "",
        output=output,
        exit_code=exit_code,
        timestamp=timestamp,
        ref=tool_id,
        status=status,
        background_id=background_id,
    )


def _result_text(content: Any, result: Any) -> str:
    """What the model saw; when the content is empty, the raw stdout and stderr."""
    if isinstance(content, list):
        content = "\n".join(
            str(c.get("text", ""))
            for c in content
            if isinstance(c, dict) and c.get("type") == "text"
        )
    text = content if isinstance(content, str) else ""
    if not text.strip() and isinstance(result, dict):
        parts = [result.get("stdout"), result.get("stderr")]
        text = "\n".join(p for p in parts if isinstance(p, str) and p)
    return text


def _exit_code(text: str, is_error: bool) -> int | None:
    found = EXIT_CODE.match(text)
    if found:
        return int(found["code"])
    return None if is_error else 0


def _tagged_output(text: str) -> str:
    """BashOutput wraps the shell's output in <stdout>/<stderr>; keep just the output."""
    found = [m["text"] for m in STREAM_TAG.finditer(text)]
    return "\n".join(found) if found else text
