"""The Markdown report: GitHub-flavoured, for `$GITHUB_STEP_SUMMARY`, PR comments and chat.

GitHub refuses a step summary over 1 MiB, so the report is rendered at decreasing levels of
detail until it fits: evidence first loses lines, then characters, then whole lines; long text
is cut last. The verdict and the incident table are never dropped. Log text goes into code
blocks whose fences are longer than any backtick run inside; other text is escaped, so a log
line cannot open a link, an image or raw HTML.
"""

from __future__ import annotations

from dataclasses import dataclass

import regex

from analyzer.core.model import Incident, Line, Report
from analyzer.formats.report_text import (
    command_origin,
    edit_texts,
    printable,
    prose,
    shows_tail,
    worst_severity,
)
from analyzer.nodes.node_text import incident_node, node_heading, node_lines

MARKDOWN_LIMIT = 1_000_000  # bytes; GitHub's step-summary limit is 1 MiB
MAX_TABLE_ROWS = 200
TAIL_LINES = 15  # as many as the terminal report shows
INLINE_SPECIAL = regex.compile(r"([\\`*_\[\]<>|~&!#])")
BACKTICKS = regex.compile(r"`+")


@dataclass(frozen=True)
class Detail:
    """How much of each incident to show; `None` means all of it."""

    evidence_lines: int | None
    line_chars: int | None
    text_chars: int | None
    detailed_incidents: int | None

    @property
    def shortened(self) -> bool:
        return any(
            v is not None
            for v in (
                self.evidence_lines,
                self.line_chars,
                self.text_chars,
                self.detailed_incidents,
            )
        )


LEVELS = (
    Detail(None, None, None, None),
    Detail(40, 1000, 4000, None),
    Detail(10, 300, 1000, None),
    Detail(3, 200, 400, 200),
    Detail(1, 160, 300, 50),
    Detail(0, 120, 200, 20),
)


def escape(text: str) -> str:
    """Inline Markdown that shows `text` literally: specials escaped, newlines as <br>."""
    text = INLINE_SPECIAL.sub(r"\\\1", printable(text))
    return text.replace("\r", "").replace("\n", "<br>")


