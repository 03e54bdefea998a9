"""The committed SGLang flag catalog, and the builder that writes it.

Everything but the last test runs without SGLang: it reads the committed JSON.
The `sglang` test rebuilds the catalog with a real SGLang (the Python named by
LOGANALYZE_SGLANG_PYTHON) and checks the committed file still matches it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from analyzer.sglang import catalog_build

ROOT = Path(__file__).resolve().parent.parent
CATALOG = ROOT / "analyzer" / "catalogs" / "sglang-0.5.23.json"
OPTION_KEYS = {
    "option_strings",
    "dest",
    "type",
    "choices",
    "default",
    "nargs",
    "required",
    "action",
    "help",
}
TOP_KEYS = {"sglang_version", "built", "how", "allow_abbrev", "options"}


@pytest.fixture(scope="module")
def catalog() -> dict:
    return json.loads(CATALOG.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def by_flag(catalog: dict) -> dict[str, dict]:
    return {flag: option for option in catalog["options"] for flag in option["option_strings"]}


def test_top_level_structure(catalog: dict) -> None:
    assert TOP_KEYS <= set(catalog)
    assert catalog["sglang_version"] == "0.5.23"
    assert catalog["allow_abbrev"] is True
    assert catalog["prog"] == "sglang serve"
    assert len(catalog["built"]) == 10 and catalog["built"][4] == "-"
    assert "loganalyze catalog build" in catalog["how"]
    assert len(catalog["options"]) > 300


def test_every_option_has_the_same_shape(catalog: dict) -> None:
    for option in catalog["options"]:
        assert set(option) == OPTION_KEYS, option
        assert isinstance(option["dest"], str) and option["dest"], option
        assert option["option_strings"], option
        assert all(flag.startswith("-") for flag in option["option_strings"]), option
        assert isinstance(option["required"], bool)
        assert isinstance(option["action"], str) and option["action"]
        assert option["choices"] is None or isinstance(option["choices"], list)
        assert option["type"] is None or isinstance(option["type"], str)


def test_options_sorted_by_first_option_string(catalog: dict) -> None:
    firsts = [option["option_strings"][0] for option in catalog["options"]]
    assert firsts == sorted(firsts)
    assert len(firsts) == len(set(firsts))


def test_no_flag_belongs_to_two_options(catalog: dict) -> None:
    flags = [flag for option in catalog["options"] for flag in option["option_strings"]]
    assert len(flags) == len(set(flags))


def test_tensor_parallel_size_is_an_alias_of_tp_size(by_flag: dict[str, dict]) -> None:
    option = by_flag["--tensor-parallel-size"]
    assert option is by_flag["--tp-size"]
    assert option["option_strings"] == ["--tp-size", "--tensor-parallel-size"]
    assert option["dest"] == "tp_size"
    assert option["type"] == "int"
    assert option["default"] == 1


def test_cuda_graph_max_bs_is_an_ambiguous_prefix(catalog: dict, by_flag: dict) -> None:
    assert "--cuda-graph-max-bs" not in by_flag
    matches = sorted(
        flag
        for option in catalog["options"]
        for flag in option["option_strings"]
        if flag.startswith("--cuda-graph-max-bs")
    )
    assert matches == ["--cuda-graph-max-bs-decode", "--cuda-graph-max-bs-prefill"]


def test_known_facts_the_fixtures_rely_on(by_flag: dict[str, dict]) -> None:
    assert by_flag["--model-path"]["required"] is True
    assert by_flag["--model"] is by_flag["--model-path"]
    assert by_flag["--speculative-draft-model"] is by_flag["--speculative-draft-model-path"]
    # No argparse choices: a bad algorithm name fails in resolution, not in argparse.
    assert by_flag["--speculative-algorithm"]["choices"] is None
    assert "fp8" not in by_flag["--kv-cache-dtype"]["choices"]
    assert by_flag["--disable-cuda-graph"]["action"] == "DeprecatedStoreTrueAction"
    assert by_flag["--trust-remote-code"]["action"] == "store_true"
    for vllm_only in ("--num-speculative-tokens", "--gpu-memory-utilization", "--max-model-len"):
        assert vllm_only not in by_flag


def test_catalog_is_json_safe_and_stable(catalog: dict) -> None:
    text = json.dumps(catalog, indent=1, ensure_ascii=False) + "\n"
    assert json.loads(text) == catalog
    assert " at 0x" not in text


def test_builder_imports_without_sglang() -> None:
    code = "import sys, analyzer.sglang.catalog_build; print('sglang' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert out.stdout.strip() == "False"


def test_first_sentence() -> None:
    first = catalog_build._first_sentence
    assert first("The port. More text here.") == "The port."
    assert first("Use e.g. this one.  Then that.") == "Use e.g. this one."
    assert first("  spread\n  over   lines.") == "spread over lines."
    assert first(None) is None
    assert first("==SUPPRESS==") is None


def test_json_safe() -> None:
    safe = catalog_build._json_safe
    assert safe((1, "a", None)) == [1, "a", None]
    assert safe(float("inf")) == "inf"
    assert safe({3, 1, 2}) == [1, 2, 3]
    assert safe(object()).startswith("<object object")
    assert " at 0x" not in safe(object())


@pytest.mark.sglang
def test_rebuild_with_real_sglang_matches_committed(tmp_path: Path, catalog: dict) -> None:
    python = os.environ.get("LOGANALYZE_SGLANG_PYTHON")
    if not python:
        pytest.skip("LOGANALYZE_SGLANG_PYTHON is not set")
    out = tmp_path / "catalog.json"
    env = {key: value for key, value in os.environ.items() if not key.startswith("SGLANG_")}
    env["PYTHONPATH"] = str(ROOT)
    subprocess.run(
        [python, "-m", "analyzer.sglang.catalog_build", "-o", str(out)],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        timeout=600,
    )
    rebuilt = json.loads(out.read_text(encoding="utf-8"))
    assert rebuilt["sglang_version"] == catalog["sglang_version"]
    assert rebuilt["allow_abbrev"] == catalog["allow_abbrev"]
    assert rebuilt["prog"] == catalog["prog"]
    committed = {option["option_strings"][0]: option for option in catalog["options"]}
    fresh = {option["option_strings"][0]: option for option in rebuilt["options"]}
    assert sorted(fresh) == sorted(committed)
    for flag, option in fresh.items():
        assert option == committed[flag], flag
