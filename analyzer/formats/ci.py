"""`loganalyze ci`: the post-mortem step a CI job runs after a server launch failed.

It analyzes the logs, writes the report files asked for, appends the Markdown summary to
`$GITHUB_STEP_SUMMARY`, prints GitHub annotations when `GITHUB_ACTIONS=true`, and turns the
worst severity into the exit code (`--fail-on`). Renderers come from the format registry,
which imports only those of the formats asked for: a run without `--html` never imports jinja2.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from analyzer.core.model import Report
from analyzer.core.output import write_output
from analyzer.formats.format_registry import report_format
from analyzer.formats.report_text import at_least

EXIT_CLEAN = 0
EXIT_FAILED = 1
DEFAULT_FAIL_ON = "error"


def write_reports(
    report: Report, targets: Mapping[str, Path | None], inputs: list[str], fail_on: str
) -> list[Path]:
    """Write each requested format to its file (see core/output.py; never over an input):
    the share formats of formats/format_registry.py."""
    written = []
    for format_name, path in targets.items():
        if path is None:
            continue
        entry = report_format(format_name)
        if not entry.share:
            raise ValueError(f"{format_name} is not a report file format")
        write_output(path, entry.render(report, fail_on), inputs)
        written.append(path)
    return written


def failing(report: Report, fail_on: str) -> bool:
    """True when an incident is of severity `fail_on` or worse."""
    return any(at_least(i.severity, fail_on) for i in report.incidents)


@dataclass
class CiRun:
    """What `loganalyze ci` was asked to do, beyond the analysis itself."""

    inputs: list[str]
    reports: dict[str, Path | None] = field(default_factory=dict)
    fail_on: str = DEFAULT_FAIL_ON
    summary: bool = True


def post_mortem(
    report: Report,
    run: CiRun,
    environ: Mapping[str, str] | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Publish the report the ways CI reads it; return the exit code."""
    environ = os.environ if environ is None else environ
    out = out or sys.stdout
    err = err or sys.stderr
    from analyzer.formats.terminal import render_plain

    out.write(render_plain(report))
    for path in write_reports(report, run.reports, run.inputs, run.fail_on):
        err.write(f"loganalyze: wrote {path}\n")
    summary_file = environ.get("GITHUB_STEP_SUMMARY")
    if run.summary and summary_file:
        _append_summary(report, Path(summary_file), err)
    if environ.get("GITHUB_ACTIONS") == "true":
        from analyzer.formats.github import render_annotations

        workspace = Path(environ.get("GITHUB_WORKSPACE") or os.getcwd())
        out.write(render_annotations(report, workspace))
    return EXIT_FAILED if failing(report, run.fail_on) else EXIT_CLEAN


def _append_summary(report: Report, path: Path, err: TextIO) -> None:
    """Append to the step summary within what is left of GitHub's 1 MiB for this step.

    A summary that cannot be written is a warning, not a failure: the verdict and the exit
    code matter more than the summary."""
    from analyzer.formats.markdown import MARKDOWN_LIMIT, render_markdown

    try:
        used = path.stat().st_size if path.exists() else 0
        budget = max(MARKDOWN_LIMIT - used, 4096)
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(("\n" if used else "") + render_markdown(report, budget))
    except OSError as exc:
        err.write(f"loganalyze: warning: cannot append to {path} ({exc.strerror or exc})\n")
