"""Stage 1: turn paths into streams of decoded text lines.

Files are read as binary streams (never whole), gzip is detected by its magic
bytes rather than the name, invalid UTF-8 is replaced, CRLF is folded, and a
single enormous line is cut so memory stays bounded.
"""

from __future__ import annotations

import io
import os
import re
import stat
import sys
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

MAX_LINE_BYTES = 64 * 1024
CHUNK_BYTES = 8 * 1024 * 1024
DIRECTORY_PATTERNS = ("*.log", "*.txt", "*.gz", "*.json", "*.jsonl")
GZIP_MAGIC = b"\x1f\x8b"
# formats/json_report.py and metrics_table.py write schema_version first, then verdict or
# runs; formats/terminal.py's headline and the metrics/compare text start with the tool's name
OWN_REPORT = re.compile(
    rb'\s*(?:\{\s*"schema_version"\s*:\s*\d+\s*,\s*"(?:verdict|runs)"\s*:'
    rb"|loganalyze(?: metrics| compare)?: )"
)


class InputError(Exception):
    """An input that cannot be read at all; the CLI prints it as one line and exits 2."""


@dataclass
class TextInput:
    """One readable input: a display path and the file behind it (None for stdin)."""

    path: str
    file: Path | None
    notes: list[str] = field(default_factory=list)
    cut_lines: int = 0

    def lines(self) -> Iterator[str]:
        """Decoded lines without their line ending (the simple path; see literal_scan)."""
        if self.file is None:
            yield from self._decode_lines(_maybe_gunzip(sys.stdin.buffer))
            return
        with self.open_raw() as raw:
            yield from self._decode_lines(_maybe_gunzip(raw))

    def chunks(self) -> Iterator[bytes]:
        """Decompressed byte chunks of about CHUNK_BYTES (the fast path)."""
        if self.file is None:
            yield from self._read_chunks(_maybe_gunzip(sys.stdin.buffer))
            return
        with self.open_raw() as raw:
            yield from self._read_chunks(_maybe_gunzip(raw))

    def reading_notes(self) -> list[str]:
        """What reading skipped, in a fixed order whichever path read the input."""
        notes = list(self.notes)
        if self.cut_lines:
            notes.append(f"{self.cut_lines} line(s) longer than {MAX_LINE_BYTES} bytes were cut")
        return notes

    def _read_chunks(self, stream: io.BufferedIOBase) -> Iterator[bytes]:
        try:
            while chunk := stream.read1(CHUNK_BYTES):
                yield chunk
        except (EOFError, OSError, zlib.error) as exc:
            self._ended_early(exc)

    def _decode_lines(self, stream: io.BufferedIOBase) -> Iterator[str]:
        try:
            while raw := stream.readline(MAX_LINE_BYTES):
                if not raw.endswith(b"\n") and len(raw) >= MAX_LINE_BYTES:
                    self.cut_lines += 1
                    _skip_rest_of_line(stream)
                yield raw.rstrip(b"\r\n").decode("utf-8", errors="replace")
        except (EOFError, OSError, zlib.error) as exc:
            self._ended_early(exc)

    def _ended_early(self, exc: BaseException) -> None:
        self.notes.append(f"input ends early ({_describe(exc)}); analysed what was readable")

    def open_binary(self) -> io.BufferedIOBase:
        """The input as one binary stream (gunzipped), for readers with their own framing
        (JSONL records may be far longer than MAX_LINE_BYTES). The caller closes it."""
        if self.file is None:
            return _maybe_gunzip(sys.stdin.buffer)
        return _maybe_gunzip(self.open_raw())

    def open_raw(self) -> io.BufferedIOBase:
        """The file's bytes as they were when opened: a log the server is still writing
        grows while we read it, and a fast writer must not keep the analysis (or the disk
        of a test) busy forever. Pipes and FIFOs are read to their end. The caller closes it.
        """
        assert self.file is not None
        raw = open(self.file, "rb")  # noqa: SIM115 - returned to the caller
        size = os.fstat(raw.fileno())
        if not stat.S_ISREG(size.st_mode):
            return raw
        return io.BufferedReader(_Snapshot(raw, size.st_size), buffer_size=1 << 16)

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


class _Snapshot(io.RawIOBase):
    """The first `size` bytes of an open file, however much it grows meanwhile."""

    def __init__(self, raw: io.BufferedReader, size: int) -> None:
        self._raw, self._left = raw, size

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[override]
        view = memoryview(buffer)[: self._left]
        count = self._raw.readinto(view) or 0
        self._left -= count
        return count

    def close(self) -> None:
        self._raw.close()
        super().close()


def _skip_rest_of_line(stream: io.BufferedIOBase) -> None:
    while True:
        chunk = stream.readline(MAX_LINE_BYTES)
        if not chunk or chunk.endswith(b"\n"):
            return


def _describe(exc: BaseException) -> str:
    if isinstance(exc, EOFError):
        return "truncated gzip stream"
    return str(exc) or type(exc).__name__


def open_inputs(
    paths: list[str], folder_is_input: Callable[[Path], bool] | None = None
) -> list[TextInput]:
    """Resolve CLI paths (files, directories, `-`) into readable inputs, in a stable order.

    A folder is a folder of logs unless `folder_is_input` says it is one input of its own
    (the caller knows the formats: an opencode storage folder is a session transcript).
    """
    inputs: list[TextInput] = []
    for path in paths:
        inputs.extend(_resolve(path, folder_is_input or _never))
    return inputs


def _never(_: Path) -> bool:
    return False


def _resolve(path: str, folder_is_input: Callable[[Path], bool]) -> list[TextInput]:
    if path == "-":
        return [TextInput("<stdin>", None)]
    p = Path(path)
    try:
        mode = p.stat().st_mode
    except FileNotFoundError:
        raise InputError(f"{path}: no such file or directory") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if stat.S_ISDIR(mode) and folder_is_input(p):
        return [TextInput(path, p)]
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
    reports = [f for f in readable if is_own_report(f)]
    inputs = [TextInput(str(f), f) for f in readable if f not in reports]
    skipped = [str(f) for f in found if f not in readable]
    if skipped and inputs:
        inputs[0].notes.append("skipped unreadable: " + ", ".join(skipped))
    if reports and inputs:
        inputs[0].notes.append("skipped loganalyze's own reports: " + ", ".join(map(str, reports)))
    if not inputs:
        only = " (only loganalyze's own reports)" if reports else ""
        raise InputError(f"{directory}: no readable log files{only}")
    return inputs


def is_own_report(path: Path) -> bool:
    """A report loganalyze wrote (JSON, plain text, metrics), known by how it begins."""
    try:
        with open(path, "rb") as raw:
            head = _maybe_gunzip(raw).read(256)
    except (EOFError, OSError, zlib.error):
        return False
    return OWN_REPORT.match(head) is not None


def _maybe_gunzip(stream: io.BufferedReader) -> io.BufferedIOBase:
    """Detect gzip by magic bytes: a `.gz` that is plain text is still read."""
    if stream.peek(2)[:2] == GZIP_MAGIC:
        import gzip  # here: most inputs are plain text

        return gzip.GzipFile(fileobj=stream)
    return stream


def looks_binary(sample: str) -> bool:
    """True when decoded text is mostly replacement or control characters."""
    if not sample:
        return False
    bad = sum(1 for ch in sample if ch == "\ufffd" or (ch < " " and ch not in "\t\x1b"))
    return bad > len(sample) * 0.3
