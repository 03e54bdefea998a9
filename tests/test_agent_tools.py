"""The agent tools in-process (analyzer/agents/): bounded results that say where they were cut,
secrets masked, and the pre-flight answering for the command as the agent wrote it."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from analyzer.agents.agent_tools import analyze_logs, error_sites, log_metrics, preflight
from analyzer.agents.tool_inputs import ToolInputError
from tests.fixture_cases import FIXTURES, ROOT

TARGET = ROOT / "fixtures" / "models" / "llama-target"
TOKEN = "hf_" + "Q" * 30
SGLANG_PYTHON = os.environ.get("LOGANALYZE_SGLANG_PYTHON")


def test_a_result_over_max_chars_is_cut_from_the_end_and_says_where(tmp_path):
    for log in sorted((FIXTURES / "real").glob("*.log"))[:24]:
        shutil.copy(log, tmp_path / log.name)
    whole = analyze_logs([str(tmp_path)], max_chars=2_000_000)
    cut = analyze_logs([str(tmp_path)], max_chars=8_000)

    assert whole["cut"] == [] and len(whole["incidents"]) > 5
    assert len(json.dumps(cut, indent=2, ensure_ascii=False)) <= 8_000
    assert "max_chars" in cut["cut"][-1] and "loganalyze PATH... --format json" in cut["cut"][-1]
    assert any(note.startswith("incidents: the first ") for note in cut["cut"])
    kept = cut["incidents"]
    assert 1 <= len(kept) < len(whole["incidents"])
    # the root cause first, and commands are never cut
    assert [i["rule"] for i in kept] == [i["rule"] for i in whole["incidents"][: len(kept)]]
    for mine, full in zip(kept, whole["incidents"], strict=False):
        assert mine["corrected_command"] == full["corrected_command"]
        assert mine["command"] == full["command"]


def test_metrics_lose_their_chart_before_their_figures():
    log = str(FIXTURES / "metrics" / "sglang-0.5.23-eagle3.log")
    whole, cut = log_metrics([log]), log_metrics([log], max_chars=4_000)
    assert whole["cut"] == [] and whole["runs"][0]["chart"]
    assert cut["cut"][0].startswith("runs[].chart: the first ") and cut["runs"][0]["chart"] == []
    assert cut["runs"][0]["decode"] == whole["runs"][0]["decode"]


def test_a_command_too_long_for_the_limit_is_an_error_not_a_cut_command():
    text = (FIXTURES / "real" / "invalid_choice_dtype.log").read_text("utf-8")
    command = "python -m sglang.launch_server --model-path m --dtype bf16 --served-model-name "
    command += "n" * 6_000
    assert analyze_logs(text=text, command=command)["incidents"][0]["command"] == command
    with pytest.raises(ToolInputError, match="raise max_chars"):
        analyze_logs(text=text, command=command, max_chars=4_000)


def test_a_pasted_log_is_analysed_with_its_secrets_masked():
    text = (FIXTURES / "real" / "invalid_choice_dtype.log").read_text("utf-8")
    found = analyze_logs(
        text=text,
        command=f"HF_TOKEN={TOKEN} python -m sglang.launch_server --model-path m --dtype bf16",
    )
    assert found["incidents"][0]["offending_flags"] == ["--dtype"]
    assert "--dtype bfloat16" in found["incidents"][0]["corrected_command"]
    assert TOKEN not in json.dumps(found) and "HF_TOKEN=***" in json.dumps(found)


def test_preflight_keeps_the_agents_wrappers_and_checks_paths_where_it_runs(tmp_path):
    (tmp_path / "models").symlink_to(TARGET.parent)
    command = (
        "CUDA_VISIBLE_DEVICES=0 nohup python -m sglang.launch_server "
        "--model-path models/llama-target --tp-sizee 1 > logs/server.log 2>&1 &"
    )
    here = preflight(command, str(tmp_path))
    assert here["corrected_command"] == command.replace("--tp-sizee", "--tp-size")
    checks = {p["check"]: p["message"] for p in here["problems"]}
    assert "paths" not in checks  # models/llama-target exists in the folder it runs in
    assert "logs" in checks["log"] and "does not exist" in checks["log"]

    elsewhere = preflight(command.replace("models/", "./absent/"), str(tmp_path))
    assert "no such file" in {p["check"]: p["message"] for p in elsewhere["problems"]}["paths"]


def test_preflight_over_ssh_checks_only_the_flags():
    command = 'ssh gpu7 "python -m sglang.launch_server --model-path ./nope --cuda-graph-max-bs 8"'
    found = preflight(command)
    assert {p["check"] for p in found["problems"]} == {"flags"}
    assert found["corrected_command"] == command.replace("max-bs", "max-bs-decode")
    assert any("ssh" in note for note in found["notes"])


@pytest.mark.sglang
@pytest.mark.skipif(not SGLANG_PYTHON, reason="LOGANALYZE_SGLANG_PYTHON is not set")
def test_preflight_asks_the_installed_sglang_about_the_corrected_command():
    command = f"python -m sglang.launch_server --model-path {TARGET} --device cpu --dtype bf16"
    found = preflight(command, ask_sglang=True)
    assert found["corrected_command"] == command.replace("bf16", "bfloat16")
    # SGLang's own parser judges the command as given: it refuses what the correction fixes
    assert found["sglang"]["status"] == "fail", found["sglang"]
    assert "'bf16'" in found["sglang"]["message"]


@pytest.mark.parametrize(
    ("command", "error"),
    [
        ("python -m sglang.launch_server --model-path 'x", "never closes"),
        ("echo hello", "no SGLang launch"),
        ("   ", "command is empty"),
        ("python -m sglang.launch_server --model-path \0", "NUL"),
    ],
)
def test_preflight_refuses_what_is_no_launch_command(command, error):
    with pytest.raises(ToolInputError, match=error):
        preflight(command)


def test_error_catalog_reads_the_type_off_the_exception_line():
    found = error_sites("ValueError: --prefill-decode-interval must be non-negative.")
    assert found["exception_type"] == "ValueError" and found["matched_by"] == "message"
    assert "--prefill-decode-interval" in found["sites"][0]["condition_flags"]
    with pytest.raises(ToolInputError, match="bare exception"):
        error_sites("AssertionError")
