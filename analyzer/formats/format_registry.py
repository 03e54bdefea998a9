"""Every report format, one entry each: `--format`'s choices and the files `ci` writes.

An entry names its renderer as "module:function" and imports it only when that format is
rendered, so only the HTML path imports jinja2 and no report format imports numpy or pandas
(tests/test_reports.py checks both). A new format is one entry here and its renderer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from analyzer.core.model import Report


@dataclass(frozen=True)
class ReportFormat:
    """One output format of the analysis report."""

    name: str
    renderer: str  # "module:function", function(report) -> str
    description: str
    share: bool = False  # a file `loganalyze ci --NAME FILE` writes
    extension: str | None = None  # of its files in the CI templates and snapshots
    takes_fail_on: bool = False  # the renderer's second argument is the --fail-on severity
    console: str | None = None  # "module:function(report, console)": a colour terminal's view
    reads_metrics: bool = False  # charts the decode metrics, so the analysis must read them

    def render(self, report: Report, fail_on: str) -> str:
        render = _load(self.renderer)
        return render(report, fail_on) if self.takes_fail_on else render(report)

    def show(self, report: Report) -> None:
        """Print to a colour terminal with the console renderer."""
        from rich.console import Console

        assert self.console is not None, self.name
        _load(self.console)(report, Console(highlight=False, soft_wrap=False))


def _load(target: str) -> Callable:
    module, function = target.split(":")
    return getattr(import_module(module), function)


# In the order `--format` lists them.
REPORT_FORMATS = {
    entry.name: entry
    for entry in (
        ReportFormat(
            "terminal", "analyzer.formats.terminal:render_plain",
            "rich panels on a colour terminal, plain text otherwise",
            console="analyzer.formats.terminal:render_rich",
        ),
        ReportFormat(
            "plain", "analyzer.formats.terminal:render_plain",
            "the terminal report as plain text", extension="txt",
        ),
        ReportFormat(
            "json", "analyzer.formats.json_report:render_json",
            "the machine format of record (docs/json-schema.md)", share=True, extension="json",
        ),
        ReportFormat(
            "html", "analyzer.formats.html:render_html",
            "one self-contained page, with charts of the decode metrics",
            share=True, extension="html", reads_metrics=True,
        ),
        ReportFormat(
            "markdown", "analyzer.formats.markdown:render_markdown",
            "GitHub-flavoured, for step summaries and PR comments", share=True, extension="md",
        ),
        ReportFormat(
            "junit", "analyzer.formats.junit:render_junit",
            "JUnit XML: one testcase per incident", share=True, extension="xml",
            takes_fail_on=True,
        ),
        ReportFormat(
            "github", "analyzer.formats.github:render_annotations",
            "GitHub workflow-command annotations", extension="txt",
        ),
        ReportFormat(
            "command", "analyzer.formats.terminal:render_command",
            "only the root cause's corrected command, for scripts",
        ),
    )
}  # fmt: skip


def report_format(name: str) -> ReportFormat:
    try:
        return REPORT_FORMATS[name]
    except KeyError:
        raise ValueError(f"unknown report format {name!r}") from None
