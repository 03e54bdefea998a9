"""Stage 1, with normalize.py: undo what copying a log out of a terminal or a page did to it.

A terminal cuts a long line at its width and the copy keeps the cut; a rendered page or an
HTML/JSON export writes `<`, `>`, quotes and `&` as entities; a page or a chat client adds
non-breaking spaces, zero-width characters and typographic quotes. Each is recognised on
the input's first lines, and only on strong evidence: a consistent cut width (most of the
long lines end exactly there, none goes past it) and a next line that does not begin like
a record of its own; entities of markup with no raw `<` or `>` beside them. An input that
shows none of them costs one look at its first lines and is read as before.

The file is never changed. A repaired line keeps the number of its first line; its
`pasted` keeps the user's text, so the evidence cites what they pasted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace

import regex

from analyzer.core.lazy_pattern import LazyPattern
from analyzer.engine.normalize import ANCHOR, FENCE, NO_PREFIXES, LinePrefixes, detect_prefixes
from analyzer.engine.paste_shapes import (
    has_unindented_frames,
    indent_code,
    is_collapsed,
    opened_body,
    shows_bodies,
    split_collapsed,
)
from analyzer.sglang.log_format import visible

# entities of markup (`&amp;` alone is a URL's own text as often as an escaped `&`)
MARKUP_ENTITY = LazyPattern(r"&(?:lt|gt|quot|apos|#39|#x27|#34|#x22|#60|#62);")
# GitHub's collapsible block, written raw around an escaped paste
HTML_TAG_LINE = LazyPattern(r"^\s*</?(?:details|summary|pre|code|br)\b[^<>]*>", regex.IGNORECASE)
INVISIBLE = {0x00A0: " ", 0x202F: " ", 0x2007: " ", 0x200B: None, 0x200C: None,
             0x200D: None, 0x2060: None, 0xFEFF: None}  # fmt: skip
TYPOGRAPHIC_QUOTES = {0x2018: "'", 0x2019: "'", 0x201C: '"', 0x201D: '"'}
MIN_WRAP_WIDTH = 60
MIN_CUT_LINES = 2
NEAR_WIDTH = 3  # lines this much shorter than the cut are not cut: fewer of them than at it
# the widths terminals open with: one line cut mid-word at one of them is evidence enough
TERMINAL_WIDTHS = frozenset({80, 100, 120, 132, 160, 200})
# how a line of its own begins: indented (a traceback's source line, argparse's wrapped
# usage), SGLang's `[date`, a Ray actor, a date or a syslog time, NCCL's `host:pid:tid [dev]`
RECORD_START = LazyPattern(
    r"\s{2}|\t|\[\d{4}-\d\d-\d\d|\((?:\w+ )?pid=|\d{4}-\d\d-\d\d[T ]\d\d:\d\d"
    r"|[A-Z][a-z]{2} [ \d]\d \d\d:\d\d|[\w.-]+:\d+:\d+ \[\d+\] "
)
SHAPE_CHARS = 8
DIGITS = LazyPattern(r"\d")
# where a cut falls inside a text: within a word, a path, a call, a quoted string
INSIDE_TEXT = LazyPattern(r"[\w(\[{/'\"-]")
# a JSON string's escapes (a log stored in one and pasted raw: `\n` between its lines)
JSON_ESCAPE = LazyPattern(r'\\(?:u[0-9a-fA-F]{4}|["\\/bfnrt])')
JSON_ESCAPES = {
    "n": "\n",
    "t": "\t",
    "r": "\r",
    "b": "\b",
    "f": "\f",
    '"': '"',
    "\\": "\\",
    "/": "/",
}
MIN_ESCAPED_RECORDS = 2
LOGGED = LazyPattern(r"\[\d{4}-\d\d-\d\d")
ANCHOR_WITHIN = 120


@dataclass(frozen=True)
class PasteRepairs:
    """What the input's first lines show was done to it; `width`: the terminal's cut."""

    width: int | None = None
    escaped_lines: bool = False
    unescape: bool = False
    invisible: bool = False
    quotes: bool = False
    # engine/paste_shapes.py: newlines lost, frames unindented, error bodies to open
    collapsed: bool = False
    unindented: bool = False
    bodies: bool = False

    def __bool__(self) -> bool:
        return bool(
            self.width or self.escaped_lines or self.unescape or self.invisible or self.quotes
            or self.collapsed or self.unindented or self.bodies
        )  # fmt: skip

    @property
    def names(self) -> list[str]:
        found = [f"hard-wrap at {self.width} columns"] if self.width else []
        found += ["lines joined by escaped newlines"] * self.escaped_lines
        found += ["HTML entities"] * self.unescape + ["invisible characters"] * self.invisible
        found += ["typographic quotes"] * self.quotes + ["newlines lost"] * self.collapsed
        # an error body opened is a reading of the input, not damage the paste did to it
        return found + ["frames unindented"] * self.unindented

    def repair(self, text: str) -> str:
        """One line's characters as they were before the page or the client touched them."""
        if self.unescape and "&" in text:
            import html  # its entity table is only wanted for an escaped paste

            text = html.unescape(text)
        if (self.invisible or self.quotes) and not text.isascii():
            text = text.translate(_table(self.invisible, self.quotes))
        return text


