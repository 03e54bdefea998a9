"""The flags whose code path failed (analyzer/blame/fault_flags.py) and the code-path map
they come from (analyzer/sglang/code_paths_build.py, catalogs/paths-VERSION.json). Frames
and statements are SGLang's as its source writes them."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from analyzer.pipeline import Options, analyze
from analyzer.sglang.catalog import shipped_versions
from analyzer.sglang.code_paths import code_paths_for, shipped_path_versions
from analyzer.sglang.code_paths_build import build_code_paths, dumps, mine_file
from analyzer.sglang.launch_command import find_launch_command

ROOT = Path(__file__).resolve().parent.parent
CATALOGS = ROOT / "analyzer" / "catalogs"
SITE = "/usr/local/lib/python3.12/dist-packages"

# 0.5.23 speculative/eagle_worker_v2.py: the v2 draft-extend step, run at every decode
DRAFT_EXTEND = f"""[2025-11-28 00:56:42 TP4] Scheduler hit an exception: Traceback (most recent call last):
  File "{SITE}/sglang/srt/managers/scheduler.py", line 2736, in run_scheduler_process
    scheduler.event_loop_overlap()
  File "{SITE}/sglang/srt/speculative/eagle_worker_v2.py", line 628, in forward_batch_generation
    self.draft_worker._draft_extend_for_decode(model_worker_batch, batch_output)
  File "{SITE}/sglang/srt/speculative/eagle_worker_v2.py", line 511, in _draft_extend_for_decode
    draft_logits_output, _ = self.draft_runner.forward(
  File "{SITE}/sglang/srt/models/llama_eagle3.py", line 88, in forward
    hidden_states = torch.cat([embeds, hidden_states], dim=-1)
RuntimeError: Sizes of tensors must match except in dimension 1. Expected size 12 but got size 16 for tensor number 1 in the list.
[2025-11-28 00:56:42] Received sigquit from a child process. It usually means the child failed.
"""
SPEC = (
    "python -m sglang.launch_server --model-path m --tp-size 8 --speculative-algorithm EAGLE3 "
    "--speculative-draft-model-path d --speculative-num-steps 3"
)


def _flags(tmp_path: Path, text: str, command: str | None = None) -> list[str]:
    log = tmp_path / "run.log"
    log.write_text(text, encoding="utf-8")
    report = analyze([str(log)], Options(command=command, sglang_version="0.5.23"))
    causes = [i for i in report.incidents if i.severity in ("fatal", "error")]
    return causes[0].offending_flags


def test_a_flag_the_failing_code_reads_is_offending_when_the_command_sets_it(tmp_path):
    given = _flags(tmp_path, DRAFT_EXTEND, f"{SPEC} --speculative-eagle-topk 4")
    assert given[0] == "--speculative-eagle-topk"  # the innermost function's read comes first
    assert "--tp-size" not in given and "--model-path" not in given  # read everywhere


def test_a_flag_the_failing_code_reads_is_not_offending_when_left_at_its_default(tmp_path):
    unset = _flags(tmp_path, DRAFT_EXTEND, SPEC)
    assert "--speculative-eagle-topk" not in unset
    assert "--speculative-num-steps" in unset  # set, and read by forward_batch_generation
    # with no command nothing says which settings were chosen
    assert _flags(tmp_path, DRAFT_EXTEND) == []


# 0.5.5 server_args.py _handle_speculative_decoding, as a runner without topk hit it
NONE_TOPK = f"""Command: python3 -m sglang.launch_server --model-path m --speculative-algorithm EAGLE3 --speculative-draft-model-path d --speculative-num-steps 3 --speculative-num-draft-tokens 4
Traceback (most recent call last):
  File "{SITE}/sglang/srt/server_args.py", line 665, in __post_init__
    self._handle_speculative_decoding()
  File "{SITE}/sglang/srt/server_args.py", line 1797, in _handle_speculative_decoding
    self.speculative_eagle_topk > 1
TypeError: '>' not supported between instances of 'NoneType' and 'int'
"""


def test_a_none_error_on_a_setting_left_at_none_names_the_missing_flag(tmp_path):
    # the command is the runner's `Command:` line; it leaves --speculative-eagle-topk out
    assert "--speculative-eagle-topk" in _flags(tmp_path, NONE_TOPK)
    # the same statement failing on another type is no missing flag
    other = NONE_TOPK.replace("'NoneType' and 'int'", "'str' and 'int'")
    assert "--speculative-eagle-topk" not in _flags(tmp_path, other)


# torch.compile's frames: under --enable-torch-compile, and under SGLang's own decorators
DYNAMO = f"""Traceback (most recent call last):
  File "{SITE}/sglang/srt/model_executor/model_runner.py", line 2100, in forward_decode
    return self.model.forward(
  File "{SITE}/torch/_dynamo/eval_frame.py", line 655, in _fn
    return fn(*args, **kwargs)
  File "{SITE}/torch/_inductor/compile_fx.py", line 1200, in compile_fx
    raise exc
torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised: RuntimeError: boom
"""


def test_torch_compile_frames_blame_the_flag_only_when_it_is_set(tmp_path):
    base = "python -m sglang.launch_server --model-path m"
    assert "--enable-torch-compile" in _flags(tmp_path, DYNAMO, f"{base} --enable-torch-compile")
    assert "--enable-torch-compile" not in _flags(tmp_path, DYNAMO, base)
    assert "--enable-torch-compile" not in _flags(tmp_path, DYNAMO)


def test_a_command_printed_after_a_wrappers_words_is_read():
    runner = "2025-11-19 21:36:52 - gpustack.worker - INFO - Command: python3 -m sglang.launch_server --model-path m"
    job = "./serve.sh: line 21: 88412 Killed                  python -m sglang.launch_server --model-path m"
    assert find_launch_command(runner) == "python3 -m sglang.launch_server --model-path m"
    assert find_launch_command(job) == "python -m sglang.launch_server --model-path m"
    assert find_launch_command("usage: launch_server.py [-h] --model-path MODEL_PATH") is None


# -- the map ----------------------------------------------------------------------------
FAKE_SOURCE = """
from sglang.srt.server_args import get_global_server_args

class DraftWorker:
    def __init__(self, server_args):
        self.topk = server_args.speculative_eagle_topk
        self.builder = make(server_args)

    def extend(self, batch):
        return batch.view(self.topk, -1)

    def gather(self):
        return get_global_server_args().enable_dp_attention

def pooled(model_runner, cfg):
    if model_runner.server_args.page_size > 1:
        return cfg.device  # a one-word field of no server-args holder is no read
"""


def test_the_miner_follows_holders_and_attributes_a_class_keeps(tmp_path):
    source = tmp_path / "worker.py"
    source.write_text(FAKE_SOURCE, encoding="utf-8")
    dests = frozenset({"speculative_eagle_topk", "enable_dp_attention", "page_size", "device"})
    reads = mine_file(source, "srt/speculative/worker.py", dests)
    assert reads["extend"] == {"speculative_eagle_topk"}  # through self.topk
    assert reads["gather"] == {"enable_dp_attention"}
    assert reads["pooled"] == {"page_size"}


@pytest.mark.parametrize("version", shipped_versions())
def test_every_release_ships_a_well_formed_map(version: str) -> None:
    assert version in shipped_path_versions()
    text = (CATALOGS / f"paths-{version}.json").read_text(encoding="utf-8")
    data = json.loads(text)
    assert dumps(data) == text and data["sglang_version"] == version
    assert "--model-path" in data["ubiquitous"] and "--device" in data["ubiquitous"]
    for functions in data["files"].values():
        for flags in functions.values():
            assert flags and all(f.startswith("--") for f in flags)
            assert not set(flags) & set(data["ubiquitous"])


def test_a_mined_entry_of_0_5_23():
    # speculative/eagle_worker_v2.py: `self.topk = get_spec().speculative_eagle_topk` in
    # __init__, read by the draft-extend step
    paths = code_paths_for("0.5.23")
    where = f"{SITE}/sglang/srt/speculative/eagle_worker_v2.py"
    assert "--speculative-eagle-topk" in paths.flags_read(where, "_draft_extend_for_decode")
    assert paths.flags_read(f"{SITE}/torch/_ops.py", "__call__") == []
    # an older log is read with the oldest map
    assert code_paths_for("0.4.6.post4").version == shipped_path_versions()[0]


@pytest.mark.sglang
def test_build_from_an_installed_release_matches_committed() -> None:
    from analyzer.sglang.release_source import flag_catalog_data, locate_package, package_version

    python = os.environ.get("LOGANALYZE_SGLANG_PYTHON")
    if not python:
        pytest.skip("LOGANALYZE_SGLANG_PYTHON is not set")
    package = locate_package(python)
    version = package_version(package)
    built = dumps(build_code_paths(package, flag_catalog_data(version)))
    assert built == (CATALOGS / f"paths-{version}.json").read_text(encoding="utf-8")


def _serving_oom(tmp_path: Path, forward: str, record: str) -> list[str]:
    log = tmp_path / "oom.log"
    log.write_text(
        f"[2026-01-01 10:00:00] server_args=ServerArgs(model_path='m', {record}port=30000)\n"
        "[2026-01-01 10:00:05] The server is fired up and ready to roll!\n"
        "[2026-01-01 10:01:00 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
        f'  File "{SITE}/sglang/srt/model_executor/model_runner.py", line 900, in {forward}\n'
        "    return self.model.forward(\n"
        f'  File "{SITE}/sglang/srt/models/llama.py", line 300, in forward\n'
        "    hidden_states = self.mlp(hidden_states)\n"
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
        "total capacity of 79.19 GiB of which 1.00 GiB is free. Including non-PyTorch memory, "
        "this process has 78.00 GiB memory in use.\n"
    )
    (root,) = analyze([str(log)], Options()).incidents
    assert root.rule_class == "oom"
    return root.offending_flags


def test_a_prefill_forward_out_of_memory_names_the_cap_of_its_batch(tmp_path: Path):
    # 0.2 had no chunked prefill: --max-prefill-tokens caps a prefill batch
    assert _serving_oom(tmp_path, "forward_extend", "max_prefill_tokens=None, ") == [
        "--max-prefill-tokens",
        "--mem-fraction-static",
    ]
    assert _serving_oom(tmp_path, "forward_extend", "chunked_prefill_size=8192, ") == [
        "--chunked-prefill-size",
        "--mem-fraction-static",
    ]
    # a decode batch has no prefill cap
    assert _serving_oom(tmp_path, "forward_decode", "chunked_prefill_size=8192, ") == [
        "--mem-fraction-static"
    ]


@pytest.mark.parametrize(("host", "flags"), [("", ["--host"]), ("127.0.0.1", [])])
def test_a_warmup_error_line_names_host_when_its_traceback_has_no_host_to_reach(
    tmp_path: Path, host: str, flags: list[str]
):
    # 0.5 http_server.py _wait_and_warmup logs "Initialization failed. warmup error: {tb}"
    log = tmp_path / "warmup.log"
    log.write_text(
        f"[2026-01-01 10:00:00] INFO:     Uvicorn running on http://{host}:30000\n"
        "[2026-01-01 10:02:00] Initialization failed. warmup error: Traceback (most recent call last):\n"
        f'  File "{SITE}/sglang/srt/entrypoints/http_server.py", line 2373, in _execute_server_warmup\n'
        "    res = requests.get(\n"
        f'  File "{SITE}/requests/models.py", line 439, in prepare_url\n'
        "    raise InvalidURL(f\"Invalid URL {url!r}: No host supplied\")\n"
        f"requests.exceptions.InvalidURL: Invalid URL 'http://{host}:30000/model_info': No host supplied\n"
    )
    root = analyze([str(log)], Options()).incidents[0]
    assert (root.rule, root.offending_flags) == ("warmup-failure", flags)
