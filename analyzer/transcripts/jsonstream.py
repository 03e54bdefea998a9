"""Read one big JSON object member by member, and one array member element by element.

`opencode export` writes the whole session as a single pretty-printed JSON object; a long
session is tens of megabytes. json.load would hold all of it (several times over, as
Python objects); this reader holds one message at a time. It is a small incremental
parser over json's own raw_decode: the buffer grows only while the value being decoded
is incomplete, so a value is decoded in time linear in its size.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterator
from typing import IO, Any

CHUNK = 1 << 20
WHITESPACE = " \t\r\n"


class JsonStreamError(ValueError):
    """The text is not the JSON shape expected (the message says where)."""


class _Buffer:
    """Decoded text with a read position; refills from the byte stream on demand."""

    def __init__(self, stream: IO[bytes]) -> None:
        self.stream = stream
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.text = ""
        self.pos = 0
        self.eof = False
        self.newlines = 0

    def fill(self, at_least: int = 0) -> bool:
        """Append more text; False at the end of the stream."""
        if self.eof:
            return False
        raw = self.stream.read(max(at_least, CHUNK))
        if not raw:
            self.eof = True
            self.text = self.text[self.pos :] + self.decoder.decode(b"", final=True)
            self.pos = 0
            return False
        chunk = self.decoder.decode(raw)
        self.newlines += chunk.count("\n")
        self.text = self.text[self.pos :] + chunk
        self.pos = 0
        return True

    def peek(self) -> str:
        """The next non-whitespace character ('' at the end)."""
        while True:
            while self.pos < len(self.text) and self.text[self.pos] in WHITESPACE:
                self.pos += 1
            if self.pos < len(self.text):
                return self.text[self.pos]
            if not self.fill():
                return ""

    def expect(self, char: str) -> None:
        found = self.peek()
        if found != char:
            raise JsonStreamError(f"expected {char!r}, found {found or 'end of input'!r}")
        self.pos += 1

    def value(self) -> Any:
        """Decode the next JSON value, reading more while it is incomplete."""
        self.peek()
        decoder = json.JSONDecoder()
        want = CHUNK
        while True:
            try:
                value, end = decoder.raw_decode(self.text, self.pos)
            except json.JSONDecodeError as exc:
                if self.eof:
                    raise JsonStreamError(f"invalid JSON: {exc.msg}") from None
                self.fill(want)
                want = min(want * 2, 1 << 28)  # grow geometrically: linear total work
                continue
            if end == len(self.text) and not self.eof and self.text[self.pos] not in '{["':
                # a number at the buffer's edge may continue in the next chunk
                self.fill()
                continue
            self.pos = end
            return value


class ObjectStream:
    """Iterate a top-level JSON object: (key, value) per member; a member named in
    `streamed` (an array) yields (key, element) once per element instead.

    `newlines` counts the line breaks read so far (the input's line count at the end).
    """

    def __init__(self, stream: IO[bytes], streamed: frozenset[str]) -> None:
        self._buffer = _Buffer(stream)
        self._streamed = streamed

    @property
    def newlines(self) -> int:
        return self._buffer.newlines

    def __iter__(self) -> Iterator[tuple[str, Any]]:
        buffer = self._buffer
        buffer.expect("{")
        if buffer.peek() == "}":
            return
        while True:
            key = buffer.value()
            if not isinstance(key, str):
                raise JsonStreamError("object key is not a string")
            buffer.expect(":")
            if key in self._streamed and buffer.peek() == "[":
                yield from ((key, element) for element in _iter_array(buffer))
            else:
                yield key, buffer.value()
            if buffer.peek() == "}":
                return
            buffer.expect(",")


def _iter_array(buffer: _Buffer) -> Iterator[Any]:
    buffer.expect("[")
    if buffer.peek() == "]":
        buffer.pos += 1
        return
    while True:
        yield buffer.value()
        if buffer.peek() == "]":
            buffer.pos += 1
            return
        buffer.expect(",")
