"""Explaining a death: the log through the normal pipeline, the report printed.

When the server dies without being asked to, `loganalyze run` analyzes its log at once,
with the command as launched, and notes how the run ended in the report.
"""

from __future__ import annotations

import shlex
import sys

from analyzer.core.model import Report
from analyzer.engine.redact import redact_text
from analyzer.run.state import RunRequest
from analyzer.run.supervisor import Outcome


def explain(request: RunRequest, outcome: Outcome) -> Report:
    """The incident report of the log, with the command as launched."""
    from analyzer.pipeline import Options, analyze

    report = analyze(
        [str(request.log)],
        Options(command=shlex.join(request.argv), sglang_version=request.sglang_version),
    )
    report.warnings.append(f"loganalyze run: {redact_text(outcome.message)}")
    return report


def print_report(report: Report, colour: bool) -> None:
    from analyzer.formats.terminal import render_plain, render_rich

    if colour:
        from rich.console import Console

        render_rich(report, Console(highlight=False, soft_wrap=False))
        return
    sys.stdout.write(render_plain(report))
    sys.stdout.flush()
