"""Transcript bytes, whatever they are stored in: plain, gzip (read.py) or zstandard.

Codex moves cold rollouts to `rollout-*.jsonl.zst`. The frame magic decides, never the
name; zstandard is imported only when a zstd frame is met, and every frame of a file
is read (a rollout appended after compression holds several).
"""

from __future__ import annotations

import io
from typing import IO

from analyzer.core.read import TextInput

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def open_transcript(text_input: TextInput) -> IO[bytes]:
    """The input as one binary stream, decompressed; the caller closes it."""
    stream = text_input.open_binary()
    if not _starts_with(stream, ZSTD_MAGIC):
        return stream
    import zstandard

    reader = zstandard.ZstdDecompressor().stream_reader(
        stream, read_across_frames=True, closefd=True
    )
    return io.BufferedReader(_Readable(reader), buffer_size=1 << 16)


def _starts_with(stream: IO[bytes], magic: bytes) -> bool:
    peek = getattr(stream, "peek", None)
    head = peek(len(magic)) if peek is not None else b""
    return head[: len(magic)] == magic


class _Readable(io.RawIOBase):
    """zstandard's reader as a raw stream (so readline and iteration work)."""

    def __init__(self, reader) -> None:
        self._reader = reader

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:  # type: ignore[override]
        try:
            data = self._reader.read(len(buffer))
        except Exception as exc:  # zstandard.ZstdError: a cut or corrupt frame
            raise EOFError(f"zstd stream ends early ({exc})") from None
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self._reader.close()
        super().close()
