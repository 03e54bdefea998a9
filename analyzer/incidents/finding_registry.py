"""Everything the tool can report, in one registry, and the one priority order of them.

An incident's `rule` is the id of one entry here, whatever implements it: a TOML rule
(rules/), a launch-command check (rulebook/check_rules.py), a raise-site family
(catalogs/raise_sites.toml), a frame phase (catalogs/frame_phases.toml), a session finding
(transcripts/) or a finding the code mints (the traceback no rule explains, a client's
failure). `loganalyze rules` lists them; the report orders incidents by `priorities`.
"""

from __future__ import annotations

from dataclasses import dataclass

from analyzer.engine.clients import CLIENT_RULE, REFUSED_RULE
from analyzer.metrics.slowdown_finding import SLOWDOWN_ENTRY
from analyzer.rulebook.check_rules import CHECK_RULES
from analyzer.rulebook.docs import rules_markdown, rules_text
from analyzer.rulebook.vocabulary import Rule, RuleDoc

# an incident whose rule has no priority (`unknown`, `death-cause`) ranks here
DEFAULT_PRIORITY = 50

KIND_TOML = "rule"
KIND_CHECK = "command check"
KIND_FAMILY = "raise-site family"
KIND_PHASE = "frame phase"
KIND_SESSION = "session finding"
KIND_FALLBACK = "fallback"  # minted in code when no rule explains the input
KIND_COMPARISON = "run comparison"  # `loganalyze compare`, from the runs' decode metrics
KIND_SIGNAL = "failure signal"  # a failure line no rule explains (analyzer/signals/)
KIND_NODES = "multi-node join"  # several nodes' logs joined (analyzer/nodes/)


@dataclass(frozen=True)
class Entry:
    """One thing the tool can report."""

    id: str
    rule_class: str
    severity: str
    priority: int | None  # None: ranks at DEFAULT_PRIORITY
    title: str
    doc: RuleDoc
    kind: str


# The findings minted in code (incidents/collate.py, engine/clients.py). A client's failure
# ranks last (0): it is never the root cause of the server's.
MINTED_ENTRIES = (
    Entry(
        "unknown",
        "unknown",
        "error",
        None,
        "Unrecognised failure: the last traceback no rule explains",
        RuleDoc(
            "A traceback no rule, raise-site family or frame phase explains.",
            "The failure is new to the rulebook; the report still shows the last error.",
            "Read the traceback; add a rule with --rules DIR if it recurs.",
        ),
        KIND_FALLBACK,
    ),
    Entry(
        "death-cause",
        "runtime_crash",
        "fatal",
        None,
        "A server process died of an exception no rule recognises",
        RuleDoc(
            "The last traceback before a child's death notice, with no sign of life between.",
            "A server process died of it: most likely an SGLang bug or an unsupported path.",
            "Check a newer release; report it to SGLang with the traceback and the command.",
        ),
        KIND_FALLBACK,
    ),
    Entry(
        CLIENT_RULE,
        "client_error",
        "info",
        0,
        "A client of the server failed",
        RuleDoc(
            "A traceback in a client (bench_serving, the frontend, an HTTP library).",
            "The client's failure is not the server's: the server may be healthy.",
            "Read the client's error; the server's own log says whether it failed.",
        ),
        KIND_FALLBACK,
    ),
    Entry(
        REFUSED_RULE,
        "client_error",
        "info",
        0,
        "The server refused a request",
        RuleDoc(
            "An HTTP client's report of an error the server answered with.",
            "The server refused one request and kept serving.",
            "Fix the request (its parameters, its length) the server named.",
        ),
        KIND_FALLBACK,
    ),
    Entry(*SLOWDOWN_ENTRY, kind=KIND_COMPARISON),
)


def registry(rules: list[Rule], sessions: bool = True, catalogs: bool = True) -> list[Entry]:
    """Every entry: the rules (shipped and the user's), the command checks, the minted
    findings, the failure-signal and multi-node findings, (`catalogs`) the raise-site
    families and frame phases and (`sessions`) the session findings, in that order. A report
    leaves out the catalogs and sessions none of its incidents came from: a log never loads
    what it does not need."""
    return _entries(rules, sessions, catalogs, unranked=True)


