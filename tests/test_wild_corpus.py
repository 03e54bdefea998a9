"""The wild corpus is measured, not asserted case by case: its split is fixed, its sidecars
well-formed, and the part rules may be written from keeps a floor (benchmarks/wild_score.py)."""

from __future__ import annotations

import pytest
import regex

from benchmarks import wild_score
from tests.fixture_cases import Case, sidecar_cases

CLASSES = {
    "argparse_unrecognized", "argparse_invalid", "config_validation", "incompatible_flags",
    "spec_assertion", "hidden_dim_mismatch", "weight_key_mismatch", "model_load", "environment",
    "oom", "cuda_error", "nccl_distributed", "cuda_graph_capture", "port_in_use",
    "watchdog_timeout", "warmup_failure", "silent_death", "startup_stall", "runtime_crash",
    "client_error", "none",
}  # fmt: skip
# Floors on the part that is not held out (raise them as the analyzer improves; never lower
# them to make a change pass). The held-out third is reported, never asserted.
CLASS_FLOOR = 0.93
FLAGS_FLOOR = 0.75
FATAL_PRECISION_FLOOR = 0.98


def _sidecars() -> list[Case]:
    return sidecar_cases(wild_score.WILD)


def test_the_held_out_split_is_the_hash_of_the_sources():
    sources = {case.fixture["source"] for case in _sidecars()}
    assert wild_score.read_held_out() == wild_score.held_out_sources(sources)
    assert len(sources) >= 100 and len(_sidecars()) >= 150


def test_every_wild_sidecar_says_where_it_comes_from_and_what_it_shows():
    for case in _sidecars():
        fixture, expect = case.fixture, case.expect
        assert fixture["origin"] == "wild" and "#" in fixture["source"]
        assert fixture["confidence"] in ("high", "medium", "low")
        assert expect["class"] in CLASSES
        assert all(f.startswith("--") for f in expect.get("flags", []))


@pytest.fixture(scope="module")
def scoreboard() -> dict:
    return wild_score.run()


def test_the_part_rules_are_written_from_keeps_its_floor(scoreboard):
    rest = scoreboard["not_held_out"]
    assert rest["class_top1"] >= CLASS_FLOOR, rest
    assert rest["flags"] >= FLAGS_FLOOR, rest


def test_no_fatal_incident_on_a_healthy_input(scoreboard):
    assert scoreboard["fatal_precision"]["precision"] >= FATAL_PRECISION_FLOOR


# An exception or argparse error anywhere in a line, whatever wraps it (read independently of
# the analyzer's own normalize stage).
FAILURE_SHOWN = regex.compile(
    r"(?:^|[\s|:>\]])(?:[a-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)(?::|$)|\berror: (?:unrecognized "
    r"arguments|argument --)"
)


def test_an_input_that_shows_an_exception_or_argparse_error_is_never_no_incident(scoreboard):
    by_name = {c["case"]: c for c in scoreboard["cases"]}
    for case in wild_score.load_cases(wild_score.WILD):
        if case.expected in wild_score.NOT_A_FAILURE:
            continue
        text = case.input.read_text("utf-8", errors="replace")
        if any(FAILURE_SHOWN.search(line) for line in text.splitlines()):
            assert by_name[case.name]["predicted"] != "none", case.name
