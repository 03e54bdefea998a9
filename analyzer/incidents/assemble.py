"""One scanned input's incidents: match, link, blame and fix each finding, then the traceback
no rule explains (fallback), then what the server survived (engine/survival.py)."""

from __future__ import annotations

from dataclasses import replace

from analyzer.blame.attribute import attribute, raise_site, unexplained_site
from analyzer.blame.link import feature_text, link
from analyzer.blame.loading_blame import LOADING_CLASSES
from analyzer.core.model import Finding, Incident, Line, Match, ScannedLog, Traceback, severity_rank
from analyzer.engine.fault_dump import with_fault_dump
from analyzer.engine.match import match_rules
from analyzer.engine.survival import LifeSigns, death_cause, judge
from analyzer.incidents import collate
from analyzer.incidents.context import Context
from analyzer.repair.correct import choose_command, propose
from analyzer.rulebook.check_rules import CHECK_RULES
from analyzer.rulebook.command_checks import check_command
from analyzer.rulebook.shown_features import shown_features
from analyzer.rulebook.vocabulary import Rule
from analyzer.sglang.derived_fields import unknown_in_rebuilt


def analyze_log(
    log: ScannedLog,
    context: Context,
    launch: list[Line] | None = None,
    command_source: str = "log",
    signs: LifeSigns | None = None,
) -> list[Incident]:
    """Match, link and fix one scanned input.

    `launch` replaces the launch lines found in the log (a transcript knows the command
    that wrote the log text it shows); `command_source` then names where it came from.
    `signs` are the input's serving, stop and death lines: what the server survived is
    lowered to its own severity (engine/survival.py).
    """
    incidents = []
    matches, warnings = match_rules(context.rules, log)
    log.summary.notes.extend(warnings)
    for match in matches:
        rule = context.by_id[match.rule_id]
        finding = link(match, rule, context.catalog)
        incidents.append(rule_incident(finding, rule, log, context, launch, command_source))
    # an exception a client_error rule recognises (a request SGLang refused, raised to the
    # offline Engine's caller) is explained: no catch-all crash, no fallback for it
    answered = {i.line for i in incidents if is_client_finding(i)}
    incidents = [
        i
        for i, match in zip(incidents, matches, strict=True)
        if not (context.by_id[match.rule_id].generic and i.line in answered)
    ]
    causes = [i for i in incidents if not is_warning(i)]
    deaths = [i for i in causes if (rule := context.by_id.get(i.rule)) and rule.alone]
    if len(deaths) == len(causes):
        # nothing explains the failure, or only a death notice does: the last traceback (one
        # a child died of right after: that death's cause) or faulthandler's dump of the death
        death = collate.decisive_line(deaths[0]) if deaths else None
        fallback = _fallback(log, context, launch, death, signs, answered)
        incidents = with_fault_dump(log, incidents, fallback)
    notices = [i for i in incidents if i.rule in context.by_id and context.by_id[i.rule].alone]
    # a traceback no rule or site classed: a catalog message the input shows may name it
    unknown = [i for i in incidents if i.rule_class == "unknown" and not is_warning(i)]
    if all(is_warning(i) or i in notices or i in unknown for i in incidents):
        # a failure signal no rule explained: never "no incident" (analyzer/signals/)
        from analyzer.signals.incident import unexplained_signal

        def classified() -> Incident | None:  # an SGLang message shown alone, as its traceback
            return _fallback(log, context, launch, None, signs, answered)

        release = context.catalog.version
        found = unexplained_signal(log, incidents, release, classified, [*notices, *unknown])
        if unknown and any(i.rule_class != "unknown" for i in found):
            incidents = [i for i in incidents if i not in unknown]
        incidents.extend(i for i in found if not unknown or i.rule_class != "unknown")
    if signs is None:
        return incidents
    return judge(incidents, log, signs, {r.id for r in context.rules if r.outlives_serving})


def _fallback(
    log: ScannedLog,
    context: Context,
    launch: list[Line] | None,
    death: Line | None = None,
    signs: LifeSigns | None = None,
    answered: set[int] | None = None,
) -> Incident | None:
    """The last traceback no rule explains (with a `death` notice: the one that death
    followed, if any), classed by the SGLang site that raised it; not one whose exception
    line is `answered` (a client finding's)."""
    unexplained = [t for t in log.tracebacks if t.exception_line.number not in (answered or ())]
    if not unexplained:
        return None
    traceback = unexplained[-1] if death is None else death_cause(log, death, signs)
    if traceback is None or traceback.exception_line.number in (answered or ()):
        return None
    from analyzer.rulebook.frame_phases import log_phase, traceback_phase

    found = unexplained_site(traceback, context.catalog.version, context.named_release)
    line = traceback.exception_line
    choice = choose_command(
        context.options.command,
        log.commands if launch is None else launch,
        log.server_args,
        context.catalog,
        before_line=line.number,
    )
    command = choice.command if choice else None
    if found is None and command is not None:
        from analyzer.repair.predict import predicted_by_command, predicted_match

        if predicted := predicted_by_command(traceback, command, context.catalog):
            match = predicted_match(predicted, traceback)
            rule = context.by_id[match.rule_id]
            return rule_incident(link(match, rule, context.catalog), rule, log, context, launch)
    blame = attribute(None, traceback, command, context.catalog, context.shown, found)
    if found is None:
        incident = collate.fallback_incident(
            log,
            traceback,
            flags=blame.flags,
            phase=traceback_phase(traceback) or log_phase(traceback, log),
            death=death,
        )
    else:
        incident = collate.fallback_incident(log, traceback, found, blame.flags, death=death)
    incident.explanation = blame.reasons(incident.explanation)
    return incident


