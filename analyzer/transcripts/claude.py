"""Claude Code session JSONL (~/.claude/projects/<project>/<session>.jsonl).

Shape followed (Claude Code 1.x-2.1): one record per line, `{type: "user" | "assistant" |
"summary" | "system", uuid, timestamp, message: {role, content}}`, often after
bookkeeping lines without a uuid (`file-history-snapshot`, `permission-mode`,
`queue-operation`), which are skipped. An assistant's `content[]` holds `{type:
"tool_use", id, name: "Bash", input: {command, description, run_in_background?}}`; the
next user record answers it with `{type: "tool_result", tool_use_id, content, is_error}`
and a top-level `toolUseResult: {stdout, stderr, interrupted, backgroundTaskId?}`. There
is no exit-code field: a failed command's content starts with `Exit code N`. A
background shell's output comes back through `TaskOutput` (earlier `BashOutput`) or a
`Read` of its `tasks/X.output` file, and `TaskStop` ends it (shapes below, with
`<persisted-output>` and sub-agent files). Harness text on the user's side
(`<task-notification>`, `<system-reminder>`, `<bash-input>`/`<bash-stdout>` of a `!`
command, `<command-...>`) is not the user's words; a `!` command is read as a command.
Read line by line; a record only lives until its tool call is answered.

Claude Code 2.1's background shells, large outputs and sub-agents: its writer is closed; the shapes follow the Agent SDK's tool input types
(`Bash {command, run_in_background}`, `TaskOutput {task_id, block, timeout}`, `TaskStop
{task_id | shell_id}`, `Read {file_path, offset, limit}`), the texts quoted in
anthropics/claude-code issues (#18390, #29011, #32252, #23948, #17944) and maintained
third-party readers:
- a background launch answers `Command running in background with ID: X. Output is being
  written to: /tmp/claude-N/<project>/tasks/X.output` (also "...was manually backgrounded
  by user with ID: X" and "...moved to the background with ID: X"), and
  `toolUseResult.backgroundTaskId: X`;
- `TaskOutput` answers `<retrieval_status>..</retrieval_status>`, `<task_id>`,
  `<task_type>`, `<status>running|completed|failed|killed</status>`, `<exit_code>N`
  (when known) and `<output>\\n...\\n</output>`, blocks a blank line apart; a long output
  keeps its tail under `[Truncated. Full output: PATH]`; the older `BashOutput` wrapped
  `<stdout>`/`<stderr>`;
- `Read` answers `cat -n` lines (`     1\\tline` or `     1→line`);
- an output too large for the transcript is `<persisted-output>\\nOutput too large (N).
  Full output saved to: PATH\\n\\nPreview (first 2KB):\\n...\\n</persisted-output>`, PATH
  being `<project>/<session>/tool-results/<tool_use_id>.txt`;
- a sub-agent's records are `agent-<id>.jsonl`, beside the session (2.0) or in
  `<session>/subagents/` (2.1), with the parent's `sessionId`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import regex

from analyzer.core import bounded_json
from analyzer.transcripts.events import Event, FileWrite, ShellCall, Transcript, UserMessage
from analyzer.transcripts.jsonstream import RecordLines

EXIT_CODE = regex.compile(r"^(?:Error: )?Exit code (?P<code>-?\d+)\b")
# Records Claude Code adds to the user's side that the user did not type.
NOT_TYPED = (
    "<command-",
    "<local-command-",
    "Caveat: ",
    "[Request interrupted",
    "<task-notification>",
    "<bash-input>",
    "<bash-stdout>",
    "<bash-stderr>",
    "<system-reminder>",
    "<user-prompt-submit-hook>",
    "<persisted-output>",
)
REMINDER = regex.compile(r"<system-reminder>.*?</system-reminder>\s*", regex.S)
BANG_INPUT = regex.compile(r"^\s*<bash-input>(?P<command>.*?)</bash-input>\s*$", regex.S)
BANG_OUTPUT = regex.compile(
    r"^\s*<bash-stdout>(?P<stdout>.*?)</bash-stdout>\s*(?:<bash-stderr>(?P<stderr>.*?)</bash-stderr>)?",
    regex.S,
)
OUTPUT_TOOLS = frozenset({"BashOutput", "TaskOutput", "AgentOutput"})
STOP_TOOLS = frozenset({"TaskStop", "KillShell", "KillBash"})
BACKGROUND_ID = regex.compile(
    r"(?:running in background|manually backgrounded by user|moved to the background)"
    r"[^\n]*?\bID: (?P<id>[\w-]+)"
)
OUTPUT_PATH = regex.compile(r"Output is being written to: (?P<path>\S+?)\.?(?:\s|$)")
TAG = regex.compile(r"<(?P<tag>status|exit_code|task_id)>(?P<value>[^<]*)</(?P=tag)>")
OUTPUT_TAG = regex.compile(r"<output>\n?(?P<text>.*?)\n?</output>", regex.S)
STREAM_TAG = regex.compile(r"<(?P<tag>stdout|stderr)>\n?(?P<text>.*?)\n?</(?P=tag)>", regex.S)
TRUNCATED = regex.compile(r"^\[Truncated\. Full output: (?P<path>[^\]]+)\]\n\n")
READ_LINE = regex.compile(r"^\s*(?P<n>\d+)(?:\t|→)(?P<text>.*)$")
PERSISTED = regex.compile(
    r"^\s*<persisted-output>\n?(?P<head>.*?)Full output saved to: (?P<path>[^\n]+?)\s*\n"
    r"(?:.*?Preview \(first [^)]*\):\n)?(?P<preview>.*?)\n?(?:</persisted-output>\s*)?$",
    regex.S,
)
MAX_FILE_BYTES = 256 << 20


class _Session:
    """What reading keeps between records: unanswered calls, background shells."""

    def __init__(self, folder: Path | None, subagent: bool = False) -> None:
        self.pending: dict[str, tuple[dict[str, Any], str | None]] = {}
        self.background: dict[str, str] = {}  # task id -> the launching tool_use id
        self.outputs: dict[str, str] = {}  # tasks/X.output path -> the launching tool_use id
        self.folders = [folder] if folder is not None else []
        self.subagent = subagent
        self.bang: tuple[str, str | None] | None = None
        self.previews = 0


def read_claude(
    stream: IO[bytes], transcript: Transcript, path: Path | None = None
) -> Iterator[Event]:
    """Yield the session's events in order; a Bash call is yielded when its result arrives.

    With the session file's path, its sub-agents' calls are merged in by time."""
    session = _Session(path.parent if path is not None else None)
    merged: deque[tuple[str, Event]] | None = None if path is not None else deque()
    records = RecordLines()
    for number, record in records.read(stream):
        if not transcript.sessions and isinstance(record.get("sessionId"), str):
            transcript.sessions.append(record["sessionId"])
        if merged is None and isinstance(record.get("sessionId"), str):
            assert path is not None
            session.folders.append(path.parent / record["sessionId"])
            merged = _subagent_events(path, record["sessionId"], session, transcript)
        if merged and isinstance(record.get("timestamp"), str):
            while merged and merged[0][0] <= record["timestamp"]:
                yield merged.popleft()[1]
        yield from _events(record, number, session)
    yield from (event for _, event in merged or ())
    yield from _unanswered(session)
    transcript.lines = records.lines
    transcript.notes.extend(records.notes())
    if session.previews:
        transcript.notes.append(
            f"{session.previews} large output(s) were persisted by Claude Code and their file "
            "is not here: only the 2 KB preview was read"
        )


def _subagent_events(
    path: Path | None, session_id: str, parent: _Session, transcript: Transcript
) -> deque[tuple[str, Event]]:
    """Every sub-agent's events, with the time of the record that gave each, by time."""
    if path is None:
        return deque()
    found: list[tuple[str, Event]] = []
    files = subagent_files(path, session_id)
    for file in files:
        session = _Session(None, subagent=True)
        session.folders = list(parent.folders)
        records = RecordLines()
        try:
            with open(file, "rb") as stream:
                for number, record in records.read(stream):
                    when = (
                        record.get("timestamp") if isinstance(record.get("timestamp"), str) else ""
                    )
                    found.extend((when, e) for e in _events(record, number, session))
        except OSError:
            continue
        transcript.notes.extend(f"{file.name}: {note}" for note in records.notes())
        found.extend(("~", e) for e in _unanswered(session))
        parent.previews += session.previews
    if files:
        transcript.notes.append(f"{len(files)} sub-agent transcript(s) read with the session")
    return deque(sorted(found, key=lambda pair: pair[0]))


