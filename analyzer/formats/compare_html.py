"""`loganalyze compare --format html`: the comparison as one self-contained page.

The same table, verdict and findings as the plain text (built by metrics_table, so the
two never disagree), plus every run's throughput and accept length on shared charts.
No script at all, and a Content-Security-Policy that forbids any fetch; Jinja2
autoescapes every value, the only unescaped text being the SVG that svg_chart drew
(which escapes what it writes).
"""

from __future__ import annotations

from markupsafe import Markup

from analyzer import __version__
from analyzer.core.model import SCHEMA_VERSION
from analyzer.formats.html import template_environment
from analyzer.formats.metrics_table import (
    CONFIG_LABELS,
    compare_header,
    compare_row,
    is_number,
    verdict_lines,
)
from analyzer.formats.report_text import printable
from analyzer.formats.svg_chart import comparison_charts
from analyzer.metrics.compare import Comparison


def render_compare_html(comparison: Comparison) -> str:
    """The comparison page (same comparison, same bytes)."""
    names = [f"run {i}" for i in range(1, len(comparison.runs) + 1)]
    header = compare_header(comparison)
    rows = [compare_row(comparison, i) for i in range(len(comparison.runs))]
    return (
        template_environment()
        .get_template("compare.html.j2")
        .render(
            comparison=comparison,
            differs=[CONFIG_LABELS[c] for c in comparison.columns],
            header=["#", *header],
            rows=[
                [(name, False), (row[0], False), *((c, is_number(c)) for c in row[1:])]
                for name, row in zip(names, rows, strict=True)
            ],
            best=comparison.best,
            verdicts=verdict_lines(comparison),
            charts=[Markup(svg) for svg in comparison_charts(comparison.runs, names)],
            printable=printable,
            version=__version__,
            schema_version=SCHEMA_VERSION,
        )
    )
