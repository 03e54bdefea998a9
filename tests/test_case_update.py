"""The update step of the sidecar cases, on a copy of a fixture (never the checkout's files):
a wrong expectation is rewritten to what the analyzer reports, key by key, every other byte
kept; a right one stays byte-identical; a normal run never writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analyzer.pipeline import Options, analyze
from tests.case_update import UPDATE_VARIABLE, rewrite_expect
from tests.fixture_cases import FIXTURES, read_sidecar
from tests.test_fixtures import test_fixture_meets_its_expectation as run_case

SOURCE = FIXTURES / "real" / "spec_eagle3_topk_without_steps.toml"
TEMPLATE = """# a copy of {name}, with comments the update must keep
[fixture]
origin = "real"
command = {command}   # as typed
note = "kept as written"

[expect]
# the root cause
class   = {klass}
line = {line}   # the decisive line
flags = {flags}
{corrected}
verified = true  # a claim a person makes: never rewritten

[[warnings]]
rule = "kept"
"""


def _copy(tmp_path: Path, **values: str) -> Path:
    """The fixture's log and a sidecar written from TEMPLATE with the given TOML values."""
    (tmp_path / "case.log").write_bytes(SOURCE.with_suffix(".log").read_bytes())
    sidecar = tmp_path / "case.toml"
    sidecar.write_text(
        TEMPLATE.format(
            name=SOURCE.name, command=json.dumps(read_sidecar(SOURCE).fixture["command"]), **values
        ),
        encoding="utf-8",
    )
    return sidecar


@pytest.fixture(scope="module")
def reported() -> dict[str, str]:
    """What the analyzer reports for the fixture, as TOML values."""
    case = read_sidecar(SOURCE)
    root = analyze([str(case.input)], Options(command=case.user_command)).incidents[0]
    return {
        "klass": json.dumps(root.rule_class),
        "line": str(root.line),
        "flags": json.dumps(root.offending_flags),
        "corrected": f"corrected_command = {json.dumps(root.corrected_command)}",
    }


WRONG = {
    "klass": '"oom"',
    "line": "7",
    "flags": '[\n    "--tp-size",  # a comment inside the array\n]',
    "corrected": 'corrected_command = "python -m sglang.launch_server --tp 2"  # old',
}


def test_a_wrong_expectation_is_rewritten_to_the_report(tmp_path, monkeypatch, reported):
    monkeypatch.setenv(UPDATE_VARIABLE, "1")
    sidecar = _copy(tmp_path, **WRONG)
    with pytest.warns(UserWarning, match="class, line, flags, corrected_command"):
        run_case(read_sidecar(sidecar))
    right = {**reported, "corrected": reported["corrected"] + "  # old"}
    assert sidecar.read_text("utf-8") == TEMPLATE.format(
        name=SOURCE.name,
        command=json.dumps(read_sidecar(SOURCE).fixture["command"]),
        **right,
    )
    run_case(read_sidecar(sidecar))  # and now it holds


def test_a_right_expectation_leaves_the_file_byte_identical(tmp_path, monkeypatch, reported):
    monkeypatch.setenv(UPDATE_VARIABLE, "1")
    sidecar = _copy(tmp_path, **reported)
    before = sidecar.read_bytes()
    run_case(read_sidecar(sidecar))
    assert sidecar.read_bytes() == before


def test_without_the_variable_nothing_is_written(tmp_path, monkeypatch):
    monkeypatch.delenv(UPDATE_VARIABLE, raising=False)
    sidecar = _copy(tmp_path, **WRONG)
    before = sidecar.read_bytes()
    with pytest.raises(AssertionError):
        run_case(read_sidecar(sidecar))
    assert sidecar.read_bytes() == before


def test_a_claim_no_report_value_checks_is_never_rewritten(tmp_path, monkeypatch, reported):
    """`explanation_contains` is a person's claim: the update leaves it, and the case fails."""
    monkeypatch.setenv(UPDATE_VARIABLE, "1")
    sidecar = _copy(tmp_path, **reported)
    text = sidecar.read_text("utf-8").replace(
        "verified = true", 'verified = true\nexplanation_contains = ["no such words"]'
    )
    sidecar.write_text(text, encoding="utf-8")
    with pytest.raises(AssertionError):
        run_case(read_sidecar(sidecar))
    assert sidecar.read_text("utf-8") == text


def test_only_the_expect_table_is_rewritten(tmp_path):
    sidecar = tmp_path / "x.toml"
    sidecar.write_text("[expect]\nline = 1\n[other]\nline = 2\n", encoding="utf-8")
    rewrite_expect(sidecar, {"line": 3})
    assert sidecar.read_text("utf-8") == "[expect]\nline = 3\n[other]\nline = 2\n"
    with pytest.raises(KeyError):
        rewrite_expect(sidecar, {"rule": "absent"})