def code_span(text: str) -> str:
    """An inline code span that holds any text, backticks included."""
    text = printable(text).replace("\n", " ")
    longest = max((len(m) for m in BACKTICKS.findall(text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or longest else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def code_block(text: str, info: str = "text") -> list[str]:
    longest = max((len(m) for m in BACKTICKS.findall(text)), default=0)
    fence = "`" * max(3, longest + 1)
    return [f"{fence}{info}", printable(text), fence]


def prose_markdown(text: str) -> str:
    """Explanation/advice text: `code` and --flags as code spans, the rest escaped."""
    return "".join(code_span(p.text) if p.code else escape(p.text) for p in prose(printable(text)))


def _cut(text: str, limit: int | None) -> str:
    if limit is None or len(text) <= limit:
        return text
    return text[:limit] + f" … ({len(text) - limit} more characters)"


def render_markdown(report: Report, limit: int = MARKDOWN_LIMIT) -> str:
    """The report as GFM, under `limit` bytes of UTF-8 (same report, same bytes)."""
    for detail in LEVELS:
        text = _render(report, detail)
        if len(text.encode("utf-8")) <= limit:
            return text
    return _hard_cut(text, limit)


def _hard_cut(text: str, limit: int) -> str:
    """Last resort for pathological reports: keep the head (verdict and table) and say so."""
    note = "\n\n> **Note:** the rest of this summary was cut to stay under GitHub's 1 MiB limit.\n"
    budget = max(limit - len(note.encode("utf-8")), 0)
    head = text.encode("utf-8")[:budget].decode("utf-8", errors="ignore")
    head = head[: head.rfind("\n")] if "\n" in head else head
    return head + note


def _render(report: Report, detail: Detail) -> str:
    out = _header(report)
    if detail.shortened:
        out += [
            "> **Note:** evidence and long text were shortened to keep this summary under 1 MiB;"
            " the HTML and JSON reports (`--html`, `--format json`) have everything.",
            "",
        ]
    out += _nodes(report)
    if report.incidents:
        out += _table(report.incidents)
    detailed = report.incidents[: detail.detailed_incidents]
    for index, incident in enumerate(detailed, start=1):
        out += _incident(index, incident, detail)
    hidden = len(report.incidents) - len(detailed)
    if hidden:
        out += [f"_{hidden} more incident{'s' if hidden != 1 else ''} not detailed here._", ""]
    if shows_tail(report) and report.last_lines:
        out += _tail(report.last_lines, detail)
    if report.warnings:
        out += ["#### Notes", ""]
        out += [f"- {escape(_cut(w, detail.text_chars))}" for w in report.warnings]
        out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


def _nodes(report: Report) -> list[str]:
    """A multi-node run: the root cause's node first, one line per node."""
    if not report.nodes:
        return []
    heading = f"#### Nodes: {escape(node_heading(report))}"
    return [heading, "", *(f"- {escape(line)}" for line in node_lines(report)), ""]


def _header(report: Report) -> list[str]:
    names = ", ".join(code_span(s.path) for s in report.inputs[:20]) or "no input"
    if len(report.inputs) > 20:
        names += f" and {len(report.inputs) - 20} more"
    catalog = f" · SGLang flag catalog {report.catalog_version}" if report.catalog_version else ""
    if not report.incidents:
        return [
            "## loganalyze: no incident",
            "",
            f"No failure recognised in {names}{catalog}.",
            "",
        ]
    count = len(report.incidents)
    worst = worst_severity(report) or ""
    plural = "incident" if count == 1 else "incidents"
    return [
        f"## loganalyze: {code_span(report.verdict)} ({count} {plural}, worst: {worst})",
        "",
        f"**Root cause:** {escape(report.incidents[0].title)}",
        "",
        f"Inputs: {names}{catalog}",
        "",
    ]


def _cell(code: str) -> str:
    """A code span inside a table cell: GFM splits cells on `|` even inside code."""
    return code.replace("|", "\\|")


def _table(incidents: list[Incident]) -> list[str]:
    out = ["| # | severity | class | incident | where |", "| --- | --- | --- | --- | --- |"]
    for index, incident in enumerate(incidents[:MAX_TABLE_ROWS], start=1):
        where = _cell(code_span(f"{incident.source}:{incident.line}"))
        if incident.ranks:
            where += " " + escape(", ".join(incident.ranks))
        title = escape(_cut(incident.title, 200))
        cls = _cell(code_span(incident.rule_class))
        out.append(f"| {index} | **{incident.severity}** | {cls} | {title} | {where} |")
    if len(incidents) > MAX_TABLE_ROWS:
        out.append(f"| … | | | {len(incidents) - MAX_TABLE_ROWS} more | |")
    return [*out, ""]


def _incident(index: int, incident: Incident, detail: Detail) -> list[str]:
    heading = (
        f"### {index}. {incident.severity.upper()} {code_span(incident.rule_class)}: "
        f"{escape(_cut(incident.title, detail.text_chars))}"
    )
    meta = [code_span(f"{incident.source}:{incident.line}")]
    if incident.ranks:
        meta.append("ranks " + escape(", ".join(incident.ranks)))
    if incident.attempt is not None:
        meta.append(f"attempt {incident.attempt}")
    if node := incident_node(incident):
        meta.append(escape(node))
    meta.append(f"rule {code_span(incident.rule)}")
    out = [heading, "", " · ".join(meta), ""]
    if incident.offending_flags:
        out += ["**Flags:** " + " ".join(code_span(f) for f in incident.offending_flags), ""]
    if incident.explanation:
        out += [prose_markdown(_cut(incident.explanation, detail.text_chars)), ""]
    if incident.advice:
        out += [f"- {prose_markdown(_cut(a, detail.text_chars))}" for a in incident.advice]
        out.append("")
    out += _commands(incident)
    out += _evidence(incident, detail)
    return out


def _commands(incident: Incident) -> list[str]:
    origin = command_origin(incident)
    origin_text = f" (original {escape(origin)})" if origin else ""
    if incident.command and incident.corrected_command:
        diff = "\n".join(
            [*_prefixed("- ", incident.command), *_prefixed("+ ", incident.corrected_command)]
        )
        edits = "; ".join(edit_texts(incident))
        out = [f"**Corrected command**{origin_text}:", "", *code_block(diff, "diff"), ""]
        if edits:
            out += [f"Edits: {escape(edits)}", ""]
        if incident.verification:
            out += [f"Verification: {escape(incident.verification.describe())}", ""]
        return out
    if incident.command:
        return [f"**Command**{origin_text}:", "", *code_block(incident.command, "shell"), ""]
    return []


def _prefixed(prefix: str, command: str) -> list[str]:
    return [prefix + line for line in command.splitlines() or [""]]


def _evidence(incident: Incident, detail: Detail) -> list[str]:
    lines = incident.evidence
    shown = _evidence_subset(lines, incident.line, detail.evidence_lines)
    if not shown:
        return []
    text = _numbered(shown, incident, detail.line_chars)
    left_out = len(lines) - len(shown)
    summary = f"Evidence: {len(shown)} line{'s' if len(shown) != 1 else ''}"
    if left_out:
        summary += f" ({left_out} left out here)"
    return [
        "<details>",
        f"<summary>{summary}</summary>",
        "",
        *code_block(text),
        "",
        "</details>",
        "",
    ]


def _evidence_subset(lines: list[Line], decisive: int, keep: int | None) -> list[Line]:
    """At most `keep` lines, always the decisive one, then its nearest neighbours."""
    if keep is None or len(lines) <= keep:
        return list(lines)
    ranked = sorted(lines, key=lambda ln: (ln.number != decisive, abs(ln.number - decisive)))
    chosen = {id(ln) for ln in ranked[: max(keep, 1)]}
    return [ln for ln in lines if id(ln) in chosen]


def _numbered(lines: list[Line], incident: Incident, line_chars: int | None) -> str:
    width = max(len(str(ln.number)) for ln in lines)
    out: list[str] = []
    previous: int | None = None
    for line in lines:
        if previous is not None and line.number > previous + 1:
            skipped = line.number - previous - 1
            out.append(f"{'⋯':>{width}} | ({skipped} line{'s' if skipped != 1 else ''} not shown)")
        text = printable(line.text)
        out.append(f"{line.number:>{width}} | {_cut(text, line_chars)}")
        span = incident.span
        if line.number == incident.line and span and span[1] <= len(text):
            if line_chars is None or span[1] <= line_chars:
                out.append(f"{'':>{width}} | {' ' * span[0]}{'^' * max(span[1] - span[0], 1)}")
        previous = line.number
    return "\n".join(out)


def _tail(lines: list[Line], detail: Detail) -> list[str]:
    keep = lines[-(TAIL_LINES if detail.evidence_lines is None else 5) :]
    width = max(len(str(ln.number)) for ln in keep)
    text = "\n".join(
        f"{ln.number:>{width}} | {_cut(printable(ln.text), detail.line_chars)}" for ln in keep
    )
    return [
        "<details>",
        f"<summary>Last {len(keep)} lines of the log</summary>",
        "",
        *code_block(text),
        "",
        "</details>",
        "",
    ]
