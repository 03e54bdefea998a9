"""The pipeline: the order of the stages, one input at a time.

read (core/read.py) -> scan (engine/) -> a transcript's attempts (incidents/session_incidents.py)
-> match, link, blame, fix (incidents/assemble.py: engine/, blame/, repair/) -> collate
(incidents/finish.py) -> verify -> redact. Each stage module knows only its own input and
output types.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from analyzer.blame.flags_shown import shown_in_input
from analyzer.core.model import Attempt, Incident, InputSummary, Line, Report, ScannedLog
from analyzer.core.read import TextInput, open_inputs
from analyzer.engine.literal_scan import LiteralFinder, finder_for, scan_chunks
from analyzer.engine.redact import redact_report, redact_run
from analyzer.engine.scan import scan_lines
from analyzer.engine.survival import MARKERS, watched
from analyzer.incidents import collate
from analyzer.incidents.assemble import analyze_log, command_incidents
from analyzer.incidents.context import Context, Options, with_catalog
from analyzer.incidents.finish import finish
from analyzer.incidents.session_incidents import transcript_incidents
from analyzer.nodes.several_nodes import join_nodes
from analyzer.repair.correct import verify_incidents
from analyzer.rulebook.vocabulary import Rule, all_triggers, load_rules
from analyzer.sglang.catalog import all_catalogs, load_catalog
from analyzer.sglang.releases import choose_version
from analyzer.sglang.usage_text import catalog_for_usage
from analyzer.transcripts.detect import is_transcript_folder, transcript_kind

if TYPE_CHECKING:
    from analyzer.metrics.results import RunMetrics


def analyze(
    paths: list[str], options: Options | None = None, rules: list[Rule] | None = None
) -> Report:
    """Analyze inputs into a Report (raises InputError / RuleError / CatalogError).

    `rules` replaces the shipped and user rules (the rule-case tests run one rule alone).
    """
    options = options or Options()
    rules = rules if rules is not None else load_rules(options.rules_dirs)
    context = Context(
        rules, {r.id: r for r in rules}, load_catalog(options.sglang_version), options
    )
    triggers = [*all_triggers(rules), *MARKERS]
    finder = None if options.simple_scan else finder_for(triggers)
    summaries: list[InputSummary] = []
    found: list[Incident] = []
    last_lines: list[Line] = []
    timeline: list[Attempt] = []
    for text_input in open_inputs(paths, is_transcript_folder):
        summary = InputSummary(text_input.path)
        summaries.append(summary)
        kind = transcript_kind(text_input, options.input_format)
        if kind is not None:
            incidents, attempts, tail = transcript_incidents(text_input, summary, kind, context)
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
        incidents.extend(command_incidents(log, here))
        found.extend(incidents)
        if incidents or not last_lines:
            last_lines = log.tail
    report = finish(found, summaries, last_lines, context)
    report = join_nodes(report, open_inputs(paths, is_transcript_folder))  # analyzer/nodes/
    report.attempts = collate.classify_attempts(timeline, report.incidents)
    if options.verify:
        verify_incidents(report.incidents, {s.path: s.catalog_version for s in summaries})
    if not options.redact:
        return report
    return redact_report(report)


def charted(paths: list[str], options: Options | None = None) -> Report:
    """analyze(), and each log's decode metrics for the HTML charts (report.runs)."""
    options = options or Options()
    report = analyze(paths, options)
    report.runs = decode_metrics(paths, options)
    return report


def decode_metrics(paths: list[str], options: Options) -> list[RunMetrics]:
    """The decode metrics of each log input that has any: a second read, so files only (not
    stdin); never a transcript's or a binary file's."""
    from analyzer.metrics.extract import extract  # numpy: only when a format draws the metrics

    runs = []
    for text_input in open_inputs(paths, is_transcript_folder):
        if text_input.file is None or text_input.is_binary():
            continue
        if transcript_kind(text_input, options.input_format) is None:
            run = extract(text_input)
            if run.decode.lines:
                runs.append(redact_run(run) if options.redact else run)
    return runs


def _for_input(
    context: Context, summary: InputSummary, log: ScannedLog, text_input: TextInput
) -> Context:
    """The context with the catalog of the SGLang that wrote this input (or its usage text),
    and the flags its lines show on."""
    options = context.options
    choice = choose_version(log, all_catalogs(), options.sglang_version, options.command)
    here = with_catalog(context, summary, choice)
    shown = shown_in_input(text_input, choice.version if choice.evidence else None)
    return replace(here, catalog=catalog_for_usage(log, here.catalog, summary), shown=shown)


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
