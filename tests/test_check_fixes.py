"""Corrected commands read from the check SGLang failed (analyzer/repair/check_fixes.py), the
context-length prediction (predict.py context_problems) and rules whose fix is no command edit.

Tests marked `sglang` run the given and the corrected command through real SGLang
(LOGANALYZE_SGLANG_PYTHON): the given one fails its checks, the corrected one passes.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from analyzer.formats.json_report import render_json
from analyzer.pipeline import Options, analyze
from analyzer.sglang.verify import verify_commands

ROOT = Path(__file__).resolve().parent.parent
LAUNCH = "python -m sglang.launch_server"
TARGET = "--model-path fixtures/models/llama-target"
EAGLE = "--speculative-algorithm EAGLE --speculative-draft-model-path fixtures/models/eagle-draft"
needs_sglang = pytest.mark.skipif(
    not os.environ.get("LOGANALYZE_SGLANG_PYTHON"), reason="LOGANALYZE_SGLANG_PYTHON is not set"
)

TOPK_LIMIT = [
    "[2025-03-14 06:40:18 TP0] Scheduler hit an exception: Traceback (most recent call last):",
    '  File "/x/sglang/srt/speculative/eagle_worker.py", line 148, in init_attention_backend',
    "    self.draft_attn_backend = FlashInferMLAMultiStepDraftBackend(",
    '  File "/x/sglang/srt/layers/attention/flashinfer_mla_backend.py", line 577, in __init__',
    "    raise ValueError(",
    "ValueError: Currently Flashinfer MLA only supports topk=1 for speculative decoding",
]
TREE_TOO_SMALL = [
    "[2025-04-22 09:13:56 TP0] Scheduler hit an exception: Traceback (most recent call last):",
    '  File "/x/sglang/srt/speculative/eagle_worker.py", line 408, in draft',
    "    ) = build_tree_kernel_efficient(",
    '  File "/x/sglang/srt/speculative/eagle_utils.py", line 88, in build_tree_kernel_efficient',
    "    top_scores = torch.topk(score_list, num_verify_tokens - 1, dim=-1)",
    "RuntimeError: selected index k out of range",
]
KV_POOL_FULL = [
    "[2026-01-01 10:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):",
    '  File "/x/sglang/srt/managers/scheduler.py", line 4357, in get_new_batch_prefill',
    "    new_batch.prepare_for_extend()",
    '  File "/x/sglang/srt/mem_cache/allocation.py", line 246, in alloc_paged_token_slots_extend',
    "    raise RuntimeError(error_msg)",
    "RuntimeError: Prefill out of memory. Try to lower your batch size.",
]
OTHER_PROCESSES = [
    "Traceback (most recent call last):",
    '  File "/x/sglang/srt/model_executor/model_runner.py", line 300, in load_model',
    "    self.model = get_model(",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
    "capacity of 79.11 GiB of which 1.10 GiB is free. Process 4242 has 60.00 GiB memory in use. "
    "Including non-PyTorch memory, this process has 18.00 GiB memory in use.",
]


def argparse_context(value: str) -> list[str]:
    """SGLang 0.5.23's parser refusing an upper-case SI suffix (arg_groups/arg_utils.py)."""
    return [
        "usage: launch_server.py [-h] --model-path MODEL_PATH",
        f"launch_server.py: error: argument --context-length: Invalid integer value: '{value}'. "
        "Use a plain integer, SI suffixes (1k, 1M), or IEC suffixes (1Ki, 1Mi). Suffixes are "
        "case-sensitive.",
    ]


def _root(tmp_path: Path, lines: list[str], command: str | None):
    tmp_path.mkdir(parents=True, exist_ok=True)
    log = tmp_path / "server.log"
    log.write_text("\n".join(lines) + "\n", "utf-8")
    report = analyze([str(log)], Options(command=command))
    return next(i for i in report.incidents if i.severity in ("fatal", "error"))


def test_topk_refused_becomes_a_chain(tmp_path):
    root = _root(tmp_path, TOPK_LIMIT, f"{LAUNCH} {TARGET} {EAGLE} {WIDE_TREE}")
    assert root.rule == "spec-topk-limit"
    assert "--speculative-eagle-topk 1" in root.corrected_command
    assert "--speculative-num-draft-tokens 4" in root.corrected_command


def test_topk_already_one_gets_no_topk_edit(tmp_path):
    given = f"{LAUNCH} {TARGET} {EAGLE} --speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4 --device cpu"
    root = _root(tmp_path, TOPK_LIMIT, given)
    assert not any(e.flag == "--speculative-eagle-topk" for e in root.edits)