NO_REPAIRS = PasteRepairs()


@dataclass(frozen=True)
class PasteReading:
    """An input's first lines read: the prefixes its tools added, what its paste did."""

    prefixes: LinePrefixes
    repairs: PasteRepairs


def read_paste(head: list[str]) -> PasteReading:
    """The prefixes and the paste repairs of an input, from its first lines as shown."""
    escaped = _escaped_paste(head)
    if escaped:
        head = [text for ln in head for text, _ in escaped_lines(ln) or [(ln, None)]]
    characters = _character_repairs(head, escaped)
    if characters:
        head = [characters.repair(ln) for ln in head]
    characters = replace(
        characters,
        collapsed=any(is_collapsed(ln) for ln in head),
        unindented=has_unindented_frames(head),
        bodies=shows_bodies(head),
    )
    if characters.collapsed:
        head = [part for ln in head for part in split_collapsed(ln)]
    prefixes = detect_prefixes(head)
    width = cut_width(head, _record_start(prefixes))
    if width is None:
        return PasteReading(prefixes, characters)
    repairs = replace(characters, width=width)
    # the head is repaired already: only its cuts are left to rejoin
    rejoined = [text for _, text, _ in Rejoiner(PasteRepairs(width), prefixes).lines(head)]
    return PasteReading(detect_prefixes(rejoined), repairs)


def _character_repairs(head: list[str], escaped: bool) -> PasteRepairs:
    """Entities of markup with no raw `<` or `>` beside them (a collapsible block's tags
    aside), invisible characters, typographic quotes where straight ones would be."""
    entities = raw_angles = smart = straight = 0
    invisible = False
    for line in head:
        if "&" in line:
            entities += len(MARKUP_ENTITY.findall(line))
        if ("<" in line or ">" in line) and not HTML_TAG_LINE.match(line):
            raw_angles += line.count("<") + line.count(">")
        if not line.isascii():
            invisible = invisible or any(ord(c) in INVISIBLE for c in line)
            smart += sum(ord(c) in TYPOGRAPHIC_QUOTES for c in line)
        straight += line.count('"') + line.count("'")
    return PasteRepairs(
        escaped_lines=escaped,
        unescape=entities > 0 and raw_angles == 0,
        invisible=invisible,
        quotes=smart > 0 and smart >= straight,
    )


def escaped_lines(line: str) -> list[tuple[str, str]] | None:
    """The lines a JSON string's `\\n` joined, decoded, each with its text as pasted; None
    unless at least two of them begin as records do (a request's prompt logged with its
    `\\n` is one line of the log)."""
    parts: list[tuple[str, str]] = []
    decoded: list[str] = []
    start = at = 0
    for found in JSON_ESCAPE.finditer(line):
        decoded.append(line[at : found.start()])
        at = found.end()
        code = found[0][1:]
        if code == "n":
            parts.append(("".join(decoded), line[start : found.start()]))
            decoded, start = [], at
        else:
            decoded.append(_unescaped(code))
    decoded.append(line[at:])
    parts.append(("".join(decoded), line[start:]))
    # where a record starts behind a tool's prefix (`sglang-1  | [date`), or a fence
    records = [
        bool(
            FENCE.match(t)
            or LOGGED.search(t, 0, ANCHOR_WITHIN)
            or ANCHOR.search(t, 0, ANCHOR_WITHIN)
        )
        for t, _ in parts
    ]
    return parts if sum(records) >= MIN_ESCAPED_RECORDS and any(records[1:]) else None


def _escaped_paste(head: list[str]) -> bool:
    """Lines joined by a JSON string's `\\n` are most of what the input holds (one line of a
    log with `\\n` in a logged prompt is not: its neighbours outnumber what it holds)."""
    joined = other = 0
    for line in head:
        parts = escaped_lines(line) if "\\n" in line else None
        if parts is None:
            other += bool(line.strip())
        else:
            joined += len(parts)
    return joined > other


def _unescaped(code: str) -> str:
    if code[0] != "u":
        return JSON_ESCAPES[code]
    point = int(code[1:], 16)
    return "\ufffd" if 0xD800 <= point <= 0xDFFF else chr(point)


