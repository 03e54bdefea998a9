"""The generic fixture runner: every fixture against its expectation sidecar.

Adding a rule means adding a fixture and a sidecar (see fixtures/README.md), not a test.
"""

from __future__ import annotations

import pytest

from analyzer.pipeline import Options, analyze
from tests.fixture_cases import fixture_cases

CASES = fixture_cases()


@pytest.fixture(params=CASES, ids=[c.id for c in CASES])
def case(request):
    return request.param


def test_fixture_meets_its_expectation(case):
    report = analyze([str(case.input)], Options(command=case.user_command))
    expect = case.expect
    if expect["class"] == "none":
        assert report.incidents == [], [i.rule_class for i in report.incidents]
        assert report.verdict == "no incident"
        return
    assert report.incidents, "no incident found"
    root = report.incidents[0]
    assert root.rule_class == expect["class"], [i.rule_class for i in report.incidents]
    if "rule" in expect:
        assert root.rule == expect["rule"]
    if "line" in expect:
        assert root.line == expect["line"]
    if "flags" in expect:
        assert sorted(root.offending_flags) == sorted(expect["flags"])
    if "ranks" in expect:
        assert root.ranks == expect["ranks"]
    if "incidents" in expect:
        assert len(report.incidents) == expect["incidents"], [
            i.rule_class for i in report.incidents
        ]
    if "catalog_version" in expect:
        assert report.catalog_version == expect["catalog_version"], report.inputs[0].catalog_reason
    if "command_source" in expect:
        assert root.command_source == expect["command_source"]
    if "corrected_command" in expect:
        assert root.corrected_command == expect["corrected_command"]
    if expect.get("no_correction"):
        assert root.corrected_command is None
    for absent in expect.get("not_classes", []):
        assert absent not in [i.rule_class for i in report.incidents]
    for text in expect.get("explanation_contains", []):
        assert text in root.explanation
    for text in expect.get("advice_contains", []):
        assert any(text in a for a in root.advice), root.advice


def test_every_fixture_records_its_origin():
    for case in CASES:
        origin = case.fixture.get("origin")
        assert origin in ("real", "source", "documented-format", "synthetic"), case.id
        if origin == "real":
            assert case.fixture.get("command") and case.fixture.get("sglang_version"), case.id
        else:
            assert case.fixture.get("note"), f"{case.id}: say what the fixture follows"


VERIFIED = [c for c in CASES if c.expect.get("corrected_command") and c.expect.get("verified")]


@pytest.mark.parametrize("case", VERIFIED, ids=[c.id for c in VERIFIED])
def test_verified_corrections_pass_the_committed_catalog(case):
    """Corrections real SGLang accepted (generator --check) also pass our catalog check."""
    from analyzer.sglang.catalog import load_catalog
    from analyzer.sglang.catalog_check import validate
    from analyzer.sglang.launch_command import parse_launch_command

    catalog = load_catalog(case.fixture.get("sglang_version"))
    command = parse_launch_command(case.expect["corrected_command"], catalog.takes_value)
    assert command is not None
    assert validate(command, catalog) == []