def test_draft_tokens_fit_the_tree(tmp_path):
    # topk 2, 2 steps: 2 + 1 x 4 = 6 candidates, so at most 7 draft tokens
    root = _root(tmp_path, TREE_TOO_SMALL, f"{LAUNCH} {TARGET} {EAGLE} {DEEP_TREE}")
    assert root.rule == "spec-draft-tree-too-small"
    assert "--speculative-num-draft-tokens 7" in root.corrected_command


def test_draft_tokens_within_the_tree_are_left_alone(tmp_path):
    given = f"{LAUNCH} {TARGET} {EAGLE} --speculative-num-steps 2 --speculative-eagle-topk 2 --speculative-num-draft-tokens 6 --device cpu"
    root = _root(tmp_path, TREE_TOO_SMALL, given)
    assert not any(e.flag == "--speculative-num-draft-tokens" for e in root.edits)


def test_full_kv_pool_halves_the_batch_cap(tmp_path):
    given = f"{LAUNCH} {TARGET} --max-running-requests 64 --mem-fraction-static 0.8"
    root = _root(tmp_path, KV_POOL_FULL, given)
    assert root.rule_class == "oom"
    assert "--max-running-requests 32" in root.corrected_command
    assert "--mem-fraction-static 0.8" in root.corrected_command


def test_full_kv_pool_without_a_cap_raises_the_fraction(tmp_path):
    root = _root(tmp_path, KV_POOL_FULL, f"{LAUNCH} {TARGET} --mem-fraction-static 0.8")
    assert "--mem-fraction-static 0.85" in root.corrected_command


def test_prefill_oom_halves_the_token_cap_it_names():
    case = ROOT / "fixtures" / "source" / "oom_prefill_forward_chunked.log"
    given = f"{LAUNCH} --model-path /m/x --chunked-prefill-size 16384 --mem-fraction-static 0.85"
    root = analyze([str(case)], Options(command=given)).incidents[0]
    assert root.rule_class == "oom"
    assert root.corrected_command == given.replace("16384", "8192")


def kv_sizing_refused(message: str) -> list[str]:
    return [
        "[2026-01-01 10:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/x/sglang/srt/mem_cache/kv_cache_configurator.py", line 3050, in _profile_available_bytes',
        "    raise ValueError(",
        message,
    ]


def test_kv_cache_sizing_raises_the_fraction_above_the_least_sglang_names(tmp_path):
    # kv_cache_configurator.py _profile_available_bytes: one step (0.35) stays below 0.412
    message = (
        "ValueError: Loaded weights leave no GPU memory for the KV cache under "
        "--mem-fraction-static=0.3. Raise --mem-fraction-static above 0.412 (minimum viable = "
        "1 - available/pre = 0.4118). If using speculative decoding, draft weights are now counted."
    )
    given = f"{LAUNCH} {TARGET} --mem-fraction-static 0.3"
    root = _root(tmp_path, kv_sizing_refused(message), given)
    assert root.rule == "oom"
    assert root.corrected_command == f"{LAUNCH} {TARGET} --mem-fraction-static 0.42"


def test_kv_cache_sizing_reads_the_fraction_in_force_from_the_message(tmp_path):
    # pool_configurator.py __post_init__ prints the value SGLang chose when none was typed
    message = (
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
        "Current value: mem_fraction_static=0.8"
    )
    root = _root(tmp_path, kv_sizing_refused(message), f"{LAUNCH} {TARGET}")
    assert root.corrected_command == f"{LAUNCH} {TARGET} --mem-fraction-static 0.85"


def test_kv_cache_sizing_past_the_largest_share_is_no_edit(tmp_path):
    message = (
        "ValueError: Loaded weights leave no GPU memory for the KV cache under "
        "--mem-fraction-static=0.9. Raise --mem-fraction-static above 0.981 (minimum viable = "
        "1 - available/pre = 0.9807). If using speculative decoding, draft weights are now counted."
    )
    given = f"{LAUNCH} {TARGET} --mem-fraction-static 0.9"
    root = _root(tmp_path, kv_sizing_refused(message), given)
    assert root.rule == "oom"
    assert root.corrected_command is None


def quant_refused(message: str) -> list[str]:
    return [
        "[2025-12-01 16:40:21 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/x/sglang/srt/layers/quantization/modelopt_quant.py", line 288, in from_config',
        "    raise ValueError(",
        message,
    ]


MODELOPT_FP8_REFUSES = (
    "ValueError: ModelOptFp8Config only supports static FP8 quantization in SGLang. For FP4 "
    "quantization, use ModelOptFp4Config. Check the quantization config for your model's "
    "configuration."
)


