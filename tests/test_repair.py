"""The repair search (analyzer/repair/search.py), its predictions (analyzer/repair/predict.py,
conditions.py) and batch verification: a corrected command survives every later check."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from analyzer.core.model import Edit, Finding, Frame, Line, Match, Traceback
from analyzer.pipeline import Options, analyze
from analyzer.repair.fixes import FixPlan
from analyzer.repair.predict import predict
from analyzer.repair.search import failing_site, search
from analyzer.sglang.catalog import load_catalog
from analyzer.sglang.error_catalog import load_error_catalog
from analyzer.sglang.launch_command import parse_launch_command
from tests.fixture_cases import fixture_cases, read_sidecar

ROOT = Path(__file__).resolve().parent.parent
LAUNCH = "python -m sglang.launch_server --model-path fixtures/models/llama-target --device cpu"
EAGLE3 = (
    " --speculative-algorithm EAGLE3 --speculative-draft-model-path fixtures/models/eagle3-draft"
)
CATALOG = load_catalog("0.5.23")
ERRORS = load_error_catalog("0.5.23")


def _command(text: str):
    command = parse_launch_command(text, CATALOG.takes_value)
    assert command is not None
    return command


def _messages(text: str) -> list[str]:
    return [p.message for p in predict(_command(text), CATALOG, ERRORS)]


def _fails_on(site_text: str, exception: str, message: str) -> Finding:
    """The Finding of a resolution error raised at the catalogued site holding `site_text`."""
    site = next(s for s in ERRORS.entries if site_text in s.message)
    frame = Frame(
        f"/venv/lib/python3.11/site-packages/sglang/{site.file}", site.line, site.function
    )
    line = Line("run.log", 9, f"{exception}: {message}", f"{exception}: {message}")
    traceback = Traceback((line,), (frame,), exception, message)
    match = Match("config-validation", line, None, {"message": message}, (line,), (), traceback)
    return Finding(match, "config_validation", message, "fatal", list(site.flags), message, [])


def test_a_bare_rename_is_predicted_to_hit_the_speculative_assertion():
    found = _messages(f"{LAUNCH}{EAGLE3} --speculative-num-draft-tokens 4")
    assert any("without --speculative-num-steps" in m for m in found), found


def test_vllm_speculated_tokens_become_sglangs_chain():
    """vLLM's --num-speculative-tokens N is N draft steps: steps N, topk 1, draft tokens N+1."""
    typed = f"{LAUNCH}{EAGLE3} --num-speculative-tokens 4"
    line = Line(
        "run.log", 1, "", "sglang serve: error: unrecognized arguments: --num-speculative-tokens 4"
    )
    report = analyze([str(_log(line.body))], Options(command=typed))
    corrected = report.incidents[0].corrected_command
    assert corrected is not None
    assert "--speculative-num-steps 4" in corrected
    assert "--speculative-eagle-topk 1" in corrected
    assert "--speculative-num-draft-tokens 5" in corrected
    assert _messages(corrected) == []


def _log(error_line: str) -> Path:
    folder = ROOT / "tests" / "artifacts"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "repair-unrecognized.log"
    path.write_text(f"usage: sglang serve [-h] [--model-path MODEL_PATH]\n{error_line}\n")
    return path


def test_conditions_relating_two_typed_flags_are_judged():
    assert any(
        "divisible by page_size" in m
        for m in _messages(f"{LAUNCH} --chunked-prefill-size 1000 --page-size 16")
    )
    assert _messages(f"{LAUNCH} --chunked-prefill-size 1024 --page-size 16") == []
    exclusive = _messages(f"{LAUNCH} --enable-hierarchical-cache --disable-radix-cache")
    assert any("mutually exclusive" in m for m in exclusive), exclusive


def test_a_setting_alone_or_a_model_specific_handler_is_not_claimed():
    # `cfg.pp_size != 1` guards DFLASH only; IQuest wants its own draft: neither applies here
    assert _messages(f"{LAUNCH} --pp-size 2") == []
    same_draft = f"{LAUNCH} --speculative-algorithm STANDALONE --speculative-draft-model-path fixtures/models/llama-target"
    assert not [
        m
        for m in _messages(same_draft + " --speculative-num-steps 3 --speculative-eagle-topk 1")
        if "IQuest" in m
    ]


def test_a_divisibility_failure_gets_the_nearest_value_the_condition_accepts():
    typed = f"{LAUNCH} --chunked-prefill-size 1000 --page-size 16"
    finding = _fails_on(
        "chunked_prefill_size must be divisible by page_size",
        "AssertionError",
        "chunked_prefill_size must be divisible by page_size",
    )
    site = failing_site(finding, CATALOG)
    assert site is not None and "page_size" in site.condition
    outcome = search(_command(typed), CATALOG, finding, FixPlan(), site)
    best = outcome.repaired[0]
    assert best.edits == [Edit("set", "--chunked-prefill-size", value="992")]
    assert all(_messages(r.command.render()) == [] for r in outcome.repaired)