def _unanswered(session: _Session) -> Iterator[Event]:
    for tool_id, (call, timestamp) in session.pending.items():
        if call["name"] == "Bash":
            yield _call(call, tool_id, timestamp, "", None, "no result")
    session.pending.clear()


def _events(record: dict[str, Any], number: int, session: _Session) -> Iterator[Event]:
    kind = record.get("type")
    message = record.get("message") if isinstance(record.get("message"), dict) else {}
    timestamp = record.get("timestamp") if isinstance(record.get("timestamp"), str) else None
    content = message.get("content")
    if kind == "assistant" and isinstance(content, list):
        for item in content:
            if isinstance(item, dict) and item.get("type") == "tool_use":
                yield from _tool_use(item, timestamp, number, session)
    elif kind == "user":
        texts = [content] if isinstance(content, str) else []
        for item in content if isinstance(content, list) else ():
            if not isinstance(item, dict):
                continue
            if item.get("type") == "text" and isinstance(item.get("text"), str):
                texts.append(item["text"])
            elif item.get("type") == "tool_result":
                yield from _tool_result(item, record, session)
        for text in texts:
            yield from _user_text(text, record, timestamp, number, session)


def _user_text(
    text: str, record: dict[str, Any], timestamp: str | None, number: int, session: _Session
) -> Iterator[Event]:
    """The user's words; a `!` command and its output; harness text is dropped."""
    bang = BANG_INPUT.match(text)
    if bang:
        session.bang = (bang["command"].strip(), record.get("uuid"))
        return
    shown = BANG_OUTPUT.match(text)
    if shown and session.bang is not None:
        command, ref = session.bang
        session.bang = None
        output = "\n".join(p for p in (shown["stdout"], shown["stderr"]) if p and p.strip())
        yield ShellCall(command, output.strip("\n"), None, timestamp, ref)
        return
    words = REMINDER.sub("", text).strip()
    if session.subagent or record.get("isMeta") or not words or words.startswith(NOT_TYPED):
        return
    yield UserMessage(words, timestamp, record.get("uuid"), number)


