"""The fragments corpus is measured, not asserted case by case (benchmarks/fragments_score.py):
its split is fixed, its sidecars say where each text comes from, and its negatives stay clean."""

from __future__ import annotations

from benchmarks import fragments_score
from tests.fixture_cases import Case, sidecar_cases
from tests.test_wild_corpus import CLASSES

SHAPES = {
    "bare", "json", "http500", "ray", "unindented", "collapsed", "scheduler", "terminate",
    "device-assert", "glog", "log-level", "death", "usage-cut", "truncated", "healthy",
}  # fmt: skip


def _sidecars() -> dict[str, Case]:
    return {case.name: case for case in sidecar_cases(fragments_score.FRAGMENTS)}


def test_the_held_out_split_is_the_hash_of_the_names():
    names = set(_sidecars())
    assert fragments_score.read_held_out() == fragments_score.held_out_names(names)


def test_the_corpus_has_its_size():
    sidecars = _sidecars()
    negatives = [n for n, c in sidecars.items() if c.expect["class"] == "none"]
    assert len(sidecars) - len(negatives) >= 150 and len(negatives) >= 40


def test_every_sidecar_says_where_its_text_comes_from_and_what_it_shows():
    for name, case in _sidecars().items():
        fixture, expect = case.fixture, case.expect
        assert fixture["origin"] in ("source", "documented-format"), name
        assert fixture["source"] and fixture["shape"] in SHAPES, name
        assert expect["class"] in CLASSES | {"unknown"}, name
        assert name.startswith("neg_") == (expect["class"] == "none"), name
        if expect["class"] != "none":
            # a paste cut before its cause is expected to claim none
            assert expect["cause_in_paste"] == (expect["class"] != "unknown"), name
        assert fragments_score.FRAGMENTS.joinpath(f"{name}.log").exists(), name


def test_no_negative_gets_a_fatal_or_error_incident():
    held = fragments_score.read_held_out()
    cases = [
        c for c in fragments_score.load_cases(fragments_score.FRAGMENTS) if c.expected == "none"
    ]
    for case in cases:
        fragments_score.predict(case)
    fired = [c for c in cases if c.predicted not in fragments_score.NOT_A_FAILURE]
    # held-out negatives are counted, not named
    assert [c.name for c in fired if c.name not in held] == []
    assert sum(c.name in held for c in fired) == 0