def test_quantization_method_refusing_the_checkpoints_algorithm_is_dropped(tmp_path):
    given = f"{LAUNCH} {TARGET} --quantization modelopt_fp8 --port 30000"
    root = _root(tmp_path, quant_refused(MODELOPT_FP8_REFUSES), given)
    assert root.rule == "quant-config-refused"
    assert root.corrected_command == f"{LAUNCH} {TARGET} --port 30000"


def test_checkpoint_without_a_quantization_config_keeps_the_method(tmp_path):
    # dropping --quantization would serve the model unquantized: no edit
    message = "ValueError: Cannot find any of ['quant_method'] in the model's quantization config."
    given = f"{LAUNCH} {TARGET} --quantization fp8"
    root = _root(tmp_path, quant_refused(message), given)
    assert root.rule == "quant-config-refused"
    assert root.corrected_command is None


DIFFUSION_REFUSED = ROOT / "fixtures" / "source" / "config_diffusion_attention_backend_component.log"


def test_diffusion_backend_a_component_refused_is_dropped():
    root = analyze([str(DIFFUSION_REFUSED)], Options()).incidents[0]
    assert root.rule == "diffusion-attention-backend-refused"
    assert root.command == "sglang serve --model-path /data/models/FLUX.1-dev --attention-backend sage_attn --port 30020"
    assert root.corrected_command == "sglang serve --model-path /data/models/FLUX.1-dev --port 30020"


def test_diffusion_backend_other_than_the_refused_one_is_kept():
    given = "sglang serve --model-path /data/models/FLUX.1-dev --attention-backend fa3 --port 30020"
    root = analyze([str(DIFFUSION_REFUSED)], Options(command=given)).incidents[0]
    assert root.rule == "diffusion-attention-backend-refused"
    assert root.corrected_command is None


def test_diffusion_command_with_its_own_flags_gets_no_llm_repair():
    # --num-gpus is the diffusion server's: the LLM catalog would drop it with the backend
    given = "sglang serve --model-path /data/models/FLUX.1-dev --attention-backend sage_attn --num-gpus 4"
    root = analyze([str(DIFFUSION_REFUSED)], Options(command=given)).incidents[0]
    assert root.corrected_command is None


def block_shard_refused(size: int) -> list[str]:
    return [
        "[2026-02-21 03:12:46 TP5] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/x/sglang/srt/layers/quantization/fp8.py", line 238, in validate_block_quant_shapes',
        "    raise ValueError(",
        f"ValueError: Weight output_partition_size = {size} is not divisible by weight "
        "quantization block_n = 128.",
    ]


def test_block_quant_shard_takes_the_largest_tp_with_whole_blocks(tmp_path):
    # 2368 x 8 = 18944 wide: TP4 leaves 4736 = 37 x 128 per rank
    root = _root(tmp_path, block_shard_refused(2368), f"{LAUNCH} {TARGET} --tp-size 8")
    assert root.rule == "tp-shard-block-quant"
    assert root.corrected_command == f"{LAUNCH} {TARGET} --tp-size 4"


def test_block_quant_shard_no_tp_fits_is_no_edit(tmp_path):
    # 8 x 8 = 64 wide: no TP degree leaves a whole 128-wide block
    root = _root(tmp_path, block_shard_refused(8), f"{LAUNCH} {TARGET} --tp-size 8")
    assert root.rule == "tp-shard-block-quant"
    assert root.corrected_command is None


def test_block_quant_shard_under_expert_parallelism_is_no_edit(tmp_path):
    # under EP the split degree is not --tp-size alone: the size proves nothing of it
    given = f"{LAUNCH} {TARGET} --tp-size 8 --ep-size 8"
    root = _root(tmp_path, block_shard_refused(2368), given)
    assert root.corrected_command is None


def heads_refused(numerator: int, denominator: int) -> list[str]:
    return [
        "[2026-03-04 09:11:08 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/x/sglang/srt/distributed/utils.py", line 30, in ensure_divisibility',
        '    assert numerator % denominator == 0, "{} is not divisible by {}".format(',
        f"AssertionError: {numerator} is not divisible by {denominator}",
    ]


def test_indivisible_heads_take_the_largest_power_of_two_tp_dividing_them(tmp_path):
    root = _root(tmp_path, heads_refused(16, 6), f"{LAUNCH} {TARGET} --tp-size 6")
    assert root.rule == "tp-size-indivisible"
    assert root.corrected_command == f"{LAUNCH} {TARGET} --tp-size 4"


