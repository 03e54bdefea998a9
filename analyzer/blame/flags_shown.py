"""The flags an input's own lines show on, for an input with no launch command and no
`server_args=ServerArgs(...)` record (blame/fault_flags.py reads them as set).

A line SGLang logs only when a flag is set (sglang/flag_lines.py: `DP attention is enabled.
The chunked prefill size is adjusted to ...`) says the flag is on. Nothing here runs while
the input is scanned: the map is loaded, and the input searched for its messages' anchors
(a second read, at the literal scan's speed), only when an incident's flags are wanted and
no command is known; once per input.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from analyzer.core.model import Line, Traceback
from analyzer.core.read import MAX_LINE_BYTES, TextInput
from analyzer.engine.literal_scan import LiteralFinder

if TYPE_CHECKING:
    from analyzer.sglang.flag_lines import FlagLines


@dataclass(frozen=True)
class Shown:
    """A flag a line shows on, and the message of SGLang's (`site`) that line is."""

    flag: str
    line: Line
    site: str


class FlagsShown:
    """The flags an input shows on, searched for on first use."""

    def __init__(self, version: str | None, read: Callable[[FlagLines], Iterable[Line]]) -> None:
        self.version = version
        self._read = read
        self._found: list[Shown] | None = None

    def before(self, number: int) -> dict[str, Shown]:
        """Flag -> the first line before line `number` that shows it on."""
        if self._found is None:
            # imported here: an input whose command is known never loads the map
            from analyzer.sglang.flag_lines import flag_lines_for

            lines = flag_lines_for(self.version)
            self._found = [] if lines is None else _shown(lines, self._read(lines))
        shown: dict[str, Shown] = {}
        for item in self._found:
            if item.line.number < number:
                shown.setdefault(item.flag, item)
        return shown


def _shown(lines: FlagLines, read: Iterable[Line]) -> list[Shown]:
    found = []
    for line in read:
        for entry in lines.flags_shown(line.text):
            found.extend(Shown(flag, line, entry.site) for flag in entry.flags)
    return found


def shown_in_input(text_input: TextInput, version: str | None) -> FlagsShown:
    """For a file: read again, deciding only the lines that hold a message's anchor.
    Standard input was read once, by the scan: it shows nothing here."""

    def read(lines: FlagLines) -> Iterable[Line]:
        if text_input.file is None:
            return []
        finder = LiteralFinder(lines.anchors)
        return _anchored_lines(text_input, finder)

    return FlagsShown(version, read)


def shown_in_lines(lines: list[tuple[int, str]], source: str, version: str | None) -> FlagsShown:
    """For log text already in memory (a transcript's view of a log: numbered lines)."""
    return FlagsShown(version, lambda _: (Line(source, n, text, text) for n, text in lines))


def _anchored_lines(text_input: TextInput, finder: LiteralFinder) -> Iterator[Line]:
    """The lines of the input holding one of the finder's literals, numbered."""
    number, carry = 1, b""
    for chunk in (*text_input.chunks(), b"\n"):
        block = carry + chunk
        cut = block.rfind(b"\n") + 1
        block, carry = block[:cut], block[cut:][:MAX_LINE_BYTES]
        position = 0
        for end in sorted(set(finder.ends(memoryview(block)))):
            start = block.rfind(b"\n", 0, end) + 1
            if start < position:
                continue
            number += block.count(b"\n", position, start)
            stop = block.find(b"\n", end)
            raw = block[start : len(block) if stop < 0 else stop][:MAX_LINE_BYTES]
            text = raw.rstrip(b"\r").decode("utf-8", errors="replace")
            yield Line(text_input.path, number, text, text)
            position = start
        number += block.count(b"\n", position)


def with_shown(
    explanation: str, flags: list[str], shown: FlagsShown | None, traceback: Traceback | None
) -> str:
    """The explanation, with the lines that showed offending `flags` on (no command known)."""
    if shown is None or traceback is None or not flags:
        return explanation
    on = shown.before(traceback.first.number)
    said = [
        f"line {s.line.number} shows {flag} on (SGLang logs `{s.line.text.strip()[:120]}` "
        f"only with it set, {s.site.split(':')[0]})"
        for flag in flags
        if (s := on.get(flag)) is not None
    ]
    if not said:
        return explanation
    return f"{explanation} No launch command is known: {'; '.join(said)}.".strip()