def _traceback_of(match: Match, log: ScannedLog) -> Traceback | None:
    """The traceback a match is about: its own, or the one a line rule's line ends."""
    if match.traceback is not None:
        return match.traceback
    return next((t for t in log.tracebacks if t.exception_line == match.line), None)


def command_incidents(log: ScannedLog, context: Context) -> list[Incident]:
    """Silent reinterpretations of the launch command (analyzer/rulebook/command_checks.py)."""
    choice = choose_command(context.options.command, log.commands, log.server_args, context.catalog)
    if choice is None:
        return []
    findings = check_command(choice.command, context.catalog, log.server_args, log)
    if choice.source == "reconstructed":  # no finding rests on a flag SGLang may have set
        findings = [
            f for f in findings if not unknown_in_rebuilt(f.edits, choice.command, context.catalog)
        ]
    return [rule_incident(f, CHECK_RULES[f.match.rule_id], log, context) for f in findings]


def is_warning(incident: Incident) -> bool:
    """Warnings (silent misconfigurations) never explain a failure: no cause hides behind
    them, and they are reported after every fatal incident."""
    return severity_rank(incident.severity) >= severity_rank("warning")


def rule_incident(
    finding: Finding,
    rule: Rule,
    log: ScannedLog,
    context: Context,
    launch: list[Line] | None = None,
    command_source: str = "log",
) -> Incident:
    match = finding.match
    choice = choose_command(
        context.options.command,
        log.commands if launch is None else launch,
        log.server_args,
        context.catalog,
        before_line=match.line.number,
        source_kind=command_source,
    )
    traceback = _traceback_of(match, log)
    command = choice.command if choice else None
    # what holds only with a feature the command, the record or the frames show
    shown = shown_features(command, log.server_args, traceback, context.catalog)
    more, advice = feature_text(rule, match.groups, shown)
    if more or advice:
        explanation = f"{finding.explanation} {more}".strip()
        finding = replace(finding, explanation=explanation, advice=[*finding.advice, *advice])
    proposal = propose(finding, rule, choice, context.catalog, log.server_args)
    found = raise_site(match, context.catalog.version, context.named_release)
    family = found.family if found is not None and rule.generic else None
    # the catch-all crash raised inside a phase that classes anything raised there
    phase = None
    if rule.generic and not family and traceback:
        from analyzer.rulebook.frame_phases import traceback_phase

        phase = traceback_phase(traceback)
    rule_class = family.rule_class if family else (phase.phase.rule_class if phase else None)
    rule_class = rule_class or finding.rule_class
    blame = attribute(
        finding,
        traceback,
        command,
        context.catalog,
        context.shown,
        found,
        rule.flags,
        proposal.flags,
        code_paths=rule.generic or not rule.flags,
        loading=[line.body for line in match.evidence] if rule_class in LOADING_CLASSES else None,
    )
    explanation = finding.explanation
    if rule.unclassified_explanation and family is None:  # no catalog family places it
        explanation = f"{explanation} {rule.unclassified_explanation}".strip()
    explanation = blame.reasons(explanation)
    if found is not None:
        explanation = f"{explanation} {found.sentence()}".strip()
    if phase is not None:
        advice = [*phase.phase.advice, *finding.advice]
        finding = replace(finding, rule_class=phase.phase.rule_class, advice=advice)
        explanation += (
            f" It was raised during {phase.phase.text} ({phase.where}:{phase.frame.lineno} in "
            f"{phase.frame.function}): a {phase.phase.rule_class} failure."
        )
    return Incident(
        rule_class=rule_class,
        rule=family.rule_id if family else (phase.phase.rule_id if phase else rule.id),
        title=family.title if family else finding.title,
        severity=family.severity if family else finding.severity,
        source=match.line.source,
        line=match.line.number,
        ranks=list(match.ranks),
        evidence=list(match.evidence),
        span=match.span,
        offending_flags=blame.flags,
        explanation=explanation,
        advice=[*proposal.notes, *(family.advice if family else finding.advice)],
        command=choice.command.render() if choice else None,
        command_source=choice.source if choice else None,
        corrected_command=proposal.corrected,
        edits=proposal.edits if proposal.corrected else [],
        raise_site=found.reported() if found else None,
        alternatives=proposal.alternatives,
        fix_outside_command=rule.outside_command or proposal.outside_command,
    )


def is_client_finding(incident: Incident) -> bool:
    return incident.rule_class == "client_error" and incident.severity == "info"
