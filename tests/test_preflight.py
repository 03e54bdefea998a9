"""The pre-flight (analyzer/preflight) on config-only model folders beside commands
(fixtures/preflight/): `loganalyze verify --format json` refuses each failing one with the
class and flags the real failure has, and passes the healthy ones."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from analyzer.preflight import preflight
from analyzer.preflight.folders import Folders, folder_problems
from analyzer.repair.conditions import failing_sites
from analyzer.sglang.catalog import load_catalog
from analyzer.sglang.error_catalog import load_error_catalog
from analyzer.sglang.launch_command import parse_launch_command
from analyzer.sglang.model_registry import load_model_registry, shipped_registry_versions
from tests.fixture_cases import sidecar_cases

ROOT = Path(__file__).resolve().parent.parent
CASES = {c.name: c for c in sidecar_cases(ROOT / "fixtures/preflight", expect="preflight")}
SGLANG_PYTHON = os.environ.get("LOGANALYZE_SGLANG_PYTHON")
LAUNCH = "python -m sglang.launch_server --model-path"
MODELS = ROOT / "fixtures/preflight/models"


def verify(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    code = "import sys; from analyzer.cli import main; sys.argv[0] = 'loganalyze'; main()"
    return subprocess.run(
        [sys.executable, "-c", code, "verify", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env or {**os.environ, "PATH": os.environ.get("PATH", "")},
        timeout=600,
        check=False,
    )


def _no_sglang_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "LOGANALYZE_SGLANG_PYTHON"}
    env["PATH"] = os.path.dirname(sys.executable)  # no nvidia-smi
    return env


@pytest.mark.parametrize("name", sorted(CASES))
def test_verify_refuses_with_the_real_class_and_passes_healthy_ones(name: str) -> None:
    case = CASES[name]
    fixture, expect = case.fixture, case.expect
    proc = verify(
        fixture["command"], "--format", "json", "--no-sglang",
        "--sglang-version", fixture["sglang_version"], env=_no_sglang_env(),
    )  # fmt: skip
    report = json.loads(proc.stdout)
    blocking = [p for p in report["problems"] if p["blocking"]]
    if not expect["refused"]:
        assert proc.returncode == 0 and blocking == [], report["problems"]
        assert report["verdict"] == "passed"
        return
    assert proc.returncode == 1, proc.stderr
    assert report["verdict"] == "refused"
    first = blocking[0]
    assert first["class"] == expect["class"], blocking
    assert set(expect["flags"]) <= set(first["flags"]), blocking
    assert report["corrected_command"] == expect.get("corrected_command"), report


def test_json_report_is_byte_identical_and_keeps_its_fields() -> None:
    command = CASES["heads_not_divisible_by_tp"].fixture["command"]
    first = verify(command, "--format", "json", "--no-sglang", env=_no_sglang_env())
    again = verify(command, "--format", "json", "--no-sglang", env=_no_sglang_env())
    assert first.stdout == again.stdout
    report = json.loads(first.stdout)
    assert set(report) >= {"command", "verdict", "problems", "corrected_command", "edits", "sglang"}
    assert set(report["problems"][0]) >= {"check", "class", "flags", "message", "blocking"}


def test_text_report_names_the_class_and_the_corrected_command() -> None:
    command = CASES["context_length_beyond_model"].fixture["command"]
    proc = verify(command, "--no-sglang", env=_no_sglang_env())
    assert proc.returncode == 1
    assert "config_validation --context-length" in proc.stdout
    assert "--context-length 32768" in proc.stdout


def test_relative_paths_start_at_cwd(tmp_path: Path) -> None:
    command = f"{LAUNCH} fixtures/preflight/models/qwen2-7b-target --tp-size 8"
    here = preflight(command, ROOT, use_sglang=False, env={"PATH": ""})
    elsewhere = preflight(command, tmp_path, use_sglang=False, env={"PATH": ""})
    assert [p.rule_class for p in here.problems] == ["runtime_crash"]
    assert [p.check for p in elsewhere.problems if p.blocking] == ["paths"]


def test_a_non_sglang_command_is_not_refused() -> None:
    report = preflight("python train.py --epochs 3", ROOT, use_sglang=False, env={"PATH": ""})
    assert not report.refused and report.exit_code == 0
    assert report.notes == ["not an SGLang launch command: its flags were not checked"]


def test_every_shipped_release_has_a_model_registry_with_the_eagle_drafts() -> None:
    versions = shipped_registry_versions()
    assert versions and versions[-1] == load_catalog().version
    for version in versions:
        registry = load_model_registry(version)
        assert registry is not None
        assert registry.get("LlamaForCausalLMEagle3").draft == "EAGLE3"
        assert registry.get("LlamaForCausalLMEagle").draft == "EAGLE"
        assert registry.get("LlamaForCausalLM").draft is None
        assert "heads" in registry.get("LlamaForCausalLM").asserts


def test_draft_layer_names_follow_each_releases_load_weights() -> None:
    old = load_model_registry("0.5.6.post2").get("LlamaForCausalLMEagle3")
    new = load_model_registry("0.5.23").get("LlamaForCausalLMEagle3")
    assert old.layer_names == ("midlayer",)
    assert set(new.layer_names) == {"layers", "midlayer"}


def test_one_setting_ranges_count_only_in_validators() -> None:
    catalog = load_catalog()
    errors = load_error_catalog(catalog.version)
    base = f"{LAUNCH} m"
    ranged = parse_launch_command(f"{base} --tokenizer-worker-num 0", catalog.takes_value)
    found = failing_sites(ranged, catalog, errors, min_reads=1)
    assert [s.function.rsplit(".", 1)[-1] for s in found] == ["check_server_args"]
    # the repair search's default still needs a relation between two settings
    assert failing_sites(ranged, catalog, errors) == []
    healthy = parse_launch_command(f"{base} --tokenizer-worker-num 2", catalog.takes_value)
    assert failing_sites(healthy, catalog, errors, min_reads=1) == []


def test_kv_heads_below_tp_must_divide_it(tmp_path: Path) -> None:
    folder = tmp_path / "m"
    folder.mkdir()
    config = json.loads((MODELS / "llama-8b-target/config.json").read_text("utf-8"))
    (folder / "config.json").write_text(json.dumps({**config, "num_key_value_heads": 3}))
    values = {"--model-path": str(folder), "--tp-size": "8"}
    found = folder_problems(Folders(values, tmp_path, {}, load_model_registry("0.5.23")))
    assert [p.rule_class for p in found] == ["runtime_crash"]
    assert "3 KV heads" in found[0].message
    (folder / "config.json").write_text(json.dumps({**config, "num_key_value_heads": 2}))
    assert folder_problems(Folders(values, tmp_path, {}, load_model_registry("0.5.23"))) == []


@pytest.mark.sglang
@pytest.mark.skipif(not SGLANG_PYTHON, reason="needs LOGANALYZE_SGLANG_PYTHON")
def test_sglangs_own_verdict_is_merged() -> None:
    command = (
        f"{LAUNCH} fixtures/models/llama-target --device cpu --speculative-algorithm EAGLE3 "
        "--speculative-draft-model-path fixtures/models/eagle3-draft --speculative-draft-sink-size 4"
    )
    report = preflight(command, ROOT, use_sglang=True, env={"PATH": ""}, timeout=600)
    assert report.sglang["status"] == "fail"
    assert "--speculative-draft-sink-size" in report.sglang["message"]
    # SGLang's refusal is one problem: the static condition check already names it, else
    # SGLang's own verdict stands as a problem of its own
    (problem,) = [p for p in report.problems if "--speculative-draft-sink-size" in p.flags]
    assert problem.rule_class == "spec_assertion" and problem.blocking
    assert problem.check in ("condition", "sglang")
