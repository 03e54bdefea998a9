"""What the agent tools accept, checked before anything is read and refused in one line.

The tools only read: a path is opened for reading and nothing else, stdin is never read
(it is the MCP channel), devices and FIFOs are not opened (a read could block the server
for good), and pasted text goes to a private temporary file that is deleted after the call.
Limits keep one call from stalling the server or flooding the agent's context.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from analyzer.core.read import looks_binary

MAX_PATHS = 64
MAX_PATH_CHARS = 4_096
MAX_FILE_BYTES = 4 * 1024**3  # bigger logs: the CLI (`loganalyze FILE`) reads them
MAX_PASTE_CHARS = 10_000_000  # a bigger paste: save it to a file and pass the path
MAX_COMMAND_CHARS = 100_000
MAX_MESSAGE_CHARS = 100_000
DEFAULT_MAX_CHARS = 60_000  # about 15k tokens: within what agents accept from one tool call
MAX_CHARS_RANGE = (4_000, 2_000_000)
PASTE_NAME = "<paste>"
BINARY_SAMPLE = 8_192


class ToolInputError(ValueError):
    """An input a tool refuses (or a result it cannot bound): the agent reads the message."""


def checked_text(name: str, value: str | None, limit: int, required: bool = True) -> str | None:
    """`value` when it is non-empty text within `limit` characters, without NUL bytes."""
    if value is None or not value.strip():
        if required:
            raise ToolInputError(f"{name} is empty")
        return None
    if len(value) > limit:
        raise ToolInputError(f"{name} is {len(value):,} characters; the limit is {limit:,}")
    if "\0" in value:
        raise ToolInputError(f"{name} holds NUL bytes: binary data, not text")
    return value


def checked_max_chars(value: int) -> int:
    low, high = MAX_CHARS_RANGE
    if not low <= value <= high:
        raise ToolInputError(f"max_chars must be between {low:,} and {high:,}, not {value:,}")
    return value


def checked_paths(paths: list[str]) -> list[str]:
    """The paths (with `~` expanded) when each names a readable file or folder."""
    if len(paths) > MAX_PATHS:
        raise ToolInputError(f"{len(paths)} paths; at most {MAX_PATHS} per call")
    return [_checked_path(p) for p in paths]


def _checked_path(path: str) -> str:
    if not path.strip():
        raise ToolInputError("a path is empty")
    if len(path) > MAX_PATH_CHARS or "\0" in path:
        raise ToolInputError(f"{path[:80]!r}...: not a path (too long or holds NUL bytes)")
    if path == "-":
        raise ToolInputError(
            "`-` (stdin) is the MCP channel here: pass a file path, or the log text as `text`"
        )
    expanded = os.path.expanduser(path)
    try:
        info = os.stat(expanded)
    except FileNotFoundError:
        raise ToolInputError(f"{path}: no such file or directory") from None
    except OSError as exc:
        raise ToolInputError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if stat.S_ISDIR(info.st_mode):
        return expanded
    if not stat.S_ISREG(info.st_mode):
        raise ToolInputError(
            f"{path}: not a regular file or folder (devices and pipes are not read)"
        )
    if info.st_size > MAX_FILE_BYTES:
        raise ToolInputError(
            f"{path}: {info.st_size / 1024**3:.1f} GiB, over the {MAX_FILE_BYTES // 1024**3} GiB "
            "a tool call reads; run `loganalyze FILE` in a shell instead"
        )
    if not os.access(expanded, os.R_OK):
        raise ToolInputError(f"{path}: permission denied")
    return expanded


@contextmanager
def pasted_file(text: str) -> Iterator[str]:
    """The pasted text as a file of its own (read like any log), deleted afterwards."""
    checked_text("text", text, MAX_PASTE_CHARS)
    if looks_binary(text[:BINARY_SAMPLE]):
        raise ToolInputError("text is mostly control or undecodable characters: binary, not a log")
    with tempfile.TemporaryDirectory(prefix="loganalyze-paste-") as folder:
        path = os.path.join(folder, "paste.log")
        with open(path, "w", encoding="utf-8", errors="replace", newline="") as out:
            out.write(text)
        yield path


def checked_folder(folder: str | None) -> Path | None:
    if folder is None or not folder.strip():
        return None
    checked_text("folder", folder, MAX_PATH_CHARS)
    path = Path(os.path.expanduser(folder))
    if not path.is_dir():
        raise ToolInputError(f"{folder}: no such folder")
    return path
