"""The JSON report: the machine format of record (schema documented in docs/json-schema.md).

Same input, same bytes: no timestamps of our own, no absolute paths we did not
receive, keys in a fixed order.
"""

from __future__ import annotations

import json
from typing import Any

from analyzer.core.model import SCHEMA_VERSION, Attempt, Incident, Line, Report


def report_dict(report: Report) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "verdict": report.verdict,
        "sglang_catalog": report.catalog_version,
        "inputs": [
            {
                "path": s.path,
                "kind": s.kind,
                "lines": s.lines,
                "notes": list(s.notes),
                "sglang_catalog": s.catalog_version,
                "sglang_catalog_reason": s.catalog_reason,
            }
            for s in report.inputs
        ],
        "incidents": [incident_dict(i) for i in report.incidents],
        "attempts": [_attempt(a) for a in report.attempts],
        "last_lines": [_line(ln) for ln in report.last_lines] if _wants_tail(report) else [],
        "warnings": list(report.warnings),
    } | _nodes(report)


def _nodes(report: Report) -> dict[str, Any]:
    """A multi-node run's nodes (analyzer/nodes/); a single node's report has no such key."""
    return {"nodes": [n.as_json() for n in report.nodes]} if report.nodes else {}


def _wants_tail(report: Report) -> bool:
    return report.verdict in ("unknown",) or any(
        i.rule_class == "silent_death" for i in report.incidents
    )


def incident_dict(incident: Incident) -> dict[str, Any]:
    """One incident as the JSON report writes it (metrics findings reuse it)."""
    return {
        "class": incident.rule_class,
        "rule": incident.rule,
        "title": incident.title,
        "severity": incident.severity,
        "source": incident.source,
        "line": incident.line,
        "ranks": list(incident.ranks),
        "evidence": [_line(ln) for ln in incident.evidence],
        "span": list(incident.span) if incident.span else None,
        "offending_flags": list(incident.offending_flags),
        "explanation": incident.explanation,
        "advice": list(incident.advice),
        "command": incident.command,
        "command_source": incident.command_source,
        "corrected_command": incident.corrected_command,
        "edits": [e.as_json() for e in incident.edits],
        "attempt": incident.attempt,
        "verification": incident.verification.as_json() if incident.verification else None,
        "raise_site": incident.raise_site.as_json() if incident.raise_site else None,
        "alternatives": [a.as_json() for a in incident.alternatives],
        # the rule says no command edit fixes it (other processes hold the GPU, the install)
        "fix_outside_command": incident.fix_outside_command,
    } | _consequence_fields(incident)


def _consequence_fields(incident: Incident) -> dict[str, Any]:
    """Additive fields: a multi-node run's incidents name their `node` and `consequence_of`
    (null for a cause); elsewhere only a consequence carries `consequence_of`."""
    if incident.node is not None:
        return {"node": incident.node, "consequence_of": incident.consequence_of}
    if incident.consequence_of is not None:
        return {"consequence_of": incident.consequence_of}
    return {}


def _attempt(attempt: Attempt) -> dict[str, Any]:
    """One launch of a session transcript: the timeline entry."""
    return {
        "attempt": attempt.number,
        "source": attempt.source,
        "line": attempt.line,
        "ref": attempt.ref,
        "timestamp": attempt.timestamp,
        "command": attempt.command,
        "log_path": attempt.log_path,
        "outcome": attempt.outcome,
        "class": attempt.rule_class,
        "signals": list(attempt.signals),
        "diff_from": attempt.diff_from,
        "flag_diff": [c.as_json() for c in attempt.flag_diff],
    }


def _line(line: Line) -> dict[str, Any]:
    found = {"source": line.source, "line": line.number, "ref": line.ref, "text": line.text}
    if line.pasted is not None:
        found["pasted"] = line.pasted  # the user's text, where undoing the paste changed it
    return found


def render_json(report: Report) -> str:
    return json.dumps(report_dict(report), indent=2, ensure_ascii=False) + "\n"
