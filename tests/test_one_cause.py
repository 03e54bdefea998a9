"""One incident per cause: a failure printed by several ranks is one incident, and an OOM
caused by GPUs other processes held hangs under that cause."""

from __future__ import annotations

import json

import pytest

from analyzer.core.model import Incident, Line
from analyzer.formats.json_report import render_json
from analyzer.incidents.collate import merge_ranks
from analyzer.incidents.one_cause import number_consequences
from analyzer.pipeline import Options, analyze
from tests.fixture_cases import fixture_cases

TRANSCRIPTS = [c for c in fixture_cases() if c.id.startswith("transcripts/")]


def _incident(body: str, rank: str, rule: str = "oom", severity: str = "fatal") -> Incident:
    line = Line("x.log", 7, f"[{rank}] {body}", body)
    return Incident(
        rule_class=rule, rule=rule, title=rule, severity=severity, source="x.log", line=7,
        ranks=[rank], evidence=[line], span=None, offending_flags=[], explanation="",
        advice=[],
    )  # fmt: skip


def test_the_same_failure_on_two_gpus_is_one_incident_listing_both():
    first = _incident("CUDA out of memory. GPU 0 has a total capacity of 79.15 GiB", "TP1")
    second = _incident("CUDA out of memory. GPU 1 has a total capacity of 79.15 GiB", "TP0")
    merged = merge_ranks([first, second])
    assert merged == [first]
    assert first.ranks == ["TP0", "TP1"]


def test_different_failures_and_warnings_stay_apart():
    oom = _incident("CUDA out of memory. Tried to allocate 2 GiB", "TP0")
    other = _incident("CUDA error: an illegal memory access was encountered", "TP1")
    warned = [_incident(f"port {n} busy", "TP0", "port", "warning") for n in (1, 2)]
    assert len(merge_ranks([oom, other, *warned])) == 4


def test_consequences_of_one_cause_merge_under_it():
    cause = _incident("nvidia-smi: 61458MiB / 81559MiB", "", "gpus", "fatal")
    ooms = [_incident(f"out of memory while loading, rank {n}", f"TP{n}") for n in (0, 1)]
    ooms.append(_incident("OutOfMemoryError: KV cache", "TP1"))
    for oom in ooms:
        oom.cause = cause
    merged = merge_ranks([cause, *ooms])
    assert merged == [cause, ooms[0]]
    number_consequences(merged)
    assert ooms[0].consequence_of == 0 and cause.consequence_of is None


@pytest.mark.parametrize("case", TRANSCRIPTS, ids=lambda c: c.id)
def test_at_most_two_causes_per_failed_attempt(case):
    report = json.loads(render_json(analyze([str(case.input)], Options())))
    for attempt in report["attempts"]:
        if attempt["outcome"] != "failed":
            continue
        causes = [
            i
            for i in report["incidents"]
            if i["attempt"] == attempt["attempt"] and i["severity"] in ("fatal", "error")
        ]
        assert 1 <= len(causes) <= 2, [i["rule"] for i in causes]
        for incident in causes:
            if "consequence_of" in incident:
                cause = report["incidents"][incident["consequence_of"]]
                assert cause["attempt"] == attempt["attempt"] and "consequence_of" not in cause


def test_the_ooms_of_held_gpus_are_one_incident_under_the_gpus():
    case = next(c for c in TRANSCRIPTS if c.id.endswith("codex_unified_exec_gpus_busy_then_oom"))
    report = json.loads(render_json(analyze([str(case.input)], Options())))
    held, oom = report["incidents"][:2]
    assert held["class"] == "gpus_occupied" and "consequence_of" not in held
    assert oom["class"] == "oom" and oom["consequence_of"] == 0
    assert oom["ranks"] == ["TP0", "TP1"]
