"""The pipeline: read -> scan -> match -> link -> fix -> incident, one input at a time.

This is the only module that knows the order of the stages; each stage module
knows only its own input and output types.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from analyzer.core.model import (
    Attempt,
    Finding,
    Incident,
    InputSummary,
    Line,
    Match,
    Report,
    ScannedLog,
    Traceback,
    severity_rank,
)
from analyzer.core.read import TextInput, open_inputs
from analyzer.engine import incident as incidents_stage
from analyzer.engine.clients import PRIORITIES as CLIENT_PRIORITIES
from analyzer.engine.correct import choose_command, propose, verify_incidents
from analyzer.engine.fault_dump import with_fault_dump
from analyzer.engine.fault_flags import fault_flags
from analyzer.engine.flags_shown import FlagsShown, shown_in_input, shown_in_lines
from analyzer.engine.guarded_frames import possibly_set, with_evidence
from analyzer.engine.link import (
    canonical_flag,
    exception_flags,
    link,
    reported_flags,
    site_flags,
)
from analyzer.engine.literal_scan import LiteralFinder, finder_for, scan_chunks
from analyzer.engine.match import match_rules
from analyzer.engine.redact import redact_report
from analyzer.engine.scan import scan_lines
from analyzer.engine.survival import (
    MARKERS,
    LifeSigns,
    death_cause,
    judge,
    signs_of_lines,
    watched,
)
from analyzer.rulebook.check_rules import CHECK_RULES
from analyzer.rulebook.command_checks import check_command
from analyzer.rulebook.features import traceback_flags
from analyzer.rulebook.vocabulary import CATALOG_RULE_PREFIXES, Rule, all_triggers, load_rules
from analyzer.sglang.catalog import FlagCatalog, all_catalogs, load_catalog
from analyzer.sglang.releases import VersionChoice, by_messages, choose_for_text, choose_version
from analyzer.sglang.usage_text import catalog_for_usage
from analyzer.transcripts.detect import FORMAT_NAMES, detect_kind, is_transcript_folder

if TYPE_CHECKING:
    from analyzer.engine.raise_sites import FoundSite
    from analyzer.metrics.results import RunMetrics


@dataclass
class Options:
    """What the user asked for on the command line."""

    rules_dirs: list[str] = field(default_factory=list)
    command: str | None = None
    sglang_version: str | None = None
    redact: bool = True
    simple_scan: bool = False
    input_format: str | None = None  # auto | log | opencode | claude | codex | text
    verify: bool = False  # ask the installed SGLang about every corrected command
    metrics: bool = False  # also read each log's decode metrics (for the HTML charts)
    session: str | None = None  # the opencode session to read (default: the one active last)


@dataclass
class _Context:
    """What every stage of one run reads: the rules, the flag catalog, the options."""

    rules: list[Rule]
    by_id: dict[str, Rule]
    catalog: FlagCatalog
    options: Options
    named_release: str | None = None  # a release only exception messages told: named in sites
    shown: FlagsShown | None = None  # the flags the input's lines show on (no command known)


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
    triggers = [*all_triggers(rules), *MARKERS]
    finder = None if options.simple_scan else finder_for(triggers)
    summaries: list[InputSummary] = []
    found: list[Incident] = []
    last_lines: list[Line] = []
    timeline: list[Attempt] = []
    runs: list[RunMetrics] = []
    for text_input in open_inputs(paths, is_transcript_folder):
        summary = InputSummary(text_input.path)
        summaries.append(summary)
        kind = _transcript_kind(text_input, options.input_format)
        if kind is not None:
            incidents, attempts, tail = _analyze_transcript(text_input, summary, kind, context)
            found.extend(incidents)
            timeline.extend(attempts)
            if incidents or not last_lines:
                last_lines = tail
            continue
        watched_input = watched(text_input)
        log = _scan(watched_input, summary, triggers, finder)
        if log is None:
            continue
        here = _for_input(context, summary, log, text_input)
        incidents = analyze_log(log, here, signs=watched_input.signs)
        incidents.extend(_command_incidents(log, here))
        found.extend(incidents)
        if incidents or not last_lines:
            last_lines = log.tail
        if options.metrics:
            runs.extend(_metrics(text_input))
    report = _finish(found, summaries, last_lines, context)
    report.attempts = incidents_stage.classify_attempts(timeline, report.incidents)
    report.runs = runs
    if options.verify:
        verify_incidents(report.incidents, {s.path: s.catalog_version for s in summaries})
    if not options.redact:
        return report
    return redact_report(report)


def _for_input(
    context: _Context, summary: InputSummary, log: ScannedLog, text_input: TextInput
) -> _Context:
    """The context with the catalog of the SGLang that wrote this input (or its usage text),
    and the flags its lines show on."""
    options = context.options
    choice = choose_version(log, all_catalogs(), options.sglang_version, options.command)
    here = _with_catalog(context, summary, choice)
    shown = shown_in_input(text_input, choice.version if choice.evidence else None)
    return replace(here, catalog=catalog_for_usage(log, here.catalog, summary), shown=shown)


def _with_catalog(context: _Context, summary: InputSummary, choice: VersionChoice) -> _Context:
    summary.catalog_version, summary.catalog_reason = choice.version, choice.reason
    named = choice.version if choice.by_messages else None
    if choice.version == context.catalog.version:
        return replace(context, named_release=named)
    return replace(context, catalog=load_catalog(choice.version), named_release=named)


def _metrics(text_input: TextInput) -> list[RunMetrics]:
    """The log's decode metrics, when it has any; a second read, so files only (not stdin)."""
    from analyzer.metrics.extract import extract  # numpy: only when a format draws the metrics

    if text_input.file is None:
        return []
    run = extract(text_input)
    return [run] if run.decode.lines else []


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


