"""Which catalog judges an input (analyzer/sglang/releases.py); real older-release runs are
in fixtures/versions/ and checked by the generic runner's `catalog_version`."""

from __future__ import annotations

import pytest

from analyzer.pipeline import Options, analyze
from tests.fixture_cases import FIXTURES, fixture_cases

ERROR = (
    "usage: sglang serve [-h] [--model-path MODEL_PATH]\n"
    "sglang serve: error: unrecognized arguments: --cuda-graph-max-bs-decode 8\n"
)


def _chosen(tmp_path, text: str, **options) -> tuple[str, str]:
    log = tmp_path / "run.log"
    log.write_text(text, encoding="utf-8")
    report = analyze([str(log)], Options(**options))
    return report.inputs[0].catalog_version, report.inputs[0].catalog_reason


def test_pip_show_in_the_input_names_the_release(tmp_path):
    version, reason = _chosen(tmp_path, f"Name: sglang\nVersion: 0.5.13\nLocation: /x\n{ERROR}")
    assert version == "0.5.13"
    assert reason == "sglang 0.5.13 stated in the input (line 2)"


def test_a_release_without_catalog_uses_the_nearest_older_one(tmp_path):
    version, reason = _chosen(tmp_path, f"Successfully installed sglang-0.5.21\n{ERROR}")
    assert version == "0.5.19"
    assert "no catalog for it" in reason


def test_sglang_version_option_wins_over_the_input(tmp_path):
    text = f"pip install sglang==0.5.13\n{ERROR}"
    assert _chosen(tmp_path, text, sglang_version="0.5.10.post1")[0] == "0.5.10.post1"


def test_no_evidence_means_the_newest_catalog(tmp_path):
    version, reason = _chosen(tmp_path, "hello\n")
    assert version == "0.5.23" and reason.startswith("no version evidence")


def test_a_rejected_flag_only_newer_releases_know_rules_them_out(tmp_path):
    command = "python -m sglang.launch_server --model-path m --cuda-graph-max-bs-decode 8"
    version, reason = _chosen(tmp_path, ERROR, command=command)
    assert version == "0.5.13" and "launch flags" in reason


def test_print_version_in_a_transcript_names_the_release(tmp_path):
    transcript = tmp_path / "session.txt"
    transcript.write_text(
        "$ python -c 'import sglang; print(sglang.__version__)'\n0.5.10.post1\n"
        "$ python -m sglang.launch_server --model-path m --cuda-graph-max-bs-decode 8\n" + ERROR,
        encoding="utf-8",
    )
    report = analyze([str(transcript)], Options(input_format="text"))
    assert report.inputs[0].catalog_version == "0.5.10.post1"
    root = report.incidents[0]
    assert any("new in sglang 0.5.19" in a for a in root.advice), root.advice


REAL = [c for c in fixture_cases() if c.input.parent == FIXTURES / "real"]


@pytest.mark.parametrize("case", REAL, ids=[c.id for c in REAL])
def test_real_0_5_23_runs_are_judged_by_the_0_5_23_catalog(case):
    report = analyze([str(case.input)], Options(command=case.user_command))
    assert report.inputs[0].catalog_version == case.fixture["sglang_version"] == "0.5.23"
