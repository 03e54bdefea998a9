"""Text pieces the shareable formats (HTML, Markdown, JUnit, GitHub) render alike.

Pure functions over the Report's strings, with no template engine, so the Markdown and CI paths
share them without importing jinja2.
"""

from __future__ import annotations

from dataclasses import dataclass

import regex

from analyzer.core.model import Incident, Report, severity_rank
from analyzer.formats.terminal import CONTROL, token_diff

MAX_UNBROKEN_WORD = 60
PROSE_CODE = regex.compile(r"`(?P<tick>[^`\n]+)`|(?<![\w-])(?P<flag>--[A-Za-z0-9][\w.-]*\w)")


@dataclass(frozen=True)
class DiffWord:
    """One word of a command in a diff; `keep` words must not wrap inside (a flag name
    broken at its hyphens reads as two flags)."""

    tag: str
    text: str
    keep: bool


@dataclass(frozen=True)
class ProsePart:
    """A run of explanation or advice text; `code` runs are --flags or `backticked` text."""

    text: str
    code: bool

    @property
    def keep(self) -> bool:
        return self.code and len(self.text) <= MAX_UNBROKEN_WORD


def printable(text: str) -> str:
    """Control characters become U+FFFD, one for one, so spans keep their offsets."""
    return CONTROL.sub("\ufffd", text)


def prose(text: str) -> list[ProsePart]:
    """Split text so `backticked` spans and --flags can render as code."""
    parts: list[ProsePart] = []
    position = 0
    for found in PROSE_CODE.finditer(text):
        if found.start() > position:
            parts.append(ProsePart(text[position : found.start()], False))
        parts.append(ProsePart(found["tick"] or found["flag"], True))
        position = found.end()
    if position < len(text):
        parts.append(ProsePart(text[position:], False))
    return parts


def diff_columns(original: str, corrected: str) -> tuple[list[DiffWord], list[DiffWord]]:
    """The word diff as two columns: the original with removals, the correction with additions."""
    left: list[DiffWord] = []
    right: list[DiffWord] = []
    for tag, text in token_diff(printable(original), printable(corrected)):
        words = [DiffWord(tag, w, len(w) <= MAX_UNBROKEN_WORD) for w in text.split(" ")]
        if tag in (" ", "-"):
            left.extend(words)
        if tag in (" ", "+"):
            right.extend(words)
    return left, right


def edit_texts(incident: Incident) -> list[str]:
    """Each edit in words, as the reader checks it against the diff."""
    out = []
    for edit in incident.edits:
        if edit.op == "rename":
            value = f" {edit.value}" if edit.value else ""
            out.append(f"rename {edit.flag} → {edit.to}{value}")
        elif edit.op == "remove":
            out.append(f"remove {edit.flag}")
        else:
            value = f" {edit.value}" if edit.value is not None else ""
            out.append(f"{edit.op} {edit.flag}{value}")
    return out


COMMAND_SOURCES = {
    "user": "given with --command",
    "log": "found in the log",
    "transcript": "found in the session transcript",
    "reconstructed": "rebuilt from SGLang's server_args record",
}


def command_origin(incident: Incident) -> str:
    return COMMAND_SOURCES.get(incident.command_source or "", incident.command_source or "")


def worst_severity(report: Report) -> str | None:
    """The most severe incident's severity (fatal > error > warning > info)."""
    if not report.incidents:
        return None
    return min((i.severity for i in report.incidents), key=severity_rank)


def at_least(severity: str, threshold: str) -> bool:
    """True when `severity` is `threshold` or worse."""
    return severity_rank(severity) <= severity_rank(threshold)


def shows_tail(report: Report) -> bool:
    """The last lines matter when nothing, or nothing specific, explains the failure."""
    return not report.incidents or any(
        i.rule_class in ("unknown", "silent_death") for i in report.incidents
    )
