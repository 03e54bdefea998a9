"""The pipeline: read -> scan -> match -> link -> fix -> incident, one input at a time.

This is the only module that knows the order of the stages; each stage module
knows only its own input and output types.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from analyzer import incident as incidents_stage
from analyzer.catalog import FlagCatalog, load_catalog
from analyzer.fix import choose_command, propose
from analyzer.link import link
from analyzer.literal_scan import LiteralFinder, finder_for, scan_chunks
from analyzer.match import match_rules
from analyzer.model import Finding, Incident, InputSummary, Line, Report, ScannedLog
from analyzer.read import TextInput, open_inputs
from analyzer.redact import redact_report
from analyzer.rulebook import Rule, all_triggers, load_rules
from analyzer.scan import scan_lines


@dataclass
class Options:
    """What the user asked for on the command line."""

    rules_dirs: list[str] = field(default_factory=list)
    command: str | None = None
    sglang_version: str | None = None
    redact: bool = True
    simple_scan: bool = False


@dataclass
class _Context:
    rules: list[Rule]
    by_id: dict[str, Rule]
    catalog: FlagCatalog
    options: Options


def analyze(
    paths: list[str], options: Options | None = None, rules: list[Rule] | None = None
) -> Report:
    """Analyze inputs into a Report (raises InputError / RuleError / CatalogError).

    `rules` replaces the shipped and user rules (the rule-case tests run one rule alone).
    """
    options = options or Options()
    rules = rules if rules is not None else load_rules(options.rules_dirs)
    context = _Context(
        rules, {r.id: r for r in rules}, load_catalog(options.sglang_version), options
    )
    triggers = all_triggers(rules)
    finder = None if options.simple_scan else finder_for(triggers)
    summaries: list[InputSummary] = []
    found: list[Incident] = []
    last_lines: list[Line] = []
    for text_input in open_inputs(paths):
        summary = InputSummary(text_input.path)
        summaries.append(summary)
        log = _scan(text_input, summary, triggers, finder)
        if log is None:
            continue
        incidents = analyze_log(log, context)
        found.extend(incidents)
        if incidents or not last_lines:
            last_lines = log.tail
    report = _finish(found, summaries, last_lines, context)
    return redact_report(report) if options.redact else report


def _scan(
    text_input: TextInput, summary: InputSummary, triggers: list[str], finder: LiteralFinder | None
) -> ScannedLog | None:
    """Scan one input: the literal fast path, or line by line (the reference) if asked."""
    if text_input.is_binary():
        summary.kind = "binary"
        summary.notes.append("binary file: skipped")
        return None
    if finder is None:
        log = scan_lines(summary, text_input.lines(), triggers)
    else:
        log = scan_chunks(summary, text_input, triggers, finder)
    summary.notes.extend(text_input.reading_notes())
    if summary.lines == 0:
        summary.notes.append("empty input")
    return log


def analyze_log(log: ScannedLog, context: _Context) -> list[Incident]:
    """Match, link and fix one scanned input."""
    incidents = []
    matches, warnings = match_rules(context.rules, log)
    log.summary.notes.extend(warnings)
    for match in matches:
        rule = context.by_id[match.rule_id]
        finding = link(match, rule, context.catalog)
        incidents.append(_incident(finding, rule, log, context))
    if not incidents:
        fallback = incidents_stage.fallback_incident(log)
        incidents = [fallback] if fallback else []
    return incidents


def _incident(finding: Finding, rule: Rule, log: ScannedLog, context: _Context) -> Incident:
    match = finding.match
    choice = choose_command(
        context.options.command,
        log.commands,
        log.server_args,
        context.catalog,
        before_line=match.line.number,
    )
    proposal = propose(finding, rule, choice, context.catalog, log.server_args)
    return Incident(
        rule_class=finding.rule_class,
        rule=rule.id,
        title=finding.title,
        severity=finding.severity,
        source=match.line.source,
        line=match.line.number,
        ranks=list(match.ranks),
        evidence=list(match.evidence),
        span=match.span,
        offending_flags=finding.flags,
        explanation=finding.explanation,
        advice=[*proposal.notes, *finding.advice],
        command=choice.command.render() if choice else None,
        command_source=choice.source if choice else None,
        corrected_command=proposal.corrected,
        edits=proposal.edits if proposal.corrected else [],
    )


def _finish(
    found: list[Incident], summaries: list[InputSummary], last_lines: list[Line], context: _Context
) -> Report:
    alone = {r.id for r in context.rules if r.alone}
    priorities = {r.id: r.priority for r in context.rules}
    merged = incidents_stage.merge_ranks(found)
    ordered = incidents_stage.order(merged, priorities, [s.path for s in summaries])
    ordered = incidents_stage.drop_redundant(ordered, alone)
    warnings = [f"{s.path}: {note}" for s in summaries for note in s.notes]
    return incidents_stage.build_report(
        summaries, ordered, last_lines, warnings, context.catalog.version
    )