def _table(invisible: bool, quotes: bool) -> dict[int, str | None]:
    return {**(INVISIBLE if invisible else {}), **(TYPOGRAPHIC_QUOTES if quotes else {})}


def _shape(line: str) -> str:
    return DIGITS.sub("0", line[:SHAPE_CHARS])


def _record_start(prefixes: LinePrefixes) -> Callable[[str], bool]:
    """Whether a line begins as a line of its own: blank, as records begin (RECORD_START,
    ANCHOR), as other lines of the input begin, or with a tool's prefix."""
    outer = prefixes.forms[0].pattern if prefixes.forms else None

    def starts(line: str) -> bool:
        return (
            not line.strip()
            or bool(RECORD_START.match(line) or ANCHOR.match(line))
            or bool(outer is not None and outer.match(line))
        )

    return starts


def cut_width(lines: list[str], starts_record: Callable[[str], bool]) -> int | None:
    """The width a terminal cut the lines at, when the lines show one: the longest lines
    all end there, more of them than just short of it, and they run on into a next line
    that is no record of its own (or one cut inside its text at a terminal's usual width)."""
    lengths = [len(ln) for ln in lines if ln.strip()]
    width = max(lengths, default=0)
    if width < MIN_WRAP_WIDTH:
        return None
    at_width = lengths.count(width)
    near = sum(width - NEAR_WIDTH <= n < width for n in lengths)
    if at_width <= near:
        return None
    runs_on = [
        (line, after)
        for line, after in zip(lines, lines[1:], strict=False)
        if len(line) == width and not starts_record(after)
    ]
    # a cut's rest starts anywhere in a text; the same start after each is a record's
    if len({_shape(after) for _, after in runs_on}) >= MIN_CUT_LINES:
        return width
    if len(runs_on) != 1 or width not in TERMINAL_WIDTHS:
        return None
    line, after = runs_on[0]
    return width if INSIDE_TEXT.match(line[-1]) and not after[0].isspace() else None


class Rejoiner:
    """Lines repaired and rejoined: (number of the first line, text, the text as pasted when
    it differs); `count` is how many lines the input had."""

    def __init__(self, repairs: PasteRepairs, prefixes: LinePrefixes = NO_PREFIXES) -> None:
        self.repairs = repairs
        self.starts_record = _record_start(prefixes)
        self.count = 0

    def lines(self, raw_lines: Iterable[str]) -> Iterator[tuple[int, str, str | None]]:
        width = self.repairs.width
        held: tuple[int, str, list[str]] | None = None  # a cut line waiting for its rest
        for number, raw, as_pasted in self._split(raw_lines):
            shown = visible(raw)
            text = self.repairs.repair(shown)
            if held is not None:
                if not self.starts_record(text):
                    first, joined, pasted = held
                    pasted.append(as_pasted)
                    held = None
                    if len(text) == width:
                        held = (first, joined + text, pasted)
                    else:
                        yield first, joined + text, "\n".join(pasted)
                    continue
                first, joined, pasted = held
                held = None
                yield first, joined, _differs(pasted, joined)
            if width and len(text) == width:
                held = (number, text, [as_pasted])
                continue
            changed = text != shown or "\r" in raw or as_pasted is not raw
            yield number, text, (as_pasted if changed else None)
        if held is not None:
            first, joined, pasted = held
            yield first, joined, _differs(pasted, joined)

    def _split(self, raw_lines: Iterable[str]) -> Iterator[tuple[int, str, str]]:
        """(number, a line, its text as pasted): the lines a JSON string joined, apart."""
        repairs = self.repairs
        shaped = repairs.collapsed or repairs.unindented or repairs.bodies
        previous: str | None = None
        for number, raw in enumerate(raw_lines, start=1):
            self.count = number
            parts = escaped_lines(raw) if repairs.escaped_lines and "\\n" in raw else None
            if not shaped:
                if parts is None:
                    yield number, raw, raw
                else:
                    yield from ((number, text, pasted) for text, pasted in parts)
                continue
            for text, pasted in parts or [(raw, raw)]:
                pieces = split_collapsed(text) if repairs.collapsed else [text]
                for piece in pieces:
                    shown = indent_code(previous, piece) if repairs.unindented else piece
                    previous = piece.strip()
                    yield number, shown, (pasted if len(pieces) == 1 and shown is piece else raw)
                    body = opened_body(piece) if repairs.bodies else None
                    for opened in body.splitlines() if body else ():
                        yield number, opened, raw


def _differs(pasted: list[str], text: str) -> str | None:
    joined = "\n".join(pasted)
    return joined if joined != text else None
