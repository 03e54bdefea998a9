"""benchmarks/fix_accept.py: which inputs it reads, and how it counts them."""

from __future__ import annotations

from pathlib import Path

from benchmarks.fix_accept import Case, _sidecar_source, fixture_cases, tally, wild_cases
from benchmarks.wild_score import NOT_A_FAILURE, read_held_out


def test_wild_cases_leave_the_held_out_third_out():
    held = read_held_out()
    cases = wild_cases()
    assert cases
    for case in cases:
        sidecar = case.input.with_suffix(".toml")
        assert _sidecar_source(sidecar) not in held, case.name
        assert case.expected not in NOT_A_FAILURE


def test_fixture_cases_are_failures_with_their_recorded_command():
    cases = {c.name: c for c in fixture_cases()}
    assert "real/config_context_length_exceeds_model" in cases
    assert cases["real/config_context_length_exceeds_model"].user_command.endswith("8192")
    assert all(c.expected not in NOT_A_FAILURE for c in cases.values())


def _case(**fields) -> Case:
    return Case("x", Path("x.log"), "oom", **fields)


def test_tally_counts_fixes_outside_the_command_apart():
    cases = [
        _case(
            command="a", command_source="log", corrected="b", accepted=True, given_accepted=False
        ),
        _case(
            command="a", command_source="log", corrected="b", accepted=False, given_accepted=True
        ),
        _case(command="a", command_source="log", outside=True),
        _case(command="a", command_source="reconstructed", corrected="b", accepted=True),
        _case(),
    ]
    t = tally(cases)
    assert t["failures"] == 5
    assert t["with_command"] == 3
    assert t["outside_command"] == 1
    assert (t["offered"], t["accepted"], t["fixable"]) == (2, 1, 2)
    assert (t["accepted_of_rejected"], t["given_rejected"]) == (1, 1)


def test_an_accepted_command_that_dropped_a_typed_flag_loses_intent():
    cases = [
        _case(command="a", command_source="log", corrected="b", accepted=True),
        _case(command="a", command_source="log", corrected="c", accepted=True, lost=["--x"]),
        _case(command="a", command_source="log", corrected="d", accepted=False, lost=["--y"]),
    ]
    t = tally(cases)
    assert (t["accepted"], t["accepted_intent_kept"], t["intent_lost"]) == (2, 1, 1)
