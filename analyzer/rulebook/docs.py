"""Rule documentation, generated from each rule's [doc] table.

`loganalyze rules` prints it; `loganalyze rules --markdown` is the rule table of
docs/rules.md (tests/test_rules.py keeps that page in step).
"""

from __future__ import annotations

from analyzer.rulebook.vocabulary import Rule

TABLE_START = "<!-- rules-table:start -->"
TABLE_END = "<!-- rules-table:end -->"


def rules_text(rules: list[Rule]) -> str:
    out = []
    for rule in sorted(rules, key=lambda r: (r.rule_class, r.id)):
        out.append(f"{rule.id}  [{rule.rule_class}, {rule.severity}]  {rule.title}")
        out.append(f"    detects: {rule.doc.detects}")
        out.append(f"    why:     {rule.doc.why}")
        out.append(f"    fix:     {rule.doc.fix}")
    return "\n".join(out) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def rules_markdown(rules: list[Rule]) -> str:
    out = [
        TABLE_START,
        "| rule | class | severity | what it detects | why it happens | the fix |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for rule in sorted(rules, key=lambda r: (r.rule_class, r.id)):
        cells = (rule.doc.detects, rule.doc.why, rule.doc.fix)
        out.append(
            f"| `{rule.id}` | `{rule.rule_class}` | {rule.severity} | "
            + " | ".join(_cell(c) for c in cells)
            + " |"
        )
    out.append(TABLE_END)
    return "\n".join(out) + "\n"
