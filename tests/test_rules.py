"""Every rule's own inline cases, the rule-file validation, and the docs generated from rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from analyzer.pipeline import analyze
from analyzer.rulebook.docs import TABLE_END, TABLE_START, rules_markdown
from analyzer.rulebook.vocabulary import RuleError, load_rules
from tests.fixture_cases import ROOT, fixture_cases, rule_cases

RULES = load_rules()
BY_ID = {rule.id: rule for rule in RULES}
CASES = rule_cases(RULES)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_inline_case(case, tmp_path):
    rule = BY_ID[case.expect["rule"]]
    report = analyze([str(case.input_in(tmp_path))], rules=[rule])
    fired = [i.rule for i in report.incidents if i.rule == rule.id]
    assert bool(fired) == case.expect["fires"]


def test_every_rule_has_a_fixture_and_a_negative_case():
    fixture_rules = set()
    for case in fixture_cases():
        if case.expect["class"] == "none":
            continue
        report = analyze([str(case.input)], _options(case))
        fixture_rules.update(i.rule for i in report.incidents)
    for rule in RULES:
        assert rule.id in fixture_rules, f"{rule.id}: no fixture exercises it"
        has_negative = any(not c.fires for c in rule.cases)
        assert has_negative, f"{rule.id}: add a [[cases]] entry with fires = false (a near miss)"


def _options(case):
    from analyzer.pipeline import Options

    return Options(command=case.user_command)


def test_docs_rule_table_is_generated_from_the_rules():
    page = (ROOT / "docs" / "rules.md").read_text("utf-8")
    assert page.count(TABLE_START) == 1 and page.count(TABLE_END) == 1
    start, end = page.index(TABLE_START), page.index(TABLE_END) + len(TABLE_END)
    assert page[start:end] + "\n" == rules_markdown(RULES), (
        "docs/rules.md rule table is stale: run `loganalyze rules --markdown` and paste it"
    )


BAD_RULES = {
    "not toml": ("id = ", "not valid TOML"),
    "missing severity": (
        'id = "x"\nclass = "c"\ntitle = "t"\nscope = "log"\n[doc]\ndetects="a"\nwhy="b"\nfix="c"\n',
        "missing required key 'severity'",
    ),
    "bad regex": (
        'id = "x"\nclass = "c"\ntitle = "t"\nseverity = "fatal"\nscope = "line"\n'
        'triggers = ["a"]\npatterns = ["(unclosed"]\n[doc]\ndetects="a"\nwhy="b"\nfix="c"\n',
        "bad pattern",
    ),
    "unknown key": (
        'id = "x"\nclass = "c"\ntitle = "t"\nseverity = "fatal"\nscope = "log"\nsevrity = 1\n'
        '[doc]\ndetects="a"\nwhy="b"\nfix="c"\n',
        "unknown key(s) sevrity",
    ),
    "unknown logic": (
        'id = "x"\nclass = "c"\ntitle = "t"\nseverity = "fatal"\nscope = "log"\nlogic = "nope"\n'
        '[doc]\ndetects="a"\nwhy="b"\nfix="c"\n',
        "logic 'nope' is not a function",
    ),
}


@pytest.mark.parametrize("name", sorted(BAD_RULES))
def test_malformed_user_rule_gets_a_one_line_error(name, tmp_path: Path):
    text, message = BAD_RULES[name]
    (tmp_path / "mine.toml").write_text(text, encoding="utf-8")
    with pytest.raises(RuleError) as error:
        load_rules([str(tmp_path)])
    assert str(error.value).startswith(str(tmp_path / "mine.toml"))
    assert message in str(error.value)
    assert "\n" not in str(error.value)


def test_user_rule_with_a_shipped_id_is_refused(tmp_path: Path):
    shipped = (ROOT / "rules" / "oom.toml").read_text("utf-8")
    (tmp_path / "oom.toml").write_text(shipped, encoding="utf-8")
    with pytest.raises(RuleError, match="id already used"):
        load_rules([str(tmp_path)])


CATASTROPHIC = """id = "slow"
class = "slow"
title = "slow"
severity = "warning"
scope = "line"
triggers = ["a"]
patterns = ['(a|aa)+$']
[doc]
detects = "x"
why = "y"
fix = "z"
"""


def test_catastrophic_user_pattern_cannot_hang_the_run(tmp_path: Path):
    import time

    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "slow.toml").write_text(CATASTROPHIC, encoding="utf-8")
    log = tmp_path / "run.log"
    log.write_text(("a" * 40 + "!\n") * 50, encoding="utf-8")
    from analyzer.pipeline import Options

    started = time.monotonic()
    report = analyze([str(log)], Options(rules_dirs=[str(tmp_path / "rules")]))
    assert time.monotonic() - started < 30
    assert any("rule slow" in w and "stopped" in w for w in report.warnings)


def test_rule_ids_shared_across_registries_agree_on_priority():
    """Rules, launch-command checks and session findings share one priority table (ordering
    incidents): an id in two of them with different priorities would silently take one."""
    from analyzer.rulebook.check_rules import CHECK_RULES
    from analyzer.transcripts.diagnose import PRIORITIES as SESSION_PRIORITIES

    seen: dict[str, tuple[str, int]] = {}
    registries = [
        ("rules/", {r.id: r.priority for r in RULES}),
        ("check_rules", {k: r.priority for k, r in CHECK_RULES.items()}),
        ("transcripts", SESSION_PRIORITIES),
    ]
    for name, table in registries:
        for rule_id, priority in table.items():
            if rule_id in seen:
                other, other_priority = seen[rule_id]
                assert priority == other_priority, f"{rule_id}: {other} and {name} disagree"
            seen[rule_id] = (name, priority)
