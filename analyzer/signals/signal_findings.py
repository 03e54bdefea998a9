"""The findings the failure-signal stage mints (its entries of the registry of everything
the tool can report, incidents/finding_registry.py): one per kind of signal, and one per
library whose message catalog (failure_messages.json) gives the class."""

from __future__ import annotations

from collections import Counter

from analyzer.rulebook.vocabulary import RuleDoc
from analyzer.signals.failure_lines import catalog_entries
from analyzer.signals.incident import DEFAULT_NEXT, KIND_TITLES, NEXT_EVIDENCE


def signal_entries() -> list[tuple]:
    """(id, class, severity, priority, title, doc) of each `signal-<kind>` finding."""
    out = []
    for kind, (rule_class, title) in KIND_TITLES.items():
        doc = RuleDoc(
            f"A line that shows a failure of kind `{kind}` that no rule explains.",
            "A failure no rule knows is still a failure: never 'no incident'.",
            NEXT_EVIDENCE.get(kind, DEFAULT_NEXT),
        )
        out.append((f"signal-{kind}", rule_class, "error", None, title, doc))
    by_kind: dict[str, Counter] = {}
    for entry in catalog_entries():
        by_kind.setdefault(entry.kind, Counter())[entry.rule_class] += 1
    for kind, classes in sorted(by_kind.items()):
        if f"signal-{kind}" in {e[0] for e in out}:
            continue
        doc = RuleDoc(
            f"One of {sum(classes.values())} {kind} messages of the signal catalog, found by "
            "its text wherever it stands (a JSON body, an HTTP error, after any prefix).",
            "The library's own message names what failed; its class comes from the entry.",
            "Follow the entry's advice in the incident.",
        )
        title = f"A {kind} error message"
        out.append((f"signal-{kind}", classes.most_common(1)[0][0], "error", None, title, doc))
    return out
