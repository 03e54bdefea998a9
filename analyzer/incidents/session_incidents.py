"""A session transcript's incidents: every attempt's log text through the same match, blame
and fix as a log, then the session-level findings and the timeline of attempts."""

from __future__ import annotations

from dataclasses import replace

from analyzer.blame.flags_shown import shown_in_lines
from analyzer.core.model import Attempt, Incident, InputSummary, Line
from analyzer.core.read import TextInput
from analyzer.engine.survival import MARKERS, signs_of_lines
from analyzer.incidents.assemble import analyze_log, is_client_finding, is_warning
from analyzer.incidents.context import Context, with_catalog
from analyzer.rulebook.vocabulary import all_triggers
from analyzer.sglang.catalog import all_catalogs
from analyzer.sglang.releases import by_messages, choose_for_text
from analyzer.sglang.usage_text import catalog_for_usage


def transcript_incidents(
    text_input: TextInput, summary: InputSummary, kind: str, context: Context
) -> tuple[list[Incident], list[Attempt], list[Line]]:
    """Every attempt's log text through the same match/link/fix as a log, then the
    transcript-level findings and the timeline."""
    # imported here: a log (the common case) never pays for the transcript readers
    from analyzer.transcripts.attempts import build_session
    from analyzer.transcripts.client_failures import client_incidents
    from analyzer.transcripts.diagnose import diagnose
    from analyzer.transcripts.reading import read_transcript
    from analyzer.transcripts.session import scan_view

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
    context = with_catalog(context, summary, choice)
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
                here = with_catalog(context, summary, told)
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
            kept = [i for i in found_here if i.rule not in view_only and not is_warning(i)]
            incidents.extend(kept)
            for finding in [i for i in found_here if is_client_finding(i)]:
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
