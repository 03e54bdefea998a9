"""Secrets out of reports: tokens, API keys and URL passwords become `***`.

Applied once to the finished Report, so every format is redacted alike
(`--no-redact` skips it). Only the report changes; inputs are never touched.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from analyzer.core.lazy_pattern import LazyPattern
from analyzer.core.model import (
    Alternative,
    Attempt,
    Edit,
    FlagChange,
    Incident,
    InputSummary,
    Line,
    Report,
    Verification,
)

if TYPE_CHECKING:
    from analyzer.metrics.compare import Comparison
    from analyzer.metrics.results import RunMetrics

MASK = "***"
# Each pattern keeps group `keep` and masks group `secret`; no look-behinds, so a
# 64 KiB line costs one linear pass per pattern. Each comes with the literals one of which
# every match holds (`fold`: looked for in the lowercased text), so a string without
# them is passed over and a report without secrets never compiles a pattern.
SECRET_PATTERNS = (
    (("hf_",), False, LazyPattern(r"(?P<keep>)(?P<secret>\bhf_[A-Za-z0-9]{16,})")),
    (("sk-",), False, LazyPattern(r"(?P<keep>)(?P<secret>\bsk-[A-Za-z0-9_\-]{16,})")),
    (("bearer",), True, LazyPattern(r"(?i)(?P<keep>\bBearer\s+)(?P<secret>[A-Za-z0-9._~+/\-]+=*)")),
    (
        ("api-key",),
        False,
        LazyPattern(r"(?P<keep>--(?:[\w-]*-)?api-key(?:=|\s+))(?P<secret>'[^']*'|\"[^\"]*\"|\S+)"),
    ),
    (("://",), False, LazyPattern(r"(?P<keep>://[^/\s:@]+:)(?P<secret>[^@\s/]+)(?=@)")),
    (
        ("TOKEN", "SECRET", "PASSWORD", "API_KEY", "ACCESS_KEY"),
        False,
        LazyPattern(
            r"(?P<keep>(?<![\w-])[A-Z0-9_]*(?:TOKEN|SECRET|PASSWORD|API_KEY|ACCESS_KEY)[A-Z0-9_]*=)"
            r"(?P<secret>'[^']*'|\"[^\"]*\"|\S+)"
        ),
    ),
    (
        ("api_key", "token", "password"),
        True,
        LazyPattern(
            r"(?i)(?P<keep>['\"]?(?:api_key|token|password)['\"]?\s*[:=]\s*)(?P<secret>'[^']+')"
        ),
    ),
)


def redact_text(text: str) -> str:
    """Mask every secret in one string."""
    folded = text.lower()
    for hints, fold, pattern in SECRET_PATTERNS:
        if any(hint in (folded if fold else text) for hint in hints):
            text = pattern.sub(lambda m: m["keep"] + MASK, text)
            folded = text.lower()
    return text


def redact_report(report: Report) -> Report:
    """A copy of the report with secrets masked in every string it will render."""
    return dataclasses.replace(
        report,
        incidents=[redact_incident(i) for i in report.incidents],
        last_lines=[_line(ln) for ln in report.last_lines],
        inputs=[_summary(s) for s in report.inputs],
        warnings=[redact_text(w) for w in report.warnings],
        attempts=[_attempt(a) for a in report.attempts],
        runs=[redact_run(r) for r in report.runs],
    )


def redact_run(run: RunMetrics) -> RunMetrics:
    """A copy of one run's metrics with secrets masked (paths, config, notes, lines)."""
    return dataclasses.replace(
        run,
        source=redact_text(run.source),
        config={k: _maybe(v) for k, v in run.config.items()},
        notes=[redact_text(n) for n in run.notes],
        first_decode=_line(run.first_decode) if run.first_decode else None,
    )


def redact_comparison(comparison: Comparison) -> Comparison:
    return dataclasses.replace(
        comparison,
        runs=[redact_run(r) for r in comparison.runs],
        findings=[redact_incident(i) for i in comparison.findings],
    )


def _attempt(attempt: Attempt) -> Attempt:
    return dataclasses.replace(
        attempt,
        command=redact_text(attempt.command),
        signals=[redact_text(s) for s in attempt.signals],
        flag_diff=[
            FlagChange(c.flag, _maybe(c.before), _maybe(c.after)) for c in attempt.flag_diff
        ],
    )


def _line(line: Line) -> Line:
    return dataclasses.replace(
        line,
        source=redact_text(line.source),
        text=redact_text(line.text),
        body=redact_text(line.body),
    )


def _summary(summary: InputSummary) -> InputSummary:
    return dataclasses.replace(
        summary, path=redact_text(summary.path), notes=[redact_text(n) for n in summary.notes]
    )


def _maybe(text: Any) -> Any:
    return redact_text(text) if isinstance(text, str) else text


def redact_incident(incident: Incident) -> Incident:
    """A copy of one incident with secrets masked in everything it shows."""
    return dataclasses.replace(
        incident,
        source=redact_text(incident.source),
        evidence=[_line(ln) for ln in incident.evidence],
        explanation=redact_text(incident.explanation),
        advice=[redact_text(a) for a in incident.advice],
        title=redact_text(incident.title),
        command=_maybe(incident.command),
        corrected_command=_maybe(incident.corrected_command),
        edits=_edits(incident.edits),
        span=_span_after(incident),
        verification=_verification(incident.verification),
        alternatives=[
            Alternative(redact_text(a.command), _edits(a.edits), _verification(a.verification))
            for a in incident.alternatives
        ],
    )


def _edits(edits: list[Edit]) -> list[Edit]:
    return [Edit(e.op, e.flag, _maybe(e.to), _maybe(e.value), e.intent_lost) for e in edits]


def _verification(verification: Verification | None) -> Verification | None:
    if verification is None:
        return None
    return dataclasses.replace(
        verification,
        message=redact_text(verification.message),
        catalog_check=_maybe(verification.catalog_check),
    )


def _span_after(incident: Incident) -> tuple[int, int] | None:
    """Keep the highlight only where redaction did not change the line's length."""
    if incident.span is None:
        return None
    line = next((ln for ln in incident.evidence if ln.number == incident.line), None)
    if line is None or redact_text(line.text) != line.text:
        return None
    return incident.span
