"""Stage 6: turn findings into the report's incidents, root cause first.

The same failure printed by every TP rank becomes one incident listing the
ranks. Rules marked `alone` (silent death) only report when nothing else in the
same input did. A log with no match still gets an incident when it shows a
traceback, so the user always sees the last error: classed by the family of the SGLang
site that raised it (analyzer/catalogs/raise_sites.toml), else `unknown`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from analyzer.core.model import (
    Attempt,
    Incident,
    InputSummary,
    Line,
    Report,
    ScannedLog,
    Traceback,
    severity_rank,
)
from analyzer.incidents.one_cause import cause_key

if TYPE_CHECKING:
    from analyzer.blame.raise_sites import FoundSite
    from analyzer.rulebook.frame_phases import LogPhaseFound, MessagePhaseFound, PhaseFound

UNKNOWN_ADVICE = [
    "No rule recognises this failure: read the last traceback and lines below.",
    "If this is a recurring SGLang failure, add a rule with --rules DIR (see `loganalyze rules`).",
]
DEATH_ADVICE = [
    "Check whether a newer SGLang release fixes it (search the SGLang issues for the exception); try the feature flags that lead to this code path one at a time.",
    "Otherwise report it to SGLang with the full traceback, the launch command and `python -m sglang.check_env`.",
]


def merge_ranks(incidents: list[Incident]) -> list[Incident]:
    """Collapse incidents of one rule with the same decisive text into one, listing ranks;
    a fatal or error one also with the text of another GPU or rank, and the consequences of
    one cause (analyzer/incidents/one_cause.py)."""
    merged: dict[tuple, Incident] = {}
    for incident in incidents:
        # a client's repeated failure (every request of a harness refused) is one finding
        client = incident.rule_class == "client_error" and incident.severity == "info"
        text = incident.title if client else _decisive_text(incident)
        key = (incident.source, cause_key(incident) or (incident.rule, text))
        kept = merged.get(key)
        if kept is None:
            merged[key] = incident
            continue
        kept.ranks = sorted(set(kept.ranks) | set(incident.ranks), key=_rank_order)
        kept.offending_flags += [f for f in incident.offending_flags if f not in kept.offending_flags]
    return list(merged.values())


def _decisive_text(incident: Incident) -> str:
    line = next((ln for ln in incident.evidence if ln.number == incident.line), None)
    return line.body if line else incident.title


def _rank_order(label: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p for p in _split_digits(label))


def _split_digits(label: str) -> list[str]:
    parts, current = [], ""
    for ch in label:
        if current and ch.isdigit() != current[-1].isdigit():
            parts.append(current)
            current = ""
        current += ch
    return [*parts, current] if current else parts


def drop_redundant(incidents: list[Incident], alone_rules: set[str]) -> list[Incident]:
    """Keep one incident per decisive line (the first, i.e. the highest priority once
    ordered); `alone` incidents only for inputs with no other incident, one per input."""
    sources_with_cause = {i.source for i in incidents if i.rule not in alone_rules}
    kept: list[Incident] = []
    seen: set[tuple[str, int]] = set()
    alone_seen: set[str] = set()
    for incident in incidents:
        if incident.rule in alone_rules:
            if incident.source in sources_with_cause or incident.source in alone_seen:
                continue
            alone_seen.add(incident.source)
        key = (incident.source, incident.line)
        if key in seen:
            continue
        seen.add(key)
        kept.append(incident)
    return kept


def order(
    incidents: list[Incident], priorities: dict[str, int], sources: list[str]
) -> list[Incident]:
    """Root cause first: rule priority, then severity, then input order and line."""
    position = {s: i for i, s in enumerate(sources)}
    return sorted(
        incidents,
        key=lambda i: (
            -priorities.get(i.rule, 50),
            severity_rank(i.severity),
            position.get(i.source, len(position)),
            i.line,
            i.rule,
        ),
    )


def fallback_incident(
    log: ScannedLog,
    traceback: Traceback,
    found: FoundSite | None = None,
    flags: list[str] | None = None,
    phase: PhaseFound | LogPhaseFound | MessagePhaseFound | None = None,
    death: Line | None = None,
) -> Incident:
    """The incident for a traceback no rule explains: of the class of the raise site's
    family (`found`; `flags`: those it blames and the message spells), else, for a traceback cut before its
    exception line, of the startup phase its frames were in (an `error`: the exception itself
    is not there), else a crash when a child's `death` notice followed it, else `unknown`."""
    shown = [traceback.first, *traceback.lines[-4:], *([death] if death else [])]
    unique = {ln.number: ln for ln in shown}
    evidence = [unique[n] for n in sorted(unique)]
    family = found.family if found else None
    if family is None and phase is not None:  # cut, or raised inside a `whole` phase
        incident = _phase_incident(log, traceback, evidence, phase)
        incident.offending_flags = list(flags or [])
    elif family is None and death is not None:
        incident = _death_incident(log, traceback, evidence, death)
        incident.offending_flags = list(flags or [])
        return incident
    else:
        explanation = _unknown_explanation(traceback)
        incident = Incident(
            rule_class=family.rule_class if family else "unknown",
            rule=family.rule_id if family else "unknown",
            title=family.title if family else _unknown_title(traceback),
            severity=family.severity if family else "error",
            source=log.summary.path,
            line=traceback.exception_line.number,
            ranks=_ranks(traceback),
            evidence=evidence,
            span=None,
            offending_flags=list(flags or []),
            explanation=f"{explanation} {found.sentence()}" if found else explanation,
            advice=list(family.advice if family else UNKNOWN_ADVICE),
            raise_site=found.reported() if found else None,
        )
    if death is not None:
        incident.explanation += f" {_died_of_it(death)}"
    return incident


