"""The finding `loganalyze compare` adds (its entry of the registry of everything the tool
can report, incidents/finding_registry.py). Kept apart from compare.py so the registry
does not import the metrics' numpy on every log."""

from __future__ import annotations

from analyzer.rulebook.vocabulary import RuleDoc

RULE_CLASS = "spec_slowdown"
RULE_ID = "spec-slowdown"

# (id, class, severity, priority, title, doc)
SLOWDOWN_ENTRY = (
    RULE_ID,
    RULE_CLASS,
    "warning",
    None,
    "Speculative decoding ran slower than the run without it",
    RuleDoc(
        "`loganalyze compare`: a speculative run's decode throughput below that of a run "
        "without speculation (from the logs' decode metrics).",
        "A speculative step costs more than a plain one: it pays off only when the mean "
        "accept length exceeds that cost, measured from the same pair of runs.",
        "Raise the accept length (the draft model, --speculative-num-steps, topk) or "
        "turn speculation off for this load.",
    ),
)