def _tool_use(
    item: dict[str, Any], timestamp: str | None, number: int, session: _Session
) -> Iterator[Event]:
    name, arguments = item.get("name"), item.get("input")
    if not isinstance(arguments, dict):
        return
    tool_id = str(item.get("id", f"line-{number}"))
    if name == "Bash" or name in OUTPUT_TOOLS or name in STOP_TOOLS:
        session.pending[tool_id] = ({"name": name, **arguments}, timestamp)
    elif name == "Read" and isinstance(arguments.get("file_path"), str):
        if _task_of_file(arguments["file_path"], session) is not None:
            session.pending[tool_id] = ({"name": name, **arguments}, timestamp)
    elif name == "Write" and isinstance(arguments.get("file_path"), str):
        content = arguments.get("content")
        yield FileWrite(
            arguments["file_path"], content if isinstance(content, str) else "", timestamp, tool_id
        )


def _task_of_file(path: str, session: _Session) -> str | None:
    """The launching tool_use id of a background task whose output file this is."""
    if path in session.outputs:
        return session.outputs[path]
    name = Path(path).name
    if name.endswith(".output") and "/tasks/" in f"/{path}":
        return session.background.get(name.removesuffix(".output"))
    return None


def _tool_result(
    item: dict[str, Any], record: dict[str, Any], session: _Session
) -> Iterator[Event]:
    tool_id = str(item.get("tool_use_id"))
    found = session.pending.pop(tool_id, None)
    if found is None:
        return
    call, timestamp = found
    result = record.get("toolUseResult")
    text = _result_text(item.get("content"), result)
    name = call["name"]
    if name in OUTPUT_TOOLS:
        task = str(call.get("task_id") or call.get("bash_id") or call.get("shell_id") or "")
        output, exit_code, _ = task_output(text, session.folders[0] if session.folders else None)
        yield ShellCall(
            f"{name} {task}", output, exit_code, timestamp, tool_id,
            output_of=session.background.get(task),
        )  # fmt: skip
        return
    if name in STOP_TOOLS:
        task = str(call.get("task_id") or call.get("shell_id") or "")
        yield ShellCall(
            f"{name} {task}", "", None, timestamp, tool_id, status="killed",
            output_of=session.background.get(task),
        )  # fmt: skip
        return
    if name == "Read":
        output, first = read_lines(text)
        yield ShellCall(
            f"Read {call['file_path']}", output, None, timestamp, tool_id, output_line=first,
            output_of=_task_of_file(call["file_path"], session),
        )  # fmt: skip
        return
    full = persisted(text, result, session.folders)
    if full is not None:
        text, complete = full
        session.previews += not complete
    exit_code = _exit_code(text, bool(item.get("is_error")))
    text = EXIT_CODE.sub("", text, count=1).lstrip("\n") if exit_code else text
    task, output_file = background_launch(text, result)
    if task:
        session.background[task] = tool_id
    if output_file:
        session.outputs[output_file] = tool_id
    yield _call(call, tool_id, timestamp, text, exit_code, None, task)


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


