"""The generic fixture runner: every fixture against its expectation sidecar.

Adding a rule means adding a fixture and a sidecar (see fixtures/README.md), not a test.
`LOGANALYZE_UPDATE_CASES=1` rewrites the `[expect]` values that differ from the report first
(tests/case_update.py, docs/testing.md#updating-expectations).
"""

from __future__ import annotations

import pytest

from analyzer.pipeline import Options, analyze
from tests.case_update import expectation
from tests.fixture_cases import fixture_cases

CASES = fixture_cases()


@pytest.fixture(params=CASES, ids=[c.id for c in CASES])
def case(request):
    return request.param


def test_fixture_meets_its_expectation(case):
    report = analyze([str(case.input)], Options(command=case.user_command))
    expect = expectation(case, report)
    if expect["class"] == "none":
        assert_no_server_incident(report, expect.get("client_error"))
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


def assert_no_server_incident(report, client: str | None) -> None:
    """`class = "none"`: no fatal or error incident (warnings and info findings may be
    there: a deprecated flag, shutdown noise). `client_error = "..."`: a client failed next
    to a healthy server; the analyzer reports that failure as a `client_error` of severity
    info naming the client (a program or script named in the sidecar's text), and the
    verdict says so."""
    serious = [(i.rule_class, i.severity) for i in report.incidents if i.severity in SERIOUS]
    assert serious == [], serious
    if not [i for i in report.incidents if i.severity != "info"]:
        assert report.verdict in ("no incident", "client_error")
    findings = [i for i in report.incidents if i.rule_class == "client_error"]
    for finding in findings:
        assert finding.severity == "info"
        if client is not None:
            assert any(name in finding.title for name in client_names(client)), finding.title
    if client is not None:
        assert findings, "the client's failure is not reported"
        assert report.verdict == "client_error"


SERIOUS = ("fatal", "error")


def client_names(described: str) -> list[str]:
    """The names a sidecar's client description gives: its first word and any script."""
    words = described.replace("(", " ").replace(")", " ").split()
    return [words[0], *(w for w in words if w.endswith(".py"))]


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