def analyze_log(
    log: ScannedLog,
    context: _Context,
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
        incidents.append(_incident(finding, rule, log, context, launch, command_source))
    # an exception a client_error rule recognises (a request SGLang refused, raised to the
    # offline Engine's caller) is explained: no catch-all crash, no fallback for it
    answered = {i.line for i in incidents if _is_client_finding(i)}
    incidents = [
        i
        for i, match in zip(incidents, matches, strict=True)
        if not (context.by_id[match.rule_id].generic and i.line in answered)
    ]
    causes = [i for i in incidents if not _is_warning(i)]
    deaths = [i for i in causes if (rule := context.by_id.get(i.rule)) and rule.alone]
    if len(deaths) == len(causes):
        # nothing explains the failure, or only a death notice does: the last traceback (one
        # a child died of right after: that death's cause) or faulthandler's dump of the death
        death = incidents_stage.decisive_line(deaths[0]) if deaths else None
        fallback = _fallback(log, context, launch, death, signs, answered)
        incidents = with_fault_dump(log, incidents, fallback)
    notices = [i for i in incidents if i.rule in context.by_id and context.by_id[i.rule].alone]
    # a traceback no rule or site classed: a catalog message the input shows may name it
    unknown = [i for i in incidents if i.rule_class == "unknown" and not _is_warning(i)]
    if all(_is_warning(i) or i in notices or i in unknown for i in incidents):
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
    context: _Context,
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
    # imported here, as in _raise_site: a log without a traceback never loads an error catalog
    from analyzer.engine.raise_sites import error_catalog_for, find_site_in_chain
    from analyzer.rulebook.frame_phases import log_phase, traceback_phase

    errors = error_catalog_for(context.catalog.version)
    found = find_site_in_chain(traceback, errors) if errors else None
    if found is not None and context.named_release:
        found = replace(found, release=context.named_release)
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
        from analyzer.rulebook.predict import predicted_by_command, predicted_match

        if predicted := predicted_by_command(traceback, command, context.catalog):
            match = predicted_match(predicted, traceback)
            rule = context.by_id[match.rule_id]
            return _incident(link(match, rule, context.catalog), rule, log, context, launch)
    named = exception_flags(traceback, context.catalog, command)
    # the flags whose code path failed, set by the user (engine/fault_flags.py)
    faulty = fault_flags(traceback, context.catalog, command, shown=context.shown)
    if found is None:
        ran = traceback_flags(traceback, possibly_set(command, context.catalog))
        flags = list(dict.fromkeys([*named, *faulty, *ran]))
        incident = incidents_stage.fallback_incident(
            log,
            traceback,
            flags=reported_flags(flags, context.catalog),
            phase=traceback_phase(traceback) or log_phase(traceback, log),
            death=death,
        )
    else:
        flags = site_flags(found.site, context.catalog, command)
        flags += [f for f in faulty if f not in flags]
        ran = traceback_flags(traceback, possibly_set(command, context.catalog))
        flags += [f for f in ran if f not in flags]
        flags += [f for f in named if f not in flags]
        incident = incidents_stage.fallback_incident(
            log, traceback, found, reported_flags(flags, context.catalog), death=death
        )
    incident.explanation = with_evidence(
        incident.explanation, faulty, traceback, context.catalog, command, context.shown
    )
    return incident


def _raise_site(match: Match, context: _Context) -> FoundSite | None:
    """The SGLang site that raised the exception a traceback rule matched."""
    traceback = match.traceback
    if traceback is None:
        return None
    from analyzer.engine.raise_sites import error_catalog_for, find_site

    errors = error_catalog_for(context.catalog.version)
    if errors is None:
        return None
    parts = (traceback, *traceback.chain)
    part = next((p for p in parts if p.exception_line == match.line), traceback)
    found = find_site(part, errors)
    if found is not None and context.named_release:
        found = replace(found, release=context.named_release)
    return found


def _traceback_of(match: Match, log: ScannedLog) -> Traceback | None:
    """The traceback a match is about: its own, or the one a line rule's line ends."""
    if match.traceback is not None:
        return match.traceback
    return next((t for t in log.tracebacks if t.exception_line == match.line), None)


def _command_incidents(log: ScannedLog, context: _Context) -> list[Incident]:
    """Silent reinterpretations of the launch command (analyzer/rulebook/command_checks.py)."""
    choice = choose_command(context.options.command, log.commands, log.server_args, context.catalog)
    if choice is None:
        return []
    findings = check_command(choice.command, context.catalog, log.server_args, log)
    return [_incident(f, CHECK_RULES[f.match.rule_id], log, context) for f in findings]


def _is_warning(incident: Incident) -> bool:
    """Warnings (silent misconfigurations) never explain a failure: no cause hides behind
    them, and they are reported after every fatal incident."""
    return severity_rank(incident.severity) >= severity_rank("warning")


def _incident(
    finding: Finding,
    rule: Rule,
    log: ScannedLog,
    context: _Context,
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
    proposal = propose(finding, rule, choice, context.catalog, log.server_args)
    traceback = _traceback_of(match, log)
    # the flags the message names, then those whose code path failed that the user set,
    # then the rule's own (often its advice: --disable-cuda-graph for any capture failure)
    fixed = {canonical_flag(f, context.catalog) for f in rule.flags}
    command = choice.command if choice else None
    code_paths = rule.generic or not rule.flags
    faulty = fault_flags(traceback, context.catalog, command, code_paths, context.shown)
    flags = [f for f in finding.flags if f not in fixed]
    flags += [f for f in faulty if f not in flags]
    flags += [f for f in (*finding.flags, *proposal.flags) if f not in flags]
    # the features the traceback ran through or names (analyzer/catalogs/features.toml)
    ran = traceback_flags(traceback, possibly_set(command, context.catalog))
    flags.extend(f for f in ran if f not in flags)
    # the flags its exception message spells (an option, a field, a field in prose)
    named = exception_flags(traceback, context.catalog, choice.command if choice else None)
    flags.extend(f for f in named if f not in flags)
    explanation = with_evidence(
        finding.explanation, faulty, traceback, context.catalog, command, context.shown
    )
    found = _raise_site(match, context)
    if found is not None:
        blamed = site_flags(found.site, context.catalog, choice.command if choice else None)
        flags.extend(f for f in blamed if f not in flags)
        explanation = f"{explanation} {found.sentence()}".strip()
    family = found.family if found is not None and rule.generic else None
    # the catch-all crash raised inside a phase that classes anything raised there
    phase = None
    if rule.generic and not family and traceback:
        from analyzer.rulebook.frame_phases import traceback_phase

        phase = traceback_phase(traceback)
    if phase is not None:
        advice = [*phase.phase.advice, *finding.advice]
        finding = replace(finding, rule_class=phase.phase.rule_class, advice=advice)
        explanation += (
            f" It was raised during {phase.phase.text} ({phase.where}:{phase.frame.lineno} in "
            f"{phase.frame.function}): a {phase.phase.rule_class} failure."
        )
    return Incident(
        rule_class=family.rule_class if family else finding.rule_class,
        rule=family.rule_id if family else (phase.phase.rule_id if phase else rule.id),
        title=family.title if family else finding.title,
        severity=family.severity if family else finding.severity,
        source=match.line.source,
        line=match.line.number,
        ranks=list(match.ranks),
        evidence=list(match.evidence),
        span=match.span,
        offending_flags=reported_flags(flags, context.catalog),
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


def _finish(
    found: list[Incident], summaries: list[InputSummary], last_lines: list[Line], context: _Context
) -> Report:
    alone = {r.id for r in context.rules if r.alone}
    priorities = {r.id: r.priority for r in [*context.rules, *CHECK_RULES.values()]}
    priorities.update(CLIENT_PRIORITIES)
    priorities.update(_family_priorities(found, context.rules))
    if any(s.kind.startswith("transcript") for s in summaries):
        from analyzer.transcripts.diagnose import PRIORITIES as SESSION_PRIORITIES

        priorities.update(SESSION_PRIORITIES)
    merged = incidents_stage.per_attempt(found, incidents_stage.merge_ranks, by_ref=False)
    ordered = incidents_stage.order(merged, priorities, [s.path for s in summaries])
    # a session's attempts in order; within one, warnings after the failures
    ordered = sorted(ordered, key=lambda i: (i.attempt or 0, _is_warning(i)))
    ordered = incidents_stage.per_attempt(
        ordered, lambda group: _drop_redundant(group, alone), by_ref=True
    )
    warnings = [f"{s.path}: {note}" for s in summaries for note in s.notes]
    return incidents_stage.build_report(
        summaries, ordered, last_lines, warnings, _report_catalog(ordered, summaries, context)
    )


def _family_priorities(incidents: list[Incident], rules: list[Rule]) -> dict[str, int]:
    """A raise-site family or a frame phase classifies what no hand rule explains: its
    incidents rank with the generic rule that found them, below every rule that matched the
    same error."""
    generic = min((r.priority for r in rules if r.generic), default=None)
    if generic is None:
        return {}
    return {i.rule: generic for i in incidents if i.rule.startswith(CATALOG_RULE_PREFIXES)}


def _report_catalog(
    incidents: list[Incident], summaries: list[InputSummary], context: _Context
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
    causes = incidents_stage.drop_redundant([i for i in group if not _is_warning(i)], alone)
    kept = {id(i) for i in causes}
    fixed = {i.corrected_command for i in causes if i.corrected_command}
    return [
        i for i in group if id(i) in kept or (_is_warning(i) and i.corrected_command not in fixed)
    ]


# ---- session transcripts ------------------------------------------------------------------


def _transcript_kind(text_input: TextInput, forced: str | None) -> str | None:
    """The transcript kind of an input (None: a log); `forced` is --input-format."""
    if forced == "log":
        return None
    if forced and forced != "auto":
        return FORMAT_NAMES[forced]
    return detect_kind(text_input)


def _analyze_transcript(
    text_input: TextInput, summary: InputSummary, kind: str, context: _Context
) -> tuple[list[Incident], list[Attempt], list[Line]]:
    """Every attempt's log text through the same match/link/fix as a log, then the
    transcript-level findings and the timeline."""
    # imported here: a log (the common case) never pays for the transcript readers
    from analyzer.transcripts.attempts import build_session
    from analyzer.transcripts.client_failures import client_incidents
    from analyzer.transcripts.diagnose import diagnose
    from analyzer.transcripts.logview import scan_view
    from analyzer.transcripts.reading import read_transcript

    summary.kind = kind
    transcript = read_transcript(text_input, kind, context.options.session)
    # the client_error line rules also read the output of the clients the session ran
    client_rules = [
        r for r in context.rules if r.rule_class == "client_error" and r.scope == "line"
    ]
    session = build_session(transcript.events, context.catalog.takes_value, client_rules)
    summary.lines = transcript.lines
    summary.notes.extend([*transcript.notes, *session.notes])
    if not session.attempts:
        summary.notes.append("no SGLang launch found in this transcript")
    launches = [a.launch.text for a in session.attempts]
    choice = choose_for_text(
        session.stated_versions, launches, all_catalogs(), context.options.sglang_version
    )
    context = _with_catalog(context, summary, choice)
    triggers = [*all_triggers(context.rules), *MARKERS]
    view_only = {r.id for r in context.rules if r.scope == "log" and r.alone}
    found: dict[int, list[Incident]] = {}
    clients: list[Incident] = []  # a client's failure found in a log view
    tail: list[Line] = []

    def views_incidents(views, launch: list[Line] | None, attempt: int | None) -> list[Incident]:
        nonlocal tail
        incidents: list[Incident] = []
        for view in views:
            log = scan_view(view, text_input.path, triggers)
            here = context
            if not choice.evidence:  # the log text shown may still name its release
                told = by_messages(choice, log, all_catalogs())
                here = _with_catalog(context, summary, told)
            release = here.catalog.version if choice.evidence else None
            here = replace(
                here,
                catalog=catalog_for_usage(log, here.catalog, summary),
                shown=shown_in_lines(view.lines, text_input.path, release),
            )
            # a view is part of a log, possibly taken mid-startup: whole-log verdicts
            # (empty, ended without error) are the transcript's to make, with its evidence
            source = "transcript" if launch else "log"
            found_here = analyze_log(log, here, launch, source, signs_of_lines(view.lines))
            # warnings stay out: an attempt's incidents decide that it failed
            kept = [i for i in found_here if i.rule not in view_only and not _is_warning(i)]
            incidents.extend(kept)
            for finding in [i for i in found_here if _is_client_finding(i)]:
                finding.attempt = attempt
                clients.append(finding)
            if kept or not tail:
                tail = log.tail
        if any(i.rule != "unknown" for i in incidents):
            # views are parts of one log: what another part classified, `unknown` only repeats
            incidents = [i for i in incidents if i.rule != "unknown"]
        for incident in incidents:
            incident.attempt = attempt
        return incidents

    for attempt in session.attempts:
        launch = [Line(text_input.path, 0, attempt.launch.text, attempt.launch.text)]
        found[attempt.number] = views_incidents(attempt.views, launch, attempt.number)
    # with no launch to follow, the SGLang log text the session saw still shows the failure
    loose = [] if session.attempts else views_incidents(session.loose_views, None, None)
    diagnosis = diagnose(session, found, text_input.path, context.catalog.canonical)
    everything = [i for number in sorted(found) for i in found[number]] + diagnosis.incidents
    everything += loose + client_incidents(session, clients, text_input.path)
    return everything, diagnosis.timeline, tail


def _is_client_finding(incident: Incident) -> bool:
    return incident.rule_class == "client_error" and incident.severity == "info"
