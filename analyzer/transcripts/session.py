"""What a session saw of each SGLang launch: the attempts, their log views and observations.

Plain data, built by attempts.py from the transcript's events and read by diagnose.py and
the pipeline; the evidence lines of session findings; and each log view scanned exactly as
a log file is scanned.

Each look at a log (a launch's own output, `tail -n 40 run.log`, `grep -n error run.log`)
is fed to the same Scanner as a log file, with the lines numbered and referenced into the
transcript, so the same rules, links and fixes apply and the evidence points at the
transcript. One thing differs: a `tail` or `grep` often starts after argparse's
`usage: ...` line and shows only the end of the dump and its `error:` line. The scanner
needs the `usage:` line to see a dump, so a view cut that way gets the dump it shows.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import regex

from analyzer.core.model import FlagChange, InputSummary, Line, ScannedLog, UsageDump
from analyzer.engine.normalize import NO_PREFIXES, SAMPLE_LINES
from analyzer.engine.paste import Rejoiner, read_paste
from analyzer.engine.scan import ARGPARSE_ERROR, READY_MARKER, Scanner, visible_lines
from analyzer.engine.survival import SERVING
from analyzer.sglang.launch_command import LaunchCommand
from analyzer.sglang.log_format import split_prefix
from analyzer.transcripts import shell
from analyzer.transcripts.command_outputs import NumberedLine
from analyzer.transcripts.events import ShellCall

# the ready line, and any sign it served: batches run, requests answered
READY_SIGNS = (READY_MARKER, "Uvicorn running on", *SERVING)
SGLANG_PROGRAMS = ("sglang", "launch_server")


@dataclass
class LogView:
    """Log text the session saw for an attempt: the launch's own output or a later look."""

    how: str
    command: str
    lines: list[NumberedLine]
    ref: str | None
    timestamp: str | None
    partial: bool
    seq: int = 0  # order among the attempt's views and observations


@dataclass
class Observation:
    """One diagnostic fact, with the transcript lines it rests on.

    kind: ls | processes | gpus | health | kill | kernel_kill | shell_error | user
    """

    kind: str
    data: Any
    lines: list[NumberedLine]
    ref: str | None
    timestamp: str | None
    command: str = ""
    command_line: NumberedLine | None = None
    seq: int = 0  # order among the attempt's views and observations


@dataclass
class Launch:
    """Where and how an attempt was launched.

    `text` is what the session ran (the statement holding the launch; for a script, the
    script's launch line); `parsed` is SGLang's command read from it (None when the shell
    text is too broken to read one); `problems` are shell readings nobody meant.
    """

    call: ShellCall
    text: str
    parsed: LaunchCommand | None
    log_path: str | None
    background: bool
    problems: list[shell.Problem]
    lines: list[tuple[NumberedLine, str | None]]
    ref: str | None
    script: str | None = None
    interpreter: str | None = None


@dataclass
class Attempt:
    number: int
    launch: Launch
    views: list[LogView] = field(default_factory=list)
    observations: list[Observation] = field(default_factory=list)
    gpus_before: Observation | None = None
    dropped_views: int = 0

    @property
    def timestamp(self) -> str | None:
        return self.launch.call.timestamp

    def launch_lines(self, source: str) -> list[Line]:
        """The transcript lines of the launch command (ref: the record's command)."""
        return [Line(source, n, t, t, ref=ref) for (n, t), ref in self.launch.lines]

    def of_kind(self, kind: str) -> list[Observation]:
        return [o for o in self.observations if o.kind == kind]

    def ready(self) -> bool:
        """The server came up: its ready line was seen or a health poll answered."""
        return self.last_alive() is not None

    def last_alive(self) -> int | None:
        """The `seq` of the last view or health poll that shows the server up and serving."""
        alive = [
            v.seq
            for v in self.views
            if any(sign in text for _, text in v.lines for sign in READY_SIGNS)
        ]
        alive += [o.seq for o in self.of_kind("health") if o.data.ok]
        return max(alive, default=None)


@dataclass
class ClientFailure:
    """A client the session ran (or the user pasted) that failed: its name, how, the lines.

    `unreachable`: it only could not reach the server, which makes it the client's failure
    only if the server answered after it (`seq`); `refused`: the server answered that the
    request was wrong. `attempt` is the launch it ran under."""

    client: str
    what: str
    decisive: NumberedLine
    lines: list[NumberedLine]
    ref: str | None
    command: str = ""
    unreachable: bool = False
    refused: bool = False
    attempt: int | None = None
    seq: int = 0


@dataclass
class Session:
    attempts: list[Attempt]
    notes: list[str]
    made_dirs: set[str]
    # versions the session's commands printed (pip, sglang.__version__), in order
    stated_versions: list[tuple[str, Line]] = field(default_factory=list)
    clients: list[ClientFailure] = field(default_factory=list)
    # the `seq` of the last poll the server answered while the session had launched nothing
    answered: int | None = None
    # SGLang log text the session saw while it had launched nothing it could read: a log
    # looked at, a container's logs, a script's output
    loose_views: list[LogView] = field(default_factory=list)


# ---- evidence lines of session findings


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


# ---- a log view, scanned as a log file is


def scan_view(view: LogView, source: str, triggers: Sequence[str]) -> ScannedLog:
    """A ScannedLog of one view; its lines keep their transcript numbers and ref."""
    scanner = Scanner(InputSummary(source, kind="transcript_view"), triggers)
    reading = read_paste(visible_lines([text for _, text in view.lines[:SAMPLE_LINES]]))
    prefixes = reading.prefixes
    strip = prefixes.body_span if prefixes is not NO_PREFIXES else None
    numbers = [number for number, _ in view.lines]
    # a repaired line (engine/paste.py) keeps the transcript number of its first line
    rejoiner = Rejoiner(reading.repairs, prefixes)
    for index, text, pasted in rejoiner.lines(text for _, text in view.lines):
        line = split_prefix(source, numbers[index - 1], text, strip, pasted)
        scanner.feed(dataclasses.replace(line, ref=view.ref))
    log = scanner.finish()
    # a view is a piece (a tail, a grep, one output chunk): a traceback cut before its
    # exception there is the piece's edge, not the paste's
    log.tracebacks = [t for t in log.tracebacks if t.exception_type]
    if view.partial and all(d.first is d.error for d in log.usage_dumps):
        _recover_cut_usage(log, view, source, strip)
    return log


def _recover_cut_usage(
    log: ScannedLog, view: LogView, source: str, strip: Callable[[str], tuple[int, int, int]] | None
) -> None:
    """The usage dump whose `usage:` line the view cut off (only SGLang's parser), in place
    of the dump of its error line alone."""
    lines = [
        dataclasses.replace(split_prefix(source, n, t, strip), ref=view.ref) for n, t in view.lines
    ]
    for index, line in enumerate(lines):
        error = ARGPARSE_ERROR.match(line.body)
        if not error or not any(p in error["prog"] for p in SGLANG_PROGRAMS):
            continue
        start = index
        while start > 0 and _usage_continuation(lines[start - 1].body):
            start -= 1
        kept = [d for d in log.usage_dumps if d.error is None or d.error.number != line.number]
        log.usage_dumps[:] = [*kept, UsageDump(lines[start], line, index - start + 1)]
        return


def _usage_continuation(body: str) -> bool:
    stripped = body.strip()
    return body[:1].isspace() and stripped.startswith("[") or stripped.startswith("usage:")