def _died_of_it(death: Line) -> str:
    return (
        f"It is the last error before `{death.body.strip()}` (line {death.number}), with no "
        "sign of life between: a process of the server died of it."
    )


def _ranks(traceback: Traceback) -> list[str]:
    return [traceback.first.rank_label] if traceback.first.rank_label else []


def _death_incident(
    log: ScannedLog, traceback: Traceback, evidence: list[Line], death: Line
) -> Incident:
    kind = traceback.exception_type or "an exception whose line was not pasted"
    return Incident(
        rule_class="runtime_crash",
        rule="death-cause",
        title=f"A server process died of {kind}",
        severity="fatal",
        source=log.summary.path,
        line=traceback.exception_line.number,
        ranks=_ranks(traceback),
        evidence=evidence,
        span=None,
        offending_flags=[],
        explanation=f"{_unknown_explanation(traceback)} {_died_of_it(death)} No rule "
        "recognises the exception: most likely an SGLang bug or a code path this model, "
        "feature or release does not support.",
        advice=DEATH_ADVICE,
    )


def _phase_incident(
    log: ScannedLog,
    traceback: Traceback,
    evidence: list[Line],
    found: PhaseFound | LogPhaseFound | MessagePhaseFound,
) -> Incident:
    phase = found.phase
    cut = not traceback.exception_type
    return Incident(
        rule_class=phase.rule_class,
        rule=phase.rule_id,
        title=f"A traceback cut off before its exception line, in {phase.text}"
        if cut
        else f"{traceback.exception_type} raised during {phase.text}",
        severity="error" if cut else "fatal",
        source=log.summary.path,
        line=traceback.exception_line.number,
        ranks=_ranks(traceback),
        evidence=evidence,
        span=None,
        offending_flags=[],
        explanation=f"{_unknown_explanation(traceback)} {found.placement}: most likely a "
        f"{phase.rule_class} failure.",
        advice=list(phase.advice),
    )


def _unknown_title(traceback: Traceback) -> str:
    if not traceback.exception_type:
        return "A traceback cut off before its exception line"
    return f"Unrecognised failure: {traceback.exception_type}"


def _unknown_explanation(traceback: Traceback) -> str:
    if traceback.exception_type:
        return f"{traceback.exception_type}: {traceback.exception_message}".strip(": ")
    last = traceback.last_frame
    where = f" in {last.function} ({last.file}:{last.lineno})" if last else ""
    return (
        f"The input ends inside a traceback{where}: the exception line, which names the "
        "failure, was not pasted. Copy the log down to the line after the last frame."
    )


def verdict(incidents: list[Incident]) -> str:
    """The root incident's class; info findings (a client's failure, shutdown noise the
    server survived) are no incident, except that a client's failure is named."""
    shown = [i for i in incidents if i.severity != "info"]
    if not shown:
        clients = any(i.rule_class == "client_error" for i in incidents)
        return "client_error" if clients else "no incident"
    if all(i.rule_class == "unknown" for i in shown):
        return "unknown"
    return shown[0].rule_class


def build_report(
    inputs: list[InputSummary],
    incidents: list[Incident],
    last_lines: list[Line],
    warnings: list[str],
    catalog_version: str,
) -> Report:
    return Report(inputs, incidents, verdict(incidents), last_lines, warnings, catalog_version)


def per_attempt(incidents: list[Incident], step, by_ref: bool) -> list[Incident]:
    """Run an incident step within each input (and each attempt of a transcript), so that
    identical failures of two attempts stay two incidents. Order is kept."""
    groups: dict[tuple, list[Incident]] = {}
    for incident in incidents:
        ref = _decisive_ref(incident) if by_ref else None
        groups.setdefault((incident.source, incident.attempt, ref), []).append(incident)
    kept = {id(i) for group in groups.values() for i in step(group)}
    return [i for i in incidents if id(i) in kept]


def decisive_line(incident: Incident) -> Line | None:
    """The evidence line the incident is placed at."""
    return next((ln for ln in incident.evidence if ln.number == incident.line), None)


def _decisive_ref(incident: Incident) -> str | None:
    line = decisive_line(incident)
    return line.ref if line else None


def classify_attempts(timeline: list[Attempt], incidents: list[Incident]) -> list[Attempt]:
    """Each attempt's class is that of its first incident in the report's order (a
    client's failure during it is no class of the attempt's)."""
    for attempt in timeline:
        attempt.rule_class = next(
            (
                i.rule_class
                for i in incidents
                if i.attempt == attempt.number
                and i.source == attempt.source
                and i.severity != "info"
            ),
            None,
        )
    return timeline