def test_exclusive_flags_lose_one_of_them_not_both():
    typed = f"{LAUNCH} --enable-hierarchical-cache --disable-radix-cache"
    message = "The arguments enable-hierarchical-cache and disable-radix-cache are mutually exclusive and cannot be used at the same time. Please use only one of them."
    finding = _fails_on("are mutually exclusive and cannot be used at", "ValueError", message)
    outcome = search(_command(typed), CATALOG, finding, FixPlan(), failing_site(finding, CATALOG))
    assert [e.op for e in outcome.repaired[0].edits] == ["remove"]


def test_a_switch_given_true_as_a_word_loses_the_word():
    found = predict(_command(f"{LAUNCH} --trust-remote-code true --tp-size 2"), CATALOG, ERRORS)
    assert found[0].plan.edits == [Edit("remove", "true")]
    fixed = _command(f"{LAUNCH} --trust-remote-code true --tp-size 2").apply(
        found[0].plan.edits, CATALOG.canonical
    )
    assert fixed.render() == f"{LAUNCH} --trust-remote-code --tp-size 2"


def test_turning_speculation_off_is_the_last_resort_and_says_so():
    typed = f"{LAUNCH} --speculative-algorithm STANDALONE --speculative-draft-model-path fixtures/models/llama-target --speculative-num-steps 3 --speculative-eagle-topk 1 --tp-size 2 --attn-dp-size 2 --enable-dp-attention"
    message = "Currently standalone speculative decoding does not support dp attention."
    finding = _fails_on(message, "ValueError", message)
    outcome = search(_command(typed), CATALOG, finding, FixPlan(), failing_site(finding, CATALOG))
    best = outcome.repaired[0]
    assert not any(e.flag == "--speculative-algorithm" for e in best.edits), best.edits
    for repaired in outcome.repaired:
        if any(e.op == "remove" and e.flag == "--speculative-algorithm" for e in repaired.edits):
            assert any("speculative decoding is turned off" in n for n in repaired.notes)


CORRECTED = [c for c in fixture_cases() if c.expect.get("corrected_command")]


@pytest.mark.parametrize("case", CORRECTED, ids=[c.id for c in CORRECTED])
def test_no_corrected_command_of_a_fixture_fails_a_later_check(case):
    """The issue's bar: a corrected command clears the first error and every later one."""
    version = case.fixture.get("sglang_version") or case.expect.get("catalog_version")
    catalog = load_catalog(version) if version else CATALOG
    command = parse_launch_command(case.expect["corrected_command"], catalog.takes_value)
    assert command is not None
    assert predict(command, catalog, load_error_catalog(catalog.version)) == []


def test_json_alternatives_are_clean_commands_too():
    sidecar = ROOT / "fixtures" / "real" / "spec_eagle3_topk_without_steps.toml"
    typed = read_sidecar(sidecar).fixture["command"]
    report = analyze([str(sidecar.with_suffix(".log"))], Options(command=typed))
    root = report.incidents[0]
    assert root.alternatives, "the search keeps the next-best clean commands"
    for alternative in root.alternatives:
        assert alternative.command != root.corrected_command
        assert _messages(alternative.command) == []


REPAIR_MODULES = ("analyzer.repair.search", "analyzer.sglang.error_catalog")


def test_the_repair_search_loads_only_for_a_command_to_repair():
    """A log whose launch command is unknown needs no repair search nor error catalog (ten
    dataclasses and their imports at start-up); the same log with its command gets both."""
    sidecar = ROOT / "fixtures" / "real" / "invalid_ambiguous_speculative_draft_path.toml"
    typed = read_sidecar(sidecar).fixture["command"]
    probe = (
        "import sys; from analyzer import cli; sys.argv = ['loganalyze', *sys.argv[1:]]\n"
        "try:\n    cli.main()\nexcept SystemExit:\n    pass\n"
        f"print([m in sys.modules for m in {REPAIR_MODULES!r}], file=sys.stderr)"
    )
    log = str(sidecar.with_suffix(".log"))
    for extra, loaded, corrected in (([], False, None), (["--command", typed], True, typed)):
        done = subprocess.run(
            [sys.executable, "-c", probe, log, "-f", "json", *extra],
            capture_output=True,
            text=True,
            cwd=ROOT,
        )
        root = json.loads(done.stdout)["incidents"][0]
        assert root["class"] == "argparse_invalid"
        assert (root["corrected_command"] is not None) == (corrected is not None)
        assert done.stderr.strip().splitlines()[-1] == str([loaded] * len(REPAIR_MODULES))


@pytest.mark.sglang
@pytest.mark.skipif(
    not os.environ.get("LOGANALYZE_SGLANG_PYTHON"), reason="LOGANALYZE_SGLANG_PYTHON is not set"
)
def test_batch_verification_matches_one_by_one():
    from analyzer.sglang.verify import verify_commands

    commands = [
        LAUNCH,
        f"{LAUNCH}{EAGLE3} --speculative-num-draft-tokens 4",
        f"{LAUNCH} --tp-size two",
        f"{LAUNCH}{EAGLE3} --speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4",
    ]
    verdicts = verify_commands(commands)
    assert [v.status for v in verdicts] == ["pass", "fail", "fail", "pass"]
    assert verdicts[1].message == "AssertionError"
    assert "invalid int value: 'two'" in verdicts[2].message
