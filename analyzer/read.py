"""Stage 1: turn paths into streams of decoded text lines.

Files are read as binary streams (never whole), gzip is detected by its magic
bytes rather than the name, invalid UTF-8 is replaced, CRLF is folded, and a
single enormous line is cut so memory stays bounded.
"""

from __future__ import annotations

import gzip
import io
import os
import stat
import sys
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

MAX_LINE_BYTES = 64 * 1024
DIRECTORY_PATTERNS = ("*.log", "*.txt", "*.gz", "*.json", "*.jsonl")
GZIP_MAGIC = b"\x1f\x8b"


class InputError(Exception):
    """An input that cannot be read at all; the CLI prints it as one line and exits 2."""


@dataclass
class TextInput:
    """One readable input: a display path and the file behind it (None for stdin)."""

    path: str
    file: Path | None
    notes: list[str] = field(default_factory=list)

    def lines(self) -> Iterator[str]:
        """Yield decoded lines without their line ending; records truncation notes."""
        if self.file is None:
            yield from _decode_lines(_maybe_gunzip(sys.stdin.buffer), self.notes)
            return
        with open(self.file, "rb") as raw:
            yield from _decode_lines(_maybe_gunzip(raw), self.notes)

    def is_binary(self) -> bool:
        """NUL bytes or mostly undecodable bytes in the first 8 KiB (after gunzip)."""
        if self.file is None or not self.file.is_file():
            return False
        try:
            with open(self.file, "rb") as raw:
                sample = _maybe_gunzip(raw).read(8192)
        except (EOFError, OSError, zlib.error):
            return False
        if b"\0" in sample:
            return True
        return looks_binary(sample.decode("utf-8", errors="replace"))


def _decode_lines(stream: io.BufferedIOBase, notes: list[str]) -> Iterator[str]:
    cut_lines = 0
    try:
        while True:
            raw = stream.readline(MAX_LINE_BYTES)
            if not raw:
                break
            if not raw.endswith(b"\n") and len(raw) >= MAX_LINE_BYTES:
                cut_lines += 1
                _skip_rest_of_line(stream)
            yield raw.rstrip(b"\r\n").decode("utf-8", errors="replace")
    except (EOFError, OSError, zlib.error) as exc:
        notes.append(f"input ends early ({_describe(exc)}); analysed what was readable")
    if cut_lines:
        notes.append(f"{cut_lines} line(s) longer than {MAX_LINE_BYTES} bytes were cut")


def _skip_rest_of_line(stream: io.BufferedIOBase) -> None:
    while True:
        chunk = stream.readline(MAX_LINE_BYTES)
        if not chunk or chunk.endswith(b"\n"):
            return


def _describe(exc: BaseException) -> str:
    if isinstance(exc, EOFError):
        return "truncated gzip stream"
    return str(exc) or type(exc).__name__


def open_inputs(paths: list[str]) -> list[TextInput]:
    """Resolve CLI paths (files, directories, `-`) into readable inputs, in a stable order."""
    inputs: list[TextInput] = []
    for path in paths:
        inputs.extend(_resolve(path))
    return inputs


def _resolve(path: str) -> list[TextInput]:
    if path == "-":
        return [TextInput("<stdin>", None)]
    p = Path(path)
    try:
        mode = p.stat().st_mode
    except FileNotFoundError:
        raise InputError(f"{path}: no such file or directory") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if stat.S_ISDIR(mode):
        return _directory_inputs(p)
    if not (stat.S_ISREG(mode) or stat.S_ISFIFO(mode)):
        raise InputError(f"{path}: not a regular file")
    if not os.access(p, os.R_OK):
        raise InputError(f"{path}: permission denied")
    return [TextInput(path, p)]


def _directory_inputs(directory: Path) -> list[TextInput]:
    found = sorted(
        {f for pattern in DIRECTORY_PATTERNS for f in directory.glob(pattern) if f.is_file()}
    )
    if not found:
        raise InputError(f"{directory}: directory holds no *.log, *.txt or *.gz files")
    readable = [f for f in found if os.access(f, os.R_OK)]
    inputs = [TextInput(str(f), f) for f in readable]
    skipped = [str(f) for f in found if f not in readable]
    if skipped and inputs:
        inputs[0].notes.append("skipped unreadable: " + ", ".join(skipped))
    if not inputs:
        raise InputError(f"{directory}: no readable log files")
    return inputs


def _maybe_gunzip(stream: io.BufferedReader) -> io.BufferedIOBase:
    """Detect gzip by magic bytes: a `.gz` that is plain text is still read."""
    if stream.peek(2)[:2] == GZIP_MAGIC:
        return gzip.GzipFile(fileobj=stream)
    return stream


def looks_binary(sample: str) -> bool:
    """True when decoded text is mostly replacement or control characters."""
    if not sample:
        return False
    bad = sum(1 for ch in sample if ch == "\ufffd" or (ch < " " and ch not in "\t\x1b"))
    return bad > len(sample) * 0.3
