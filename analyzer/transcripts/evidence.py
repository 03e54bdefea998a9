"""Evidence lines of session findings: a transcript's numbered line as a report Line,
the span a pattern marks in it, lines without repeats, the text of a flag diff."""

from __future__ import annotations

import regex

from analyzer.core.model import FlagChange, Line
from analyzer.transcripts.command_outputs import NumberedLine


def evidence_line(source: str, numbered: NumberedLine, ref: str | None) -> Line:
    number, text = numbered
    return Line(source, number, text, text, ref=ref)


def pattern_span(text: str, pattern: str) -> tuple[int, int] | None:
    found = regex.search(pattern, text)
    return (found.start(), found.end()) if found else None


def unique_lines(lines: list[Line]) -> list[Line]:
    seen: set[tuple[int, str | None]] = set()
    kept = []
    for line in lines:
        key = (line.number, line.ref)
        if key not in seen:
            seen.add(key)
            kept.append(line)
    return kept


def diff_text(changes: list[FlagChange]) -> str:
    parts = []
    for change in changes:
        if change.before is None:
            parts.append(f"added {change.flag} {change.after}".replace(" (set)", ""))
        elif change.after is None:
            parts.append(f"removed {change.flag}")
        else:
            parts.append(f"{change.flag} {change.before} -> {change.after}")
    return "; ".join(parts)