def priorities(rules: list[Rule], sessions: bool = True, catalogs: bool = True) -> dict[str, int]:
    """The one priority order: rule id -> priority (higher is more likely the root cause).

    A raise-site family or a frame phase classifies what no hand rule explains: it ranks
    with the generic rule that found it, below every rule that matched the same error.
    """
    entries = _entries(rules, sessions, catalogs, unranked=False)
    return {e.id: e.priority for e in entries if e.priority is not None}


def _entries(rules: list[Rule], sessions: bool, catalogs: bool, unranked: bool) -> list[Entry]:
    """The registry's entries; without `unranked`, not the kinds that never rank (the
    failure-signal and multi-node findings: building their docs cost every run's start)."""
    entries = [_of_rule(r, KIND_TOML) for r in rules]
    entries += [_of_rule(r, KIND_CHECK) for r in CHECK_RULES.values()]
    entries += MINTED_ENTRIES
    if unranked:
        from analyzer.incidents.node_findings import NODE_ENTRIES
        from analyzer.signals.signal_findings import signal_entries

        entries += [Entry(*e, kind=KIND_SIGNAL) for e in signal_entries()]
        entries += [Entry(*e, kind=KIND_NODES) for e in NODE_ENTRIES]
    if catalogs:
        entries += _catalog_entries(rules)
    if sessions:
        from analyzer.transcripts.session_findings import SESSION_ENTRIES

        entries += [Entry(*e, kind=KIND_SESSION) for e in SESSION_ENTRIES]
    return entries


def _of_rule(rule: Rule, kind: str) -> Entry:
    return Entry(rule.id, rule.rule_class, rule.severity, rule.priority, rule.title, rule.doc, kind)


def _catalog_entries(rules: list[Rule]) -> list[Entry]:
    from analyzer.rulebook.frame_phases import frame_phases
    from analyzer.rulebook.raise_site_rules import site_families

    generic = min((r.priority for r in rules if r.generic), default=None)
    entries = []
    for family in site_families():
        doc = RuleDoc(
            f"{family.title}: a traceback no rule explains, raised at an SGLang site of "
            "this family (catalogs/raise_sites.toml).",
            "The site that raised it tells what failed even when no rule knows the message.",
            " ".join(family.advice) or "See the raise site the incident names.",
        )
        entries.append(
            Entry(
                family.rule_id,
                family.rule_class,
                family.severity,
                generic,
                family.title,
                doc,
                KIND_FAMILY,
            )
        )
    for phase in frame_phases():
        doc = RuleDoc(
            f"A traceback no rule explains (or one cut before its exception line) whose "
            f"frames ran in {phase.text} (catalogs/frame_phases.toml).",
            f"What fails during {phase.text} is most likely a {phase.rule_class} failure.",
            " ".join(phase.advice) or "See the frame the incident names.",
        )
        title = f"A failure during {phase.text}"
        entries.append(
            Entry(phase.rule_id, phase.rule_class, "fatal", generic, title, doc, KIND_PHASE)
        )
    return entries


def listing(rules: list[Rule], markdown: bool = False) -> str:
    """What `loganalyze rules` prints: the rules' doc (`markdown`: the README's rule table,
    rules only), then every other entry, a heading for each kind."""
    if markdown:
        return rules_markdown(rules)
    return rules_text(rules) + entries_text([e for e in registry(rules) if e.kind != KIND_TOML])


def entries_text(entries: list[Entry]) -> str:
    """The entries as `loganalyze rules` lists them, a heading for each kind."""
    out: list[str] = []
    for kind in dict.fromkeys(e.kind for e in entries):
        out.append(f"\n# {kind}s\n" if not kind.endswith("y") else f"\n# {kind[:-1]}ies\n")
        for entry in sorted((e for e in entries if e.kind == kind), key=lambda e: e.id):
            rank = "" if entry.priority is None else f", priority {entry.priority}"
            out.append(f"{entry.id}  [{entry.rule_class}, {entry.severity}{rank}]  {entry.title}")
            out.append(f"    detects: {entry.doc.detects}")
            out.append(f"    why:     {entry.doc.why}")
            out.append(f"    fix:     {entry.doc.fix}")
    return "\n".join(out) + "\n" if out else ""
