"""The HTML report: one self-contained file to attach to a bug or a CI run.

Everything the page needs is inline (CSS, the few lines of JS) and a Content-Security-Policy
forbids any fetch, so it works opened from disk and never phones home. Jinja2 autoescapes every
value; the only unescaped text is our own script, admitted by its hash in the CSP, so even a
log line that looked like markup could not run. This module turns the Report into plain view
data (evidence segments, diff columns, timeline); the template only lays it out.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import hashlib

import jinja2
from markupsafe import Markup

from analyzer import __version__
from analyzer.core.model import SCHEMA_VERSION, Incident, Line, Report
from analyzer.formats.report_text import (
    DiffWord,
    command_origin,
    diff_columns,
    edit_texts,
    printable,
    prose,
    shows_tail,
    worst_severity,
)
from analyzer.nodes.node_text import node_heading, node_lanes

MAX_LINE_CHARS = 2000


@dataclasses.dataclass(frozen=True)
class EvidenceRow:
    """One evidence line split around the highlighted span, ready for the template."""

    number: int
    before: str
    marked: str
    after: str
    decisive: bool
    gap_before: int
    cut: int
    usage: bool
    ref: str | None = None


@dataclasses.dataclass
class IncidentView:
    index: int
    anchor: str
    incident: Incident
    rows: list[EvidenceRow]
    usage_rows: list[EvidenceRow]
    usage_hidden: int
    original: list[DiffWord] = dataclasses.field(default_factory=list)
    corrected: list[DiffWord] = dataclasses.field(default_factory=list)
    edits: list[str] = dataclasses.field(default_factory=list)
    command_words: list[DiffWord] = dataclasses.field(default_factory=list)
    command_origin: str = ""
    timestamp: str | None = None

    @property
    def decisive(self) -> EvidenceRow | None:
        return next((r for r in self.rows if r.decisive), None)


@dataclasses.dataclass(frozen=True)
class TimelineEntry:
    anchor: str
    index: int
    severity: str
    rule_class: str
    title: str
    where: str
    attempt: int | None
    timestamp: str | None


def evidence_rows(incident: Incident) -> list[EvidenceRow]:
    """The evidence lines with the matched span split out and the gaps between them counted."""
    rows: list[EvidenceRow] = []
    previous: int | None = None
    for line in incident.evidence:
        gap = line.number - previous - 1 if previous is not None else 0
        rows.append(_row(line, incident, max(gap, 0)))
        previous = line.number
    return rows


def _row(line: Line, incident: Incident, gap: int) -> EvidenceRow:
    text = printable(line.text)
    shown, cut = text[:MAX_LINE_CHARS], max(len(text) - MAX_LINE_CHARS, 0)
    decisive = line.number == incident.line and line.source == incident.source
    start = end = 0
    if decisive and incident.span:
        start, end = (min(max(p, 0), len(shown)) for p in incident.span)
    return EvidenceRow(
        number=line.number,
        before=shown[:start] if end > start else shown,
        marked=shown[start:end] if end > start else "",
        after=shown[end:] if end > start else "",
        decisive=decisive,
        gap_before=gap,
        cut=cut,
        usage=line.body.startswith("usage: "),
        ref=line.ref,
    )


def incident_view(index: int, incident: Incident) -> IncidentView:
    rows = evidence_rows(incident)
    usage_rows = [r for r in rows if r.usage and not r.decisive]
    # The usage dump runs from its `usage:` line to the line before argparse's error.
    usage_hidden = 0
    for row in usage_rows:
        after = [r for r in rows if r.number > row.number]
        usage_hidden += after[0].gap_before if after else 0
    kept = [r for r in rows if r not in usage_rows]
    if usage_rows and kept:
        kept[0] = dataclasses.replace(kept[0], gap_before=0)
    view = IncidentView(index, f"incident-{index}", incident, kept, usage_rows, usage_hidden)
    if incident.command and incident.corrected_command:
        view.original, view.corrected = diff_columns(incident.command, incident.corrected_command)
    elif incident.command:
        view.command_words, _ = diff_columns(incident.command, incident.command)
    view.edits = edit_texts(incident)
    view.command_origin = command_origin(incident)
    decisive = next((ln for ln in incident.evidence if ln.number == incident.line), None)
    view.timestamp = decisive.timestamp if decisive else None
    return view


def timeline(views: list[IncidentView], sources: list[str]) -> list[TimelineEntry]:
    """Incidents in the order they happened: input, attempt, then line (the report lists them
    root cause first, which is not the order a reader replays a run in)."""
    position = {s: i for i, s in enumerate(sources)}
    ordered = sorted(
        views,
        key=lambda v: (
            position.get(v.incident.source, len(position)),
            v.incident.attempt or 0,
            v.incident.line,
            v.index,
        ),
    )
    return [
        TimelineEntry(
            v.anchor,
            v.index,
            v.incident.severity,
            v.incident.rule_class,
            printable(v.incident.title),
            f"{v.incident.source}:{v.incident.line}",
            v.incident.attempt,
            v.timestamp,
        )
        for v in ordered
    ]


@dataclasses.dataclass(frozen=True)
class RunView:
    """One log's decode metrics: the summary rows and its charts (SVG we drew, escaped)."""

    source: str
    rows: list[tuple[str, str]]
    charts: list[Markup]


