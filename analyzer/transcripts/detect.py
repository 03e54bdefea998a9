"""Which transcript format an input is, judged by its content (never by its name).

A JSONL file's first record says whether Claude Code (`type: user|assistant`, `uuid`,
`message`) or Codex (`timestamp`, `type`, `payload`) wrote it; an object that opens with
`"info"` and an opencode session id is an `opencode export`; a folder with opencode's
`message/` and `part/` folders is its storage; an SQLite file with `message` and `part`
tables is its database. Text counts as a terminal session when `script` wrote it or at
least two prompt lines hold shell commands (one `$ python -m sglang...` line at the top of
a CI log stays a log). Anything else is a log.
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import regex

from analyzer.core.read import TextInput
from analyzer.transcripts.terminal_text import SCRIPT_HEADER, prompt_command, visible

OPENCODE, CLAUDE, CODEX, TEXT = (
    "transcript_opencode",
    "transcript_claude",
    "transcript_codex",
    "transcript_text",
)
KINDS = (OPENCODE, CLAUDE, CODEX, TEXT)
FORMAT_NAMES = {"opencode": OPENCODE, "claude": CLAUDE, "codex": CODEX, "text": TEXT}
SQLITE_MAGIC = b"SQLite format 3\x00"
SAMPLE_BYTES = 64 * 1024
CLAUDE_TYPES = frozenset({"user", "assistant", "summary", "system"})
CODEX_TYPES = frozenset({"session_meta", "response_item", "event_msg", "turn_context", "compacted"})
EXPORT_START = regex.compile(r'^\s*\{\s*"info"\s*:\s*\{')
MIN_PROMPTS = 2


def opencode_storage_root(path: Path) -> Path | None:
    """The `storage` folder (with message/ and part/) at or under `path`, if any."""
    for candidate in (path, path / "storage"):
        if (candidate / "message").is_dir() and (candidate / "part").is_dir():
            return candidate
    return None


def is_transcript_folder(path: Path) -> bool:
    """An opencode storage folder is one input (a session transcript), not a log folder."""
    return opencode_storage_root(path) is not None


def detect_kind(text_input: TextInput) -> str | None:
    """The transcript kind of one input, or None for a log (stdin is never sniffed)."""
    path = text_input.file
    if path is None:
        return None
    if path.is_dir():
        return OPENCODE if opencode_storage_root(path) else None
    if not path.is_file():
        return None  # a FIFO is read once, by the log reader; sniffing would eat it
    try:
        with text_input.open_binary() as stream:
            sample = stream.read(SAMPLE_BYTES)
    except (OSError, EOFError, ValueError, zlib.error):
        return None
    if sample.startswith(SQLITE_MAGIC):
        from analyzer.transcripts.opencode import has_opencode_tables

        return OPENCODE if has_opencode_tables(path) else None
    return sniff_text(sample.decode("utf-8", errors="replace"))


def sniff_text(text: str) -> str | None:
    """The transcript kind of a text sample, or None."""
    stripped = text.lstrip()
    if stripped.startswith("{"):
        return _sniff_json(stripped)
    return TEXT if _is_terminal_session(text) else None


def _sniff_json(text: str) -> str | None:
    first = text.split("\n", 1)[0]
    try:
        record = json.loads(first)
    except ValueError:
        record = None
    if isinstance(record, dict):
        kind = record.get("type")
        if "payload" in record and kind in CODEX_TYPES:
            return CODEX
        if kind in CLAUDE_TYPES and ({"uuid", "sessionId", "message", "leafUuid"} & set(record)):
            return CLAUDE
        if {"id", "timestamp"} <= set(record) and "instructions" in record:
            return CODEX  # rollouts before the {timestamp, type, payload} envelope
        return None
    if EXPORT_START.match(text) and '"ses_' in text[:4096]:
        return OPENCODE
    return None


def _is_terminal_session(text: str) -> bool:
    lines = text.split("\n")
    if lines and SCRIPT_HEADER.match(lines[0]):
        return True
    prompts = 0
    for raw in lines:
        command = prompt_command(visible(raw.rstrip("\r")))
        if command:
            prompts += 1
            if prompts >= MIN_PROMPTS:
                return True
    return False
