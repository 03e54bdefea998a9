"""Rendered reports of representative fixtures, pinned by syrupy snapshots.

Update deliberately with `pytest --snapshot-update` and read the diff.
"""

from __future__ import annotations

import pytest

from analyzer.formats.json_report import render_json
from analyzer.formats.terminal import render_plain
from analyzer.pipeline import Options, analyze
from tests.fixture_cases import ROOT, fixture_cases

REPRESENTATIVE = [
    "real/unrecognized_num_speculative_tokens",
    "real/unrecognized_set_x_wrapper",
    "real/spec_eagle3_topk_without_steps",
    "real/invalid_ambiguous_cuda_graph_max_bs",
    "source/oom_kv_cache_tp8",
    "source/oom_other_process",
]
CASES = {c.id: c for c in fixture_cases()}


@pytest.fixture(params=[c for c in REPRESENTATIVE if c in CASES])
def report(request, monkeypatch):
    monkeypatch.chdir(ROOT)
    case = CASES[request.param]
    path = case.input.relative_to(ROOT)
    return analyze([str(path)], Options(command=case.user_command))


def test_plain_terminal_report(report, snapshot):
    assert render_plain(report) == snapshot


def test_json_report(report, snapshot):
    assert render_json(report) == snapshot
