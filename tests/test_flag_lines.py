"""Flag-on lines (analyzer/sglang/flag_lines_build.py, catalogs/flaglines-VERSION.json): the
messages SGLang logs only when a flag is set, and what a log holding one tells fault_flags
when no launch command is known (analyzer/blame/flags_shown.py)."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

from analyzer.pipeline import Options, analyze
from analyzer.sglang.flag_lines import flag_lines_for, shipped_flag_line_versions
from analyzer.sglang.flag_lines_build import build_flag_lines, mine_file

ROOT = Path(__file__).resolve().parent.parent
CATALOGS = ROOT / "analyzer" / "catalogs"
RELEASES = ROOT / ".sglang" / "releases"
SITE = "/usr/local/lib/python3.12/dist-packages"
# 0.5.6.post2-0.5.13 server_args.py _handle_data_parallelism: logged inside
# `if self.enable_dp_attention:` (the chunked prefill size is divided by dp_size there)
DP_LINE = (
    "[2025-11-02 10:00:01] DP attention is enabled. The chunked prefill size is adjusted to "
    "4096 to avoid MoE kernel issues. "
)
# 0.5.13 layers/dp_attention.py initialize_dp_attention reads enable_dp_attention
DP_CRASH = f"""[2025-11-02 10:00:05 DP0 TP0] Init torch distributed begin.
[2025-11-02 10:00:20 DP0 TP0] Scheduler hit an exception: Traceback (most recent call last):
  File "{SITE}/sglang/srt/managers/scheduler.py", line 2930, in run_scheduler_process
    scheduler = Scheduler(
  File "{SITE}/sglang/srt/model_executor/model_runner.py", line 780, in init_torch_distributed
    initialize_dp_attention(
  File "{SITE}/sglang/srt/layers/dp_attention.py", line 290, in initialize_dp_attention
    _ATTN_DP_RANK, _ATTN_TP_RANK, _LOCAL_ATTN_DP_RANK = compute_dp_attention_local_info(
RuntimeError: group size mismatch
"""
# 0.5.6.post2 model_executor/model_runner.py: logged inside `if self.server_args.enable_torch_compile`
COMPILE_LINE = (
    "[2025-11-02 10:00:02 TP0] Disable piecewise CUDA graph because piecewise_cuda_graph has "
    "conflict with torch compile"
)
DYNAMO_CRASH = f"""[2025-11-02 10:01:00 TP0] Scheduler hit an exception: Traceback (most recent call last):
  File "{SITE}/sglang/srt/managers/scheduler.py", line 2573, in run_scheduler_process
    scheduler.event_loop_overlap()
  File "{SITE}/torch/_dynamo/eval_frame.py", line 655, in _fn
    return fn(*args, **kwargs)
  File "{SITE}/torch/_inductor/compile_fx.py", line 1433, in compile_fx
    return compile_fx_inner(model, inputs)
RuntimeError: Triton Error [CUDA]: an illegal memory access was encountered
"""


def _release_homes() -> list[Path]:
    """Where scripts/install-sglang.sh put older releases: in this checkout, or beside the
    SGLang Python the sglang-marked run is given (<home>/venv/bin/python)."""
    homes = [RELEASES]
    python = os.environ.get("LOGANALYZE_SGLANG_PYTHON")
    if python:
        homes.append(Path(python).parent.parent.parent / "releases")
    return homes


def _release(version: str) -> Path:
    for base in _release_homes():
        if (base / version / "sglang").is_dir():
            return base / version / "sglang"
    pytest.skip(f"sglang {version} source is not installed")


def _dests(version: str) -> frozenset[str]:
    catalog = json.loads((CATALOGS / f"sglang-{version}.json").read_text("utf-8"))
    return frozenset(o["dest"] for o in catalog["options"])


def _incident(tmp_path: Path, text: str, version: str) -> dict:
    log = tmp_path / "paste.log"
    log.write_text(text, encoding="utf-8")
    report = analyze([str(log)], Options(sglang_version=version))
    causes = [i for i in report.incidents if i.severity in ("fatal", "error")]
    assert causes, report.incidents
    return {"flags": causes[0].offending_flags, "explanation": causes[0].explanation}


def test_mined_from_an_installed_release_real_source():
    """0.5.13's server_args.py, mined: the DP attention message is guarded by
    `if self.enable_dp_attention:`, and the shipped map holds it."""
    package = _release("0.5.13")
    messages = mine_file(package / "srt/server_args.py", "srt/server_args.py", _dests("0.5.13"))
    dp = [m for m in messages if m.pieces and str(m.pieces[0]).startswith("DP attention is enabled.")]
    assert dp and {f.field for f in dp[0].facts} >= {"enable_dp_attention"}
    shipped = flag_lines_for("0.5.13")
    assert shipped is not None
    found = shipped.flags_shown(DP_LINE)
    assert [e.flags for e in found] == [("--enable-dp-attention",)]
    assert found[0].site.startswith("srt/server_args.py:")


def test_a_message_of_the_default_branch_is_not_mined_real_source():
    """`Capture cuda graph bs ...` runs unless --disable-cuda-graph: the default, no flag."""
    for version in shipped_flag_line_versions():
        lines = flag_lines_for(version)
        assert lines is not None
        assert not lines.flags_shown("[2025-11-02 10:00:09 TP0] Capture cuda graph bs [1, 2, 4, 8]")


def test_a_line_showing_the_flag_blames_it_without_a_command(tmp_path):
    shown = _incident(tmp_path, DP_LINE + "\n" + DP_CRASH, "0.5.13")
    assert "--enable-dp-attention" in shown["flags"]
    assert "line 1 shows --enable-dp-attention on" in shown["explanation"]
    bare = _incident(tmp_path, DP_CRASH, "0.5.13")
    assert "--enable-dp-attention" not in bare["flags"]
    assert "No launch command is known" not in bare["explanation"]


def test_a_line_after_the_failure_is_no_evidence(tmp_path):
    """A later run's startup says nothing of the run that failed before it."""
    later = _incident(tmp_path, DP_CRASH + DP_LINE + "\n", "0.5.13")
    assert "--enable-dp-attention" not in later["flags"]


def test_a_flag_line_gates_torch_compile_frames(tmp_path):
    """features.toml `when_set`: torch/_dynamo frames blame --enable-torch-compile only when
    it is set; the log's own line is that evidence when no command is known."""
    shown = _incident(tmp_path, COMPILE_LINE + "\n" + DYNAMO_CRASH, "0.5.6.post2")
    assert "--enable-torch-compile" in shown["flags"]
    bare = _incident(tmp_path, DYNAMO_CRASH, "0.5.6.post2")
    assert "--enable-torch-compile" not in bare["flags"]


def test_a_command_wins_over_the_lines(tmp_path):
    command = "python -m sglang.launch_server --model-path m --tp-size 2\n"
    given = _incident(tmp_path, command + DP_LINE + "\n" + DP_CRASH, "0.5.13")
    assert "--enable-dp-attention" not in given["flags"]


FAKE_ARGS = {
    "sglang_version": "9.9",
    "options": [
        {"dest": "enable_dp_attention", "option_strings": ["--enable-dp-attention"],
         "default": False},
        {"dest": "attention_backend", "option_strings": ["--attention-backend"], "default": None},
        {"dest": "disable_cuda_graph", "option_strings": ["--disable-cuda-graph"],
         "default": False},
        {"dest": "chunked_prefill_size", "option_strings": ["--chunked-prefill-size"],
         "default": None},
        {"dest": "page_size", "option_strings": ["--page-size"], "default": 1},
    ],
}  # fmt: skip
FAKE_SOURCE = '''
import logging
logger = logging.getLogger(__name__)


class ServerArgs:
    def _resolve(self):
        if self.chunked_prefill_size is None:
            self.chunked_prefill_size = 8192
        if self.attention_backend is None:
            self.attention_backend = "triton"
            logger.info("Use triton as the default attention backend for this model.")
        if self.enable_dp_attention:
            logger.warning(f"Data parallel attention is on, scheduling {self.page_size} pages.")


def run(server_args):
    if not server_args.disable_cuda_graph:
        logger.info("Capture the cuda graphs of every batch size now.")
    if server_args.chunked_prefill_size is not None:
        logger.info("Chunked prefill runs with a bounded chunk of tokens.")
    if server_args.page_size == 1:
        return
    logger.info("Paged attention layout chosen by the operator.")


def other(server_args):
    logger.info("Use triton as the default attention backend for this model.")
'''


def test_guards_that_the_default_satisfies_are_not_mined(tmp_path):
    package = tmp_path / "sglang"
    (package / "srt").mkdir(parents=True)
    (package / "srt" / "server_args.py").write_text(textwrap.dedent(FAKE_SOURCE), "utf-8")
    (package / "version.py").write_text('__version__ = "9.9"\n', "utf-8")
    entries = {
        "".join(p if isinstance(p, str) else "*" for p in e["pieces"]): e["flags"]
        for e in build_flag_lines(package, FAKE_ARGS)["entries"]
    }
    # `if self.enable_dp_attention:` (default False): the flag is on
    assert entries["Data parallel attention is on, scheduling * pages."] == [
        "--enable-dp-attention"
    ]
    # the early exit `if page_size == 1: return` (the default) leaves page_size != 1
    assert entries["Paged attention layout chosen by the operator."] == ["--page-size"]
    # the default branch (cuda graph not disabled) says nothing
    assert "Capture the cuda graphs of every batch size now." not in entries
    # SGLang sets the value itself (a branch that assigns it; a resolved None default)
    assert "Use triton as the default attention backend for this model." not in entries
    assert "Chunked prefill runs with a bounded chunk of tokens." not in entries
