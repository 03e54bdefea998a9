"""Which transcript format an input is, judged by its content (never by its name).

A JSONL file's first record that carries content says whether Claude Code (`type:
user|assistant`, `uuid`, `message`) or Codex (`timestamp`, `type`, `payload`) wrote it:
Claude Code's bookkeeping lines (`file-history-snapshot`, `permission-mode`,
`queue-operation`, `summary`, ...) that often open a session are skipped, and the
earliest Codex rollouts (a bare `{id, timestamp}` line, with or without `instructions`,
then bare response items) are recognised by the lines after it. zstd (`.jsonl.zst`)
and gzip are undone first, by magic bytes. An object that opens with
`"info"` and an opencode session id is an `opencode export`; a folder with opencode's
`message/` and `part/` folders is its storage; an SQLite file with `message` and `part`
tables is its database. Text counts as a terminal session when `script` wrote it or at
least two prompt lines hold shell commands (one `$ python -m sglang...` line at the top of
a CI log stays a log). Anything else is a log.
"""

from __future__ import annotations

import zlib
from pathlib import Path

from analyzer.core import bounded_json
from analyzer.core.lazy_pattern import LazyPattern
from analyzer.core.read import TextInput
from analyzer.transcripts.compressed import open_transcript
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
# Claude Code lines that carry no conversation (no uuid): skipped when judging the format.
CLAUDE_BOOKKEEPING = frozenset(
    {
        "file-history-snapshot",
        "permission-mode",
        "queue-operation",
        "summary",
        "custom-title",
        "tag",
        "agent-name",
        "last-prompt",
        "attachment",
        "progress",
    }
)
# Bare response items of the earliest Codex rollouts (codex-rs protocol models.rs).
CODEX_ITEM_TYPES = frozenset(
    {
        "message",
        "reasoning",
        "function_call",
        "function_call_output",
        "local_shell_call",
        "custom_tool_call",
        "custom_tool_call_output",
    }
)
SNIFF_RECORDS = 40
EXPORT_START = LazyPattern(r'^\s*\{\s*"info"\s*:\s*\{')
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
        with open_transcript(text_input) as stream:
            sample = stream.read(SAMPLE_BYTES)
            if sample.startswith(SQLITE_MAGIC):
                from analyzer.transcripts.opencode import has_opencode_tables

                return OPENCODE if has_opencode_tables(path) else None
            if sample.lstrip().startswith(b"{"):
                found = _sniff_jsonl(_lines(sample, stream))
                if found is not None:
                    return found
    except (OSError, EOFError, ValueError, zlib.error):
        return None
    return sniff_text(sample.decode("utf-8", errors="replace"))


def transcript_kind(text_input: TextInput, forced: str | None) -> str | None:
    """The transcript kind of an input (None: a log); `forced` is --input-format."""
    if forced == "log":
        return None
    if forced and forced != "auto":
        return FORMAT_NAMES[forced]
    return detect_kind(text_input)


def _lines(sample: bytes, stream) -> list[bytes]:
    """The first SNIFF_RECORDS lines (a bookkeeping line may be longer than the sample)."""
    lines = sample.split(b"\n")
    if len(lines) > SNIFF_RECORDS:
        return lines[:SNIFF_RECORDS]
    head, last = lines[:-1], lines[-1]
    budget = 32 << 20
    while len(head) < SNIFF_RECORDS and budget > 0:
        more = stream.readline(1 << 20)
        if not more:
            break
        budget -= len(more)
        last += more
        if last.endswith(b"\n"):
            head.append(last)
            last = b""
    return [*head, last] if last else head


def sniff_text(text: str) -> str | None:
    """The transcript kind of a text sample, or None."""
    stripped = text.lstrip()
    if stripped.startswith("{"):
        return _sniff_json(stripped)
    return TEXT if _is_terminal_session(text) else None


def _sniff_jsonl(lines: list[bytes]) -> str | None:
    """The kind decided by the first records that carry content, or None."""
    bookkeeping = early_codex = False
    for raw in lines:
        if not raw.strip():
            continue
        try:
            record = bounded_json.loads(raw)
        except bounded_json.JsonTooDeepError:
            continue  # JSON all the same: the reader skips it with a note, so does sniffing
        except ValueError:
            return CLAUDE if bookkeeping else None
        if not isinstance(record, dict):
            return None
        kind = record.get("type")
        if "payload" in record and kind in CODEX_TYPES:
            return CODEX
        if kind in CLAUDE_TYPES and ({"uuid", "sessionId", "message", "leafUuid"} & set(record)):
            return CLAUDE
        if kind in CLAUDE_BOOKKEEPING and "payload" not in record:
            bookkeeping = True
            continue
        if kind is None and {"id", "timestamp"} <= set(record):
            if "instructions" in record:
                return CODEX  # rollouts before the {timestamp, type, payload} envelope
            early_codex = True  # the earliest wrote no instructions: judge by what follows
            continue
        if early_codex and (record.get("record_type") == "state" or kind in CODEX_ITEM_TYPES):
            return CODEX
        return None
    return CLAUDE if bookkeeping else None


def _sniff_json(text: str) -> str | None:
    found = _sniff_jsonl([line.encode() for line in text.split("\n")[:SNIFF_RECORDS]])
    if found is not None:
        return found
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
