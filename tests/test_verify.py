"""Verification of launch commands against real SGLang (analyzer/sglang/verify.py).

Without SGLang: the project venv has no sglang, so its Python gives "unavailable" with a clear
message. Tests marked `sglang` run only when LOGANALYZE_SGLANG_PYTHON names a Python with SGLang
(here: /work/venvs/sglang/bin/python); they check every `verified = true` corrected command of
fixtures/real/ passes and a deliberately wrong one fails with SGLang's own error.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from analyzer.sglang.verify import sglang_argv, sglang_message, verify_command
from tests.fixture_cases import sidecar_cases

ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT / "fixtures" / "real"
LAUNCH = "python -m sglang.launch_server"
TARGET = "--model-path fixtures/models/llama-target"
WRONG = (
    f"{LAUNCH} {TARGET} --speculative-eagle-topk 1 --speculative-num-draft-tokens 4 "
    "--speculative-algorithm EAGLE3 --speculative-draft-model-path fixtures/models/eagle3-draft"
)
SGLANG_PYTHON = os.environ.get("LOGANALYZE_SGLANG_PYTHON")
needs_sglang = pytest.mark.skipif(not SGLANG_PYTHON, reason="LOGANALYZE_SGLANG_PYTHON is not set")


def _verified_cases() -> dict[str, str]:
    cases = {}
    for case in sidecar_cases(REAL):
        if case.expect.get("verified") is True:
            cases[case.name] = case.expect["corrected_command"]
    return cases


VERIFIED = _verified_cases()
# The log does not show its command; the analysis is told it, as a user would.
MAX_MODEL_LEN = (
    str(REAL / "unrecognized_max_model_len.log"),
    "-f",
    "json",
    "--command",
    f"{LAUNCH} {TARGET} --device cpu --max-model-len 4096",
)


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    code = "import sys; from analyzer.cli import main; sys.argv[0] = 'loganalyze'; main()"
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )


def _env(sglang: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "LOGANALYZE_SGLANG_PYTHON"}
    if sglang:
        env["LOGANALYZE_SGLANG_PYTHON"] = sglang
    return env


# --- without SGLang -----------------------------------------------------------------------


def test_python_without_sglang_is_unavailable_with_the_import_error() -> None:
    result = verify_command(WRONG, python=sys.executable)
    assert result.status == "unavailable"
    assert "No module named 'sglang'" in result.message
    assert "catalog check" in result.message
    assert result.sglang_version is None


def test_no_sglang_anywhere_says_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LOGANALYZE_SGLANG_PYTHON", raising=False)
    result = verify_command(WRONG)
    assert result.status == "unavailable"
    assert "loganalyze[sglang]" in result.message and "LOGANALYZE_SGLANG_PYTHON" in result.message


def _fake_sglang(root: Path, server_args: str) -> str:
    """A stand-in `sglang` package on a folder to put on PYTHONPATH."""
    package = root / "sglang" / "srt"
    package.mkdir(parents=True)
    (root / "sglang" / "__init__.py").write_text("__version__ = '9.9.9'\n")
    (package / "__init__.py").write_text("")
    (package / "server_args.py").write_text(server_args)
    return str(root)


def test_a_broken_sglang_install_is_unavailable_with_its_import_error(tmp_path: Path) -> None:
    broken = _fake_sglang(tmp_path, "import no_such_dependency_of_sglang\n")
    result = verify_command(WRONG, sys.executable, 60, broken)
    assert result.status == "unavailable"
    assert "sglang cannot be imported (ModuleNotFoundError" in result.message
    assert result.catalog_check == "passes the sglang 0.5.23 flag catalog"


def test_an_sglang_that_hangs_is_a_timeout_with_the_catalog_check(tmp_path: Path) -> None:
    hanging = _fake_sglang(
        tmp_path, "import time\ndef prepare_server_args(argv):\n    time.sleep(60)\n"
    )
    result = verify_command(WRONG, sys.executable, 2, hanging)
    assert result.status == "timeout"
    assert result.message == "sglang did not finish validating within 2 s"
    assert result.seconds < 30
    assert result.describe().endswith("; passes the sglang 0.5.23 flag catalog")


def test_missing_interpreter_is_unavailable() -> None:
    result = verify_command(WRONG, python=str(ROOT / "no-such-python"))
    assert result.status == "unavailable"
    assert "no-such-python" in result.message


def test_argv_adds_cpu_device_and_keeps_existing_model_paths(tmp_path: Path) -> None:
    argv = sglang_argv(
        f"CUDA_VISIBLE_DEVICES=0 {LAUNCH} {TARGET} --tp=2 --trust-remote-code", tmp_path
    )
    assert argv == [
        "--model-path", "fixtures/models/llama-target", "--tp=2", "--trust-remote-code",
        "--device", "cpu",
    ]  # fmt: skip


def test_argv_keeps_a_given_device(tmp_path: Path) -> None:
    argv = sglang_argv(f"{LAUNCH} {TARGET} --device cuda", tmp_path)
    assert argv.count("--device") == 1 and argv[-1] == "cuda"


def test_absent_model_paths_become_config_only_stand_ins(tmp_path: Path) -> None:
    text = (
        f"{LAUNCH} --model /models/Llama-3-70B --speculative-algorithm eagle3 "
        "--speculative-draft-model-path 'my org/draft model'"
    )
    argv = sglang_argv(text, tmp_path)
    target = Path(argv[argv.index("--model") + 1])
    draft = Path(argv[argv.index("--speculative-draft-model-path") + 1])
    assert target.parent == tmp_path and draft.parent == tmp_path
    assert json.loads((target / "config.json").read_text())["architectures"] == ["LlamaForCausalLM"]
    assert json.loads((draft / "config.json").read_text())["architectures"] == [
        "LlamaForCausalLMEagle3"
    ]


def test_text_without_a_launch_fails_without_running_anything() -> None:
    result = verify_command("echo hello", python=sys.executable)
    assert result.status == "fail" and "no SGLang launch" in result.message


def test_message_is_the_argparse_error_line_of_a_real_log() -> None:
    log = (REAL / "invalid_int_tp_size.log").read_text("utf-8")
    assert sglang_message(log) == (
        "sglang serve: error: argument --tp-size/--tensor-parallel-size: invalid int value: 'two'"
    )


def test_message_is_the_last_exception_line_of_a_real_traceback() -> None:
    log = (REAL / "spec_eagle3_topk_without_steps.log").read_text("utf-8")
    assert sglang_message(log) == "AssertionError"


# `verify` is the pre-flight (analyzer/preflight): exit 1 when a problem blocks the launch,
# 0 otherwise, whether or not SGLang could answer (it was 2 when it could not and the flag
# catalog found nothing)
def test_cli_verify_without_sglang_runs_the_preflight_alone() -> None:
    proc = _cli("verify", WRONG, "--python", sys.executable)
    assert proc.returncode == 1, proc.stderr
    assert "ERROR [speculative] spec_assertion" in proc.stdout
    assert "sglang: unavailable" in proc.stdout
    healthy = _cli("verify", f"{LAUNCH} {TARGET} --tp-size 2", "--python", sys.executable)
    assert healthy.returncode == 0, healthy.stdout
    assert healthy.stdout.startswith("loganalyze pre-flight: passed")


def test_cli_verify_without_sglang_exits_1_when_the_catalog_rejects_the_command() -> None:
    proc = _cli(
        "verify", f"{LAUNCH} {TARGET} --num-speculative-tokens 4", "--python", "/nonexistent"
    )
    assert proc.returncode == 1, proc.stderr
    assert "argparse_unrecognized --num-speculative-tokens" in proc.stdout
    assert "unrecognized arguments: --num-speculative-tokens" in proc.stdout


def test_cli_verify_fallback_uses_the_catalog_asked_for() -> None:
    command = f"{LAUNCH} {TARGET} --cuda-graph-max-bs 8"
    old = _cli("verify", command, "--python", "/nonexistent", "--sglang-version", "0.5.19")
    new = _cli("verify", command, "--python", "/nonexistent")
    assert (old.returncode, new.returncode) == (0, 1), (old.stdout, new.stdout)
    assert "ambiguous option: --cuda-graph-max-bs could match" in new.stdout


def test_analyze_verify_puts_the_verdict_in_the_report_and_on_stderr() -> None:
    plain = _cli(*MAX_MODEL_LEN, env=_env(None))
    checked = _cli(*MAX_MODEL_LEN, "--verify", env=_env(str(ROOT / "no-such-python")))
    assert checked.returncode == plain.returncode == 1
    before, after = json.loads(plain.stdout), json.loads(checked.stdout)
    assert before["incidents"][0]["verification"] is None
    verdict = after["incidents"][0]["verification"]
    assert verdict["status"] == "unavailable" and verdict["sglang_version"] is None
    assert verdict["catalog_check"] == "passes the sglang 0.5.23 flag catalog"
    after["incidents"][0]["verification"] = None
    assert after == before
    assert "corrected command not verified (unavailable)" in checked.stderr


# --- with real SGLang ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def verified_results() -> dict[str, object]:
    """All fixture corrections verified at once, in parallel: each run takes seconds."""
    with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        futures = {
            name: pool.submit(verify_command, command, SGLANG_PYTHON, 300)
            for name, command in VERIFIED.items()
        }
        return {name: future.result() for name, future in futures.items()}


@pytest.mark.sglang
@needs_sglang
@pytest.mark.parametrize("case", sorted(VERIFIED))
def test_every_verified_fixture_correction_passes(case: str, verified_results) -> None:
    result = verified_results[case]
    assert result.status == "pass", result.message
    assert result.sglang_version and result.sglang_version[0].isdigit()


@pytest.mark.sglang
@needs_sglang
def test_wrong_spec_command_fails_with_sglangs_assertion() -> None:
    result = verify_command(WRONG, SGLANG_PYTHON)
    assert result.status == "fail"
    assert result.message == "AssertionError"
    assert result.sglang_version == "0.5.23"


@pytest.mark.sglang
@needs_sglang
def test_cli_verify_prints_sglangs_argparse_error_and_exits_1() -> None:
    proc = _cli("verify", f"{LAUNCH} {TARGET} --tp-size two", env=_env(SGLANG_PYTHON))
    assert proc.returncode == 1, proc.stderr
    assert (
        "sglang 0.5.23: fail: sglang serve: error: argument "
        "--tp-size/--tensor-parallel-size: invalid int value: 'two'\n"
    ) in proc.stdout


@pytest.mark.sglang
@needs_sglang
def test_analyze_verify_marks_the_correction_verified() -> None:
    proc = _cli(*MAX_MODEL_LEN, "--verify", env=_env(SGLANG_PYTHON))
    assert "corrected command verified with sglang 0.5.23" in proc.stderr


@pytest.mark.sglang
@needs_sglang
def test_timeout_is_reported_as_timeout() -> None:
    result = verify_command(WRONG, SGLANG_PYTHON, timeout=0.01)
    assert result.status == "timeout"
    assert "0.01 s" in result.message


# --- older releases (scripts/install-sglang.sh puts them in .sglang/releases) ---------------

RELEASES = ROOT / os.environ.get("LOGANALYZE_SGLANG_HOME", ".sglang") / "releases"


def _release_cases() -> dict[str, tuple[str, str]]:
    cases = {}
    for case in sidecar_cases(ROOT / "fixtures" / "versions"):
        if case.expect.get("verified") is True:
            release = case.fixture["sglang_version"]
            cases[case.name] = (release, case.expect["corrected_command"])
    return cases


RELEASE_CASES = _release_cases()


@pytest.mark.sglang
@needs_sglang
@pytest.mark.parametrize("case", sorted(RELEASE_CASES))
def test_older_release_fixture_corrections_pass_their_own_release(case: str) -> None:
    release, command = RELEASE_CASES[case]
    folder = RELEASES / release
    if release != "0.5.23" and not folder.is_dir():
        pytest.skip(f"{folder} not installed (scripts/install-sglang.sh)")
    path = str(folder) if release != "0.5.23" else None
    result = verify_command(command, SGLANG_PYTHON, 300, path)
    assert (result.status, result.sglang_version) == ("pass", release), result.message
