"""Corrected commands keep what the user typed (issue 34): a flag is dropped only when SGLang's
flag history, its word vocabulary and its choices show no counterpart, and the drop says so.
"""

from __future__ import annotations

import pytest

from analyzer.core.model import Incident
from analyzer.pipeline import Options, analyze
from analyzer.repair.fixes import replacement_for
from analyzer.repair.switch_counterparts import switch_counterpart
from analyzer.sglang.catalog import load_catalog
from analyzer.sglang.choice_aliases import choice_named
from analyzer.sglang.flag_history import shipped_history
from analyzer.sglang.flag_words import option_in_other_words
from analyzer.sglang.launch_command import parse_launch_command
from benchmarks.fix_accept import wild_cases
from tests.fixture_cases import fixture_cases

CATALOG = load_catalog("0.5.23")
# every failure fixture with its command, and the wild corpus's cases that are not held out
CASES = [
    (c.id, c.input, c.user_command)
    for c in fixture_cases()
    if c.expect.get("class", "none") != "none"
] + [(c.name, c.input, None) for c in wild_cases()]


def _counterpart(flag: str, value: str | None, command: str) -> str | None:
    """What SGLang has for a typed flag it rejected, or for a value outside its choices."""
    spec = CATALOG.spec(flag)
    if spec is not None:
        if spec.choices and value is not None and CATALOG.check_value(flag, value):
            return choice_named(value, spec.choices)
        return None
    target, _ = replacement_for(flag, CATALOG)
    if target is not None:
        return target
    parsed = parse_launch_command(command, CATALOG.takes_value)
    if parsed is None:
        return None
    tp = parsed.get("--tp-size") or parsed.get("--tp") or parsed.get("--tensor-parallel-size")
    found = switch_counterpart(flag, parsed, CATALOG, int(tp) if tp and tp.isdigit() else None)
    return found[0].to if found else None


def _drops(incident: Incident) -> list[tuple[str, str | None]]:
    parsed = parse_launch_command(incident.command or "", CATALOG.takes_value)
    if parsed is None:
        return []
    return [(e.flag, parsed.get(e.flag)) for e in incident.edits if e.op == "remove"]


@pytest.mark.parametrize(("name", "path", "command"), CASES, ids=[c[0] for c in CASES])
def test_no_corrected_command_drops_a_flag_sglang_has_a_counterpart_for(name, path, command):
    report = analyze([str(path)], Options(command=command))
    if report.catalog_version != CATALOG.version:
        pytest.skip("the counterparts are read against 0.5.23")
    for incident in report.incidents:
        if incident.corrected_command is None:
            continue
        for flag, value in _drops(incident):
            assert _counterpart(flag, value, incident.command or "") is None, (flag, value)


def test_the_vocabulary_maps_cut_and_spelled_out_words():
    assert option_in_other_words("--spec-algorithm", CATALOG) == "--speculative-algorithm"
    assert option_in_other_words("--attention-dp-size", CATALOG) == "--attn-dp-size"
    assert option_in_other_words("--memory-fraction-static", CATALOG) == "--mem-fraction-static"
    assert option_in_other_words("--max-running-reqs", CATALOG) == "--max-running-requests"
    assert option_in_other_words("--foo-bar", CATALOG) is None


def test_choices_map_library_names_read_from_sglang():
    backends = CATALOG.spec("--attention-backend").choices
    assert choice_named("flash-attention-3", backends) == "fa3"
    assert choice_named("TorchNativeAttention", backends) == "torch_native"
    assert choice_named("torch-flex", backends) == "flex_attention"
    assert choice_named("no-such-kernel", backends) is None
    dtypes = CATALOG.spec("--kv-cache-dtype").choices
    assert choice_named("float8_e4m3fn", dtypes) == "fp8_e4m3"


def test_history_follows_deprecation_messages_with_their_values():
    history = shipped_history()
    change = history.change("--hybrid-kvcache-ratio", CATALOG)
    assert change is not None and change.replacement == "--swa-full-tokens-ratio"
    change = history.change("--enable-nsa-prefill-context-parallel", CATALOG)
    assert change is not None and change.replacement == "--enable-prefill-cp"
    change = history.change("--disable-piecewise-cuda-graph", CATALOG)
    assert change is not None
    assert (change.replacement, change.value) == ("--cuda-graph-backend-prefill", "disabled")


def _corrected(tmp_path, error: str, command: str) -> Incident:
    log = tmp_path / "run.log"
    log.write_text(error, "utf-8")
    report = analyze([str(log)], Options(command=command))
    return report.incidents[0]


USAGE = "usage: sglang serve [-h] --model-path MODEL_PATH\nsglang serve: error: "
LAUNCH = "python -m sglang.launch_server --model-path /m"


def test_a_retired_switch_becomes_the_option_that_took_its_job(tmp_path):
    command = f"{LAUNCH} --tp-size 8 --enable-ep-moe"
    incident = _corrected(tmp_path, USAGE + "unrecognized arguments: --enable-ep-moe\n", command)
    assert incident.corrected_command == f"{LAUNCH} --tp-size 8 --ep-size 8"
    command = f"{LAUNCH} --enable-flashinfer-mla"
    error = USAGE + "unrecognized arguments: --enable-flashinfer-mla\n"
    incident = _corrected(tmp_path, error, command)
    assert incident.corrected_command == f"{LAUNCH} --attention-backend flashinfer"


def test_a_library_name_becomes_sglangs_choice(tmp_path):
    command = f"{LAUNCH} --attention-backend flash-attention-3"
    error = (
        USAGE + "argument --attention-backend: invalid choice: 'flash-attention-3' "
        "(choose from 'triton', 'torch_native', 'fa3', 'flashinfer')\n"
    )
    incident = _corrected(tmp_path, error, command)
    assert incident.corrected_command == f"{LAUNCH} --attention-backend fa3"
    assert not any(e.intent_lost for e in incident.edits)


def test_a_drop_with_no_counterpart_says_what_is_lost(tmp_path):
    command = f"{LAUNCH} --use-v2-block-manager"
    error = USAGE + "unrecognized arguments: --use-v2-block-manager\n"
    incident = _corrected(tmp_path, error, command)
    assert incident.corrected_command == LAUNCH
    assert [e.intent_lost for e in incident.edits] == [True]
    assert any("what it asked for is lost" in a for a in incident.advice)
    assert '"intent_lost": true' in __import__("json").dumps([e.as_json() for e in incident.edits])
