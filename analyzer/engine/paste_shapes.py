"""Paste shapes that hide a failure's lines, undone line by line (part of the paste stage).

- a log collapsed into one line (newlines lost): split back at its traceback header, its
  frames, its exception line and its records' timestamps;
- a traceback pasted without indentation: the source line under an unindented frame is read
  as that frame's code, not as the end of the traceback;
- an error body: a JSON error's `"message": "..."` and an HTTP client's
  `Server error: 500 - [address=..., pid=...] <message>` are given their message as a line
  of its own, after the line that holds them.

Each is switched on by what the input's first lines show (engine/paste.py read_paste).
"""

from __future__ import annotations

import json

from analyzer.core.lazy_pattern import LazyPattern

TRACEBACK_START = "Traceback (most recent call last):"
# where a collapsed line holds the next line: a traceback header, a frame, an exception
# line, a chain marker, a record's timestamp
COLLAPSED_BOUNDARY = LazyPattern(
    r"(?<=\S) +(?=Traceback \(most recent call last\):"
    r'|File "[^"]+", line \d+'
    r"|(?:During handling|The above exception) "
    r"|(?:[a-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Interrupt)(?:: |$)"
    r"|\[\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d"
    r"|\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d)"
)
COLLAPSED_FRAMES = LazyPattern(r'(?<=\S) +File "[^"]+", line \d+')
UNINDENTED_FRAME = LazyPattern(r'^File "[^"]+", line \d+(?:, in \S+)?$')
# what follows an unindented frame and is not its code: the next frame, the exception line,
# a chain marker, a record
NOT_CODE = LazyPattern(
    r'^(?:File "|Traceback |During handling|The above exception|\[\d{4}-|\d{4}-\d\d-\d\d'
    r"|(?:[a-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Interrupt|Exit|Warning)?(?::|$)"
    r"|\w+(?:\.\w+)*: )"
)
HTTP_BODY = LazyPattern(
    r"\b(?:Server|Client) error: \d{3}\b.*?\[address=[^\]]*\] (?P<message>\S.*)$"
)
JSON_MESSAGE = LazyPattern(r'"(?:message|detail|error)": ?(?P<string>"(?:[^"\\]|\\.)*")')
JSON_KEYS = ('"message"', '"detail"', '"error"')
MIN_COLLAPSED_FRAMES = 2


def is_collapsed(line: str) -> bool:
    """A line holding a traceback's header and frames, or several frames: lost newlines."""
    frames = line.count('File "')
    if frames and TRACEBACK_START in line:
        return True
    return frames >= MIN_COLLAPSED_FRAMES and len(COLLAPSED_FRAMES.findall(line)) > 1


def split_collapsed(line: str) -> list[str]:
    """The lines a collapsed line held (itself when it is not one)."""
    if not is_collapsed(line):
        return [line]
    parts, at = [], 0
    for found in COLLAPSED_BOUNDARY.finditer(line):
        parts.append(line[at : found.start()])
        at = found.end()
    parts.append(line[at:])
    return [p for p in parts if p.strip()]


def has_unindented_frames(head: list[str]) -> bool:
    return any(line.startswith('File "') and UNINDENTED_FRAME.match(line) for line in head)


def indent_code(previous: str | None, line: str) -> str:
    """The line under an unindented frame, indented as Python prints a frame's code."""
    if previous is None or not UNINDENTED_FRAME.match(previous):
        return line
    if not line.strip() or line[:1].isspace() or NOT_CODE.match(line):
        return line
    return "    " + line


def opened_body(line: str) -> str | None:
    """The message an error body holds: the text after an HTTP client's
    `[address=..., pid=...]`, or a JSON error's `"message"` string decoded."""
    if "error: " in line and "[address=" in line and (found := HTTP_BODY.search(line)):
        return found["message"].strip()
    if any(key in line for key in JSON_KEYS) and (found := JSON_MESSAGE.search(line)):
        try:
            message = json.loads(found["string"])
        except ValueError:
            return None
        return message.strip() if isinstance(message, str) and message.strip() else None
    return None


def shows_bodies(head: list[str]) -> bool:
    return any(opened_body(line) is not None for line in head)
