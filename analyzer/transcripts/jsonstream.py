"""Read one big JSON object member by member, and one array member element by element.

`opencode export` writes the whole session as a single pretty-printed JSON object; a long
session is tens of megabytes. json.load would hold all of it (several times over, as
Python objects); this reader holds one message at a time. It is a small incremental
parser over json's own raw_decode: the buffer grows only while the value being decoded
is incomplete, so a value is decoded in time linear in its size. A value nested too deep
for json's recursive decoder, or over MAX_VALUE_CHARS, is stepped over by a flat scan and
counted in `skipped`, and the values after it are read.

`RecordLines` reads JSONL the same way: one record a line, a line too deep or over
MAX_RECORD_BYTES skipped (without holding it) and noted.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterator
from typing import IO, Any

import regex

from analyzer.core import bounded_json

CHUNK = 1 << 20
WHITESPACE = " \t\r\n"
MAX_VALUE_CHARS = 256 << 20
MAX_RECORD_BYTES = 256 << 20
SKIPPED = object()  # what value() returns for a value stepped over
# Inside a string only a quote or a backslash matters; outside, brackets and quotes.
STRING_STOP = regex.compile(r'["\\]')
STRUCTURE_STOP = regex.compile(r'[\[\]{}"]')


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
        """Decode the next JSON value, reading more while it is incomplete; SKIPPED for
        one too deep or too big (stepped over)."""
        self.peek()
        decoder = json.JSONDecoder()
        want = CHUNK
        while True:
            try:
                value, end = decoder.raw_decode(self.text, self.pos)
            except RecursionError:
                self.skip_value()
                return SKIPPED
            except json.JSONDecodeError as exc:
                if self.eof:
                    raise JsonStreamError(f"invalid JSON: {exc.msg}") from None
                if len(self.text) - self.pos > MAX_VALUE_CHARS:
                    self.skip_value()
                    return SKIPPED
                self.fill(want)
                want = min(want * 2, 1 << 28)  # grow geometrically: linear total work
                continue
            if end == len(self.text) and not self.eof and self.text[self.pos] not in '{["':
                # a number at the buffer's edge may continue in the next chunk
                self.fill()
                continue
            self.pos = end
            return value

    def skip_value(self) -> None:
        """Step over the value at pos without decoding it: brackets counted, strings
        jumped, no recursion, the text behind dropped as it goes."""
        depth, in_string = 0, self.peek() == '"'
        if in_string:
            self.pos += 1
        elif self.peek() not in "[{":
            raise JsonStreamError("invalid JSON: an oversized scalar")
        while True:
            found = (STRING_STOP if in_string else STRUCTURE_STOP).search(self.text, self.pos)
            if found is None or (found[0] == "\\" and found.end() == len(self.text)):
                self.pos = len(self.text) if found is None else found.start()
                if not self.fill():
                    raise JsonStreamError("invalid JSON: ends inside a value")
                continue
            char, self.pos = found[0], found.end()
            if char == "\\":
                self.pos += 1  # the escaped character
            elif char == '"':
                in_string = not in_string
                if not in_string and depth == 0:
                    return
            elif char in "[{":
                depth += 1
            else:
                depth -= 1
                if depth == 0:
                    return


class ObjectStream:
    """Iterate a top-level JSON object: (key, value) per member; a member named in
    `streamed` (an array) yields (key, element) once per element instead.

    `newlines` counts the line breaks read so far (the input's line count at the end).
    """

    def __init__(self, stream: IO[bytes], streamed: frozenset[str]) -> None:
        self._buffer = _Buffer(stream)
        self._streamed = streamed
        self.skipped = 0

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
                values = _iter_array(buffer)
            else:
                values = iter((buffer.value(),))
            for value in values:
                if value is SKIPPED:
                    self.skipped += 1
                else:
                    yield key, value
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


class RecordLines:
    """JSONL records (one JSON object a line); other lines are counted for the notes."""

    def __init__(self) -> None:
        self.lines = 0
        self.not_records = 0
        self.too_deep = 0
        self.too_big = 0

    def read(self, stream: IO[bytes]) -> Iterator[tuple[int, dict[str, Any]]]:
        """(line number, record) for every line that is a JSON object."""
        while raw := stream.readline(MAX_RECORD_BYTES + 1):
            self.lines += 1
            if len(raw) > MAX_RECORD_BYTES and not raw.endswith(b"\n"):
                self.too_big += 1
                while (rest := stream.readline(CHUNK)) and not rest.endswith(b"\n"):
                    pass
                continue
            try:
                record = bounded_json.loads(raw)
            except bounded_json.JsonTooDeepError:
                self.too_deep += 1
                continue
            except ValueError:
                record = None
            if isinstance(record, dict):
                yield self.lines, record
            else:
                self.not_records += raw.strip() != b""

    def notes(self) -> list[str]:
        notes = []
        if self.not_records:
            notes.append(f"{self.not_records} line(s) were not JSON records: skipped")
        if self.too_deep:
            notes.append(f"{self.too_deep} line(s) of JSON nested too deep to read: skipped")
        if self.too_big:
            notes.append(
                f"{self.too_big} line(s) over {MAX_RECORD_BYTES >> 20} MiB: skipped unread"
            )
        return notes
