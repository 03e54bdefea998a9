"""Claude Code 2.1's background shells, large outputs and sub-agents, as the JSONL holds them.

Claude Code's writer is closed; the shapes follow the Agent SDK's tool input types
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

from pathlib import Path
from typing import Any

import regex

from analyzer.core import bounded_json

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