def test_indivisible_by_another_degree_than_the_tp_is_no_edit(tmp_path):
    # the denominator is not the typed TP degree (attention TP, a LoRA rank): no edit
    root = _root(tmp_path, heads_refused(16, 3), f"{LAUNCH} {TARGET} --tp-size 6")
    assert root.rule == "tp-size-indivisible"
    assert root.corrected_command is None


def test_json_report_says_when_the_fix_is_outside_the_command(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("\n".join(OTHER_PROCESSES) + "\n", "utf-8")
    outside = json.loads(render_json(analyze([str(log)], Options(command=f"{LAUNCH} {TARGET}"))))
    assert outside["incidents"][0]["fix_outside_command"] is True
    log.write_text("\n".join(TOPK_LIMIT) + "\n", "utf-8")
    given = f"{LAUNCH} {TARGET} {EAGLE} {WIDE_TREE}"
    inside = json.loads(render_json(analyze([str(log)], Options(command=given))))
    assert inside["incidents"][0]["fix_outside_command"] is False


def test_memory_other_processes_hold_is_outside_the_command(tmp_path):
    root = _root(tmp_path, OTHER_PROCESSES, f"{LAUNCH} {TARGET} --mem-fraction-static 0.8")
    assert root.rule_class == "oom"
    assert root.fix_outside_command
    assert root.corrected_command is None


def test_environment_rule_is_outside_the_command(tmp_path):
    lines = ["Traceback (most recent call last):", "ModuleNotFoundError: No module named 'vllm'"]
    root = _root(tmp_path, lines, f"{LAUNCH} {TARGET}")
    assert root.rule == "environment"
    assert root.fix_outside_command


def test_a_flag_fix_is_not_outside_the_command(tmp_path):
    root = _root(tmp_path, TOPK_LIMIT, f"{LAUNCH} {TARGET} {EAGLE} --speculative-eagle-topk 4")
    assert not root.fix_outside_command


def test_context_length_above_the_local_model_is_lowered_to_it(tmp_path):
    # fixtures/models/llama-target's config.json: max_position_embeddings 4096
    given = f"{LAUNCH} {TARGET} --device cpu --context-length 8K"
    root = _root(tmp_path, argparse_context("8K"), given)
    assert root.corrected_command.endswith("--context-length 4096")


def test_context_length_within_the_local_model_is_kept(tmp_path):
    given = f"{LAUNCH} {TARGET} --device cpu --context-length 2K"
    root = _root(tmp_path, argparse_context("2K"), given)
    assert root.corrected_command.endswith("--context-length 2048")


def test_model_with_its_own_code_gets_trust_remote_code():
    case = ROOT / "fixtures" / "source" / "model_load_custom_code_needs_trust_remote_code.log"
    given = f"{LAUNCH} --model-path /models/acme-chat-7b --port 30000"
    root = analyze([str(case)], Options(command=given)).incidents[0]
    assert root.corrected_command == f"{given} --trust-remote-code"
    assert not root.fix_outside_command


def test_model_here_that_loads_no_further_is_outside_the_command():
    # the config-only folder has no tokenizer: its files, not a flag, are at fault
    case = ROOT / "fixtures" / "real" / "model_load_missing_tokenizer.log"
    root = analyze([str(case)], Options(command=f"{LAUNCH} {TARGET} --device cpu")).incidents[0]
    assert root.rule == "model-load"
    assert root.fix_outside_command
    assert root.corrected_command is None


def test_killed_from_outside_is_outside_the_command():
    case = ROOT / "fixtures" / "source" / "silent_death_scheduler_died_exit_9.log"
    root = analyze([str(case)], Options()).incidents[0]
    assert root.rule_class == "silent_death"
    assert root.fix_outside_command


@pytest.fixture(scope="module")
def real_verdicts(tmp_path_factory) -> dict[str, str]:
    """Each test's given and corrected commands, through real SGLang in one batch."""
    tmp = tmp_path_factory.mktemp("verdicts")
    flex = ROOT / "fixtures" / "source" / "spec_eagle_flex_attention_verify.log"
    # the command as typed: one rebuilt from the record leaves the backend, which SGLang may
    # choose itself, out (docs/evidence.md), so it would show nothing to correct
    typed = (
        f"{LAUNCH} {TARGET} --device cpu --attention-backend flex_attention {EAGLE} "
        "--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4"
    )
    backend = analyze([str(flex)], Options(command=typed)).incidents[0]
    assert backend.rule == "spec-attention-backend-unsupported"
    assert "--attention-backend" not in backend.corrected_command
    chain = _root(tmp / "chain", TOPK_LIMIT, f"{LAUNCH} {TARGET} {EAGLE} {WIDE_TREE}")
    tree = _root(tmp / "tree", TREE_TOO_SMALL, f"{LAUNCH} {TARGET} {EAGLE} {DEEP_TREE}")
    context = _root(
        tmp / "context",
        argparse_context("8K"),
        f"{LAUNCH} {TARGET} --device cpu --context-length 8K",
    )
    quant = _root(
        tmp / "quant",
        quant_refused(MODELOPT_FP8_REFUSES),
        f"{LAUNCH} {TARGET} --device cpu --quantization modelopt_fp8",
    )
    diffusion = analyze([str(DIFFUSION_REFUSED)], Options()).incidents[0]
    heads = _root(tmp / "heads", heads_refused(16, 6), f"{LAUNCH} {TARGET} --device cpu --tp-size 6")
    commands = {
        "heads corrected": heads.corrected_command,
        "diffusion corrected": diffusion.corrected_command,
        "quant corrected": quant.corrected_command,
        "backend given": backend.command,
        "backend corrected": backend.corrected_command,
        "chain corrected": chain.corrected_command,
        "tree given": f"{LAUNCH} {TARGET} {EAGLE} {DEEP_TREE}",
        "tree corrected": tree.corrected_command,
        "context given": f"{LAUNCH} {TARGET} --device cpu --context-length 8192",
        "context corrected": context.corrected_command,
        # a model that is not here: its real context length is unknown, SGLang must not refuse
        "stand-in long context": f"{LAUNCH} --model-path /nonexistent/long-model --context-length 131072",
    }
    statuses = [v.status for v in verify_commands(list(commands.values()))]
    return dict(zip(commands, statuses, strict=True))


WIDE_TREE = "--speculative-num-steps 3 --speculative-eagle-topk 4 --speculative-num-draft-tokens 8 --device cpu"
DEEP_TREE = "--speculative-num-steps 2 --speculative-eagle-topk 2 --speculative-num-draft-tokens 12 --device cpu"


@pytest.mark.sglang
@needs_sglang
def test_real_sglang_refuses_flex_attention_with_speculation_and_accepts_the_fix(real_verdicts):
    # arg_groups/attention_hook.py: speculative decoding is not supported with flex attention
    assert real_verdicts["backend given"] == "fail"
    assert real_verdicts["backend corrected"] == "pass"


@pytest.mark.sglang
@needs_sglang
def test_real_sglang_accepts_the_chain_and_the_fitted_tree(real_verdicts):
    assert real_verdicts["chain corrected"] == "pass"
    assert real_verdicts["tree corrected"] == "pass"


@pytest.mark.sglang
@needs_sglang
def test_real_sglang_refuses_a_context_above_the_model_and_accepts_the_fix(real_verdicts):
    assert real_verdicts["context given"] == "fail"
    assert real_verdicts["context corrected"] == "pass"


@pytest.mark.sglang
@needs_sglang
def test_real_sglang_accepts_the_command_without_the_refused_quantization(real_verdicts):
    assert real_verdicts["quant corrected"] == "pass"
    assert real_verdicts["diffusion corrected"] == "pass"
    assert real_verdicts["heads corrected"] == "pass"


@pytest.mark.sglang
@needs_sglang
def test_stand_in_model_takes_the_commands_context_length(real_verdicts):
    assert real_verdicts["stand-in long context"] == "pass"


def test_backslash_continued_command_is_read_whole(tmp_path):
    lines = [
        f"$ {LAUNCH} \\",
        f"    {TARGET} \\",
        "    --device cpu \\",
        "    --speculative_algorithm EAGLE",
        "launch_server.py: error: unrecognized arguments: --speculative_algorithm EAGLE",
    ]
    root = _root(tmp_path, lines, None)
    assert root.command_source == "log"
    assert root.command == f"{LAUNCH} {TARGET} --device cpu --speculative_algorithm EAGLE"
    assert root.corrected_command.endswith("--device cpu --speculative-algorithm EAGLE")


def test_no_llm_correction_for_another_serving_backend(tmp_path):
    # `--model-type diffusion` sends the flags to the diffusion server's own parser
    lines = [
        "$ sglang serve --model-type diffusion --model-path /m/flux --num-gpus 2 --bogus-flag 1",
        "error: unrecognized arguments: --bogus-flag 1",
    ]
    root = _root(tmp_path, lines, None)
    assert root.command is not None
    assert root.corrected_command is None
    assert any("--model-type diffusion" in a for a in root.advice)