def background_launch(text: str, result: Any) -> tuple[str | None, str | None]:
    """(task id, output file) of a Bash call that went to the background."""
    task = result.get("backgroundTaskId") if isinstance(result, dict) else None
    found = BACKGROUND_ID.search(text)
    if not isinstance(task, str):
        task = found["id"] if found else None
    path = OUTPUT_PATH.search(text)
    return task, path["path"] if path else None


def task_output(text: str, folder: Path | None) -> tuple[str, int | None, str | None]:
    """(output, exit code, status) of a TaskOutput / BashOutput answer."""
    tags = {m["tag"]: m["value"].strip() for m in TAG.finditer(text)}
    code = tags.get("exit_code", "")
    exit_code = int(code) if code.lstrip("-").isdigit() else None
    found = OUTPUT_TAG.search(text)
    if found:
        output = found["text"]
        cut = TRUNCATED.match(output)
        if cut:
            full = read_file(cut["path"], [folder] if folder else [])
            output = full if full is not None else output[cut.end() :]
        return output, exit_code, tags.get("status")
    streams = [m["text"] for m in STREAM_TAG.finditer(text)]
    if streams:
        return "\n".join(streams), exit_code, tags.get("status")
    return ("" if tags else text), exit_code, tags.get("status")


def read_lines(text: str) -> tuple[str, int]:
    """A Read answer without its `cat -n` numbers: (text, number of its first line)."""
    lines, first = [], None
    for line in text.split("\n"):
        found = READ_LINE.match(line)
        if found is None:
            if first is None:
                continue  # a note before the file's lines
            break
        first = int(found["n"]) if first is None else first
        lines.append(found["text"])
    return "\n".join(lines), first or 1


def persisted(text: str, result: Any, folders: list[Path]) -> tuple[str, bool] | None:
    """The full text behind a `<persisted-output>` answer, or its preview (False)."""
    found = PERSISTED.match(text)
    if found is None:
        return None
    if isinstance(result, dict):
        parts = [result.get("stdout"), result.get("stderr")]
        raw = "\n".join(p for p in parts if isinstance(p, str) and p)
        if len(raw) > len(found["preview"]):
            return raw, True
    full = read_file(found["path"], folders)
    if full is not None:
        return full, True
    return found["preview"].rstrip("\n").removesuffix("..."), False


def read_file(recorded: str, folders: list[Path]) -> str | None:
    """A file the transcript names: at its path, else by name in the folders given."""
    name = Path(recorded).name
    candidates = [Path(recorded).expanduser()]
    for folder in folders:
        candidates += [folder / "tool-results" / name, folder / "tasks" / name, folder / name]
    for candidate in candidates:
        try:
            if candidate.is_file() and candidate.stat().st_size <= MAX_FILE_BYTES:
                return candidate.read_text("utf-8", errors="replace")
        except OSError:
            continue
    return None


def subagent_files(session_file: Path, session_id: str) -> list[Path]:
    """The sub-agent transcripts of a session: in <session>/subagents/, or beside it."""
    inside = sorted((session_file.parent / session_id / "subagents").glob("agent-*.jsonl"))
    inside += sorted((session_file.parent / session_file.stem / "subagents").glob("agent-*.jsonl"))
    beside = [
        p
        for p in sorted(session_file.parent.glob("agent-*.jsonl"))
        if p != session_file and _session_of(p) == session_id
    ]
    return list(dict.fromkeys([*inside, *beside]))


def _session_of(path: Path) -> str | None:
    try:
        with open(path, "rb") as stream:
            for number, raw in enumerate(stream):
                if number > 40:
                    return None
                try:
                    record = bounded_json.loads(raw)
                except ValueError:
                    continue
                if isinstance(record, dict) and isinstance(record.get("sessionId"), str):
                    return record["sessionId"]
    except OSError:
        return None
    return None
