"""The report from every input's incidents: merged across ranks, root cause first, the
redundant ones dropped, per input and per attempt of a session."""

from __future__ import annotations

from analyzer.core.model import Incident, InputSummary, Line, Report
from analyzer.incidents import collate
from analyzer.incidents.assemble import is_warning
from analyzer.incidents.context import Context
from analyzer.incidents.finding_registry import priorities as priority_order
from analyzer.incidents.one_cause import number_consequences
from analyzer.rulebook.vocabulary import CATALOG_RULE_PREFIXES


def finish(
    found: list[Incident], summaries: list[InputSummary], last_lines: list[Line], context: Context
) -> Report:
    alone = {r.id for r in context.rules if r.alone}
    transcripts = any(s.kind.startswith("transcript") for s in summaries)
    catalogs = any(i.rule.startswith(CATALOG_RULE_PREFIXES) for i in found)
    priorities = priority_order(context.rules, transcripts, catalogs)
    merged = collate.per_attempt(found, collate.merge_ranks, by_ref=False)
    ordered = collate.order(merged, priorities, [s.path for s in summaries])
    # a session's attempts in order; within one, warnings after the failures
    ordered = sorted(ordered, key=lambda i: (i.attempt or 0, is_warning(i)))
    ordered = collate.per_attempt(ordered, lambda group: _drop_redundant(group, alone), by_ref=True)
    number_consequences(ordered)
    warnings = [f"{s.path}: {note}" for s in summaries for note in s.notes]
    return collate.build_report(
        summaries, ordered, last_lines, warnings, _report_catalog(ordered, summaries, context)
    )


def _report_catalog(
    incidents: list[Incident], summaries: list[InputSummary], context: Context
) -> str:
    """The catalog of the input holding the root cause (else of the first input read)."""
    by_path = {s.path: s.catalog_version for s in summaries if s.catalog_version}
    for incident in incidents:
        if incident.source in by_path:
            return by_path[incident.source]
    return next(iter(by_path.values()), context.catalog.version)


def _drop_redundant(group: list[Incident], alone: set[str]) -> list[Incident]:
    """drop_redundant over the causes only: a warning on the same line as another (several
    command checks share the launch line) or beside a silent death takes nothing away. A
    warning whose corrected command is a cause's (the same mistake, crashed) adds nothing."""
    causes = collate.drop_redundant([i for i in group if not is_warning(i)], alone)
    kept = {id(i) for i in causes}
    fixed = {i.corrected_command for i in causes if i.corrected_command}
    return [
        i for i in group if id(i) in kept or (is_warning(i) and i.corrected_command not in fixed)
    ]
