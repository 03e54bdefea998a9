"""Scan the log text a transcript shows exactly as a log file is scanned.

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

from analyzer.core.model import InputSummary, ScannedLog, UsageDump
from analyzer.engine.normalize import NO_PREFIXES, SAMPLE_LINES
from analyzer.engine.paste import Rejoiner, read_paste
from analyzer.engine.scan import ARGPARSE_ERROR, Scanner, visible_lines
from analyzer.sglang.log_format import split_prefix
from analyzer.transcripts.session import LogView

SGLANG_PROGRAMS = ("sglang", "launch_server")


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