def run_views(report: Report) -> list[RunView]:
    if not report.runs:
        return []
    from analyzer.formats.metrics_table import decode_rows
    from analyzer.formats.svg_chart import metrics_charts

    views = []
    for run in report.runs:
        rows = decode_rows(run)
        ready = run.startup.time_to_ready_s
        if ready is not None:
            rows.append(("ready after", f"{ready:.1f} s"))
        charts = [Markup(svg) for svg in metrics_charts(run)]
        views.append(RunView(printable(run.source), rows, charts))
    return views


def _wants_timeline(report: Report) -> bool:
    attempts = {i.attempt for i in report.incidents if i.attempt is not None}
    return len(report.incidents) > 1 or len(attempts) > 1


@functools.cache
def template_environment() -> jinja2.Environment:
    """The package's templates, autoescaped, strict about missing values."""
    return jinja2.Environment(
        loader=jinja2.PackageLoader("analyzer", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


@functools.cache
def _script(env: jinja2.Environment) -> tuple[str, str]:
    """Our script and its CSP hash: only this exact text may run in the page."""
    source, _, _ = env.loader.get_source(env, "report.js")  # type: ignore[union-attr]
    digest = base64.b64encode(hashlib.sha256(source.encode("utf-8")).digest()).decode("ascii")
    return source, digest


def render_html(report: Report) -> str:
    """The whole report as one HTML document (same report, same bytes)."""
    env = template_environment()
    script, script_hash = _script(env)
    views = [incident_view(i, inc) for i, inc in enumerate(report.incidents, start=1)]
    sources = [s.path for s in report.inputs]
    template = env.get_template("report.html.j2")
    lanes, axis_start, axis_end = node_lanes(report)
    return template.render(
        lanes=lanes,
        axis=(axis_start, axis_end),
        node_heading=node_heading(report) if report.nodes else "",
        report=report,
        views=views,
        timeline=timeline(views, sources) if _wants_timeline(report) else [],
        worst=worst_severity(report),
        tail=[_row(ln, _NO_INCIDENT, 0) for ln in report.last_lines] if shows_tail(report) else [],
        runs=run_views(report),
        version=__version__,
        schema_version=SCHEMA_VERSION,
        script=Markup(script),
        script_hash=script_hash,
        printable=printable,
        prose=lambda text: prose(printable(text)),
    )


# Tail lines are rendered with the evidence row builder; no line of theirs is decisive.
_NO_INCIDENT = Incident("", "", "", "", "", -1, [], [], None, [], "", [])
