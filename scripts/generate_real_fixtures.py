"""Generate the real-SGLang fixtures in fixtures/real/ from CPU runs of launch_server.

Run from the repository root with the Python of an environment that has SGLang
0.5.23 installed (never the project's own environment):

    /work/venvs/sglang/bin/python scripts/generate_real_fixtures.py            # all cases
    /work/venvs/sglang/bin/python scripts/generate_real_fixtures.py --only NAME
    /work/venvs/sglang/bin/python scripts/generate_real_fixtures.py --check    # verify only

Why real runs: the analyzer's rules are written against what SGLang prints, and
hand-written logs drift from it (prog name, usage dump, traceback shapes). Each
case below is one `python -m sglang.launch_server --model-path fixtures/models/...
--device cpu <flags>` run with cwd = repo root, a timeout (process group killed
on expiry), no proxy or SGLANG_* variables, PYTHONUNBUFFERED=1 so stdout and
stderr interleave in the order they were written, and both streams captured into
fixtures/real/<case>.log. The model folders hold only a config.json: that is
enough to get through argparse and server-args resolution, which is where the
interesting failures happen, and every run fails well before weights would load.

Each log gets a sidecar fixtures/real/<case>.toml: [fixture] says how the log was
made, [expect] what a correct analyzer must conclude (class, decisive line,
offending flags, corrected command). The decisive line is found in the log as
the LAST line that starts with the case's `decisive` text (argparse: the
`sglang serve: error: ...` line; traceback: the final `ExceptionType: message`
line), so the number follows the log if SGLang's output shifts.

How a corrected command is verified (the reliable way): run, in a fresh
subprocess of SGLang's Python, exactly the steps launch_server takes before it
touches a tokenizer, a port or a model weight --
`load_plugins()`, `prepare_server_args(argv)` (SGLang's own parser, so prefix
expansion and choices are SGLang's), `server_args.resolve_once()` (the resolution
pipeline where all speculative-decoding and config checks live in 0.5.23;
`prepare_server_args` alone returns unresolved input, so it is not enough), and
`server_args.check_server_args()` (the assertions engine._launch_subprocesses
runs right after resolution). Exit status 0 and the marker line mean it passed;
argparse errors exit 2, validation errors raise. A subprocess, because
resolution publishes process-wide state and a record that failed resolution
cannot be retried. Running launch_server itself and judging "it failed later"
would need a log heuristic, and on CPU it fails at the tokenizer in seconds
anyway, so the direct calls are both faster and exact. `verified = true` is
written only when this passed. For cases whose original command is itself valid
(failures after validation: model_load, environment, port_in_use), the original
is checked the same way and recorded as `command_passes_validation`.

Deterministic output: model configs, sidecars and the set of files are a pure
function of CASES and the captured logs; only the log text itself (timestamps,
pids) differs between runs. A full run deletes fixtures/real files that belong
to no case.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "fixtures" / "models"
REAL = ROOT / "fixtures" / "real"

# The verify steps live in the analyzer (loganalyze verify); this script runs under SGLang's
# Python, where the project is not installed, so import it from the checkout.
sys.path.insert(0, str(ROOT))
from analyzer.core.toml_data import toml_value  # noqa: E402
from analyzer.sglang.verify import VERIFY_MARKER, VERIFY_SNIPPET  # noqa: E402

SGLANG_VERSION = "0.5.23"
LAUNCH = "python -m sglang.launch_server"
TIMEOUT_S = 120
VERIFY_TIMEOUT_S = 180
# Held by a listening socket while the port_in_use cases run.
BUSY_PORT = 31337
# argparse's error line: SGLang's parser is ArgumentParser(prog="sglang serve"),
# whatever entry point was used.
ARGPARSE_ERROR = "sglang serve: error: "

TARGET = "--model-path fixtures/models/llama-target --device cpu"
EAGLE3 = (
    "--speculative-algorithm EAGLE3 --speculative-draft-model-path fixtures/models/eagle3-draft"
)
EAGLE = "--speculative-algorithm EAGLE --speculative-draft-model-path fixtures/models/eagle-draft"
DP_ATTN = "--tp-size 2 --attn-dp-size 2"

_LLAMA_COMMON: dict[str, object] = {
    "bos_token_id": 1,
    "eos_token_id": 2,
    "head_dim": 64,
    "hidden_act": "silu",
    "hidden_size": 256,
    "initializer_range": 0.02,
    "intermediate_size": 688,
    "max_position_embeddings": 4096,
    "model_type": "llama",
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "rms_norm_eps": 1e-05,
    "rope_scaling": None,
    "rope_theta": 10000.0,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.46.0",
    "use_cache": True,
    "vocab_size": 32000,
}

# Small but realistic Llama-family configs: a 2-layer target, and one-layer
# EAGLE / EAGLE-3 drafts shaped like the published sglang-EAGLE* checkpoints.
MODEL_CONFIGS: dict[str, dict[str, object]] = {
    "llama-target": {
        "architectures": ["LlamaForCausalLM"],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "mlp_bias": False,
        "num_hidden_layers": 2,
        "pretraining_tp": 1,
        **_LLAMA_COMMON,
    },
    "eagle3-draft": {
        "architectures": ["LlamaForCausalLMEagle3"],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "draft_vocab_size": 8000,
        "num_hidden_layers": 1,
        **_LLAMA_COMMON,
    },
    "eagle-draft": {
        "architectures": ["LlamaForCausalLMEagle"],
        "num_hidden_layers": 1,
        **_LLAMA_COMMON,
    },
}


@dataclass(frozen=True)
class Case:
    """One launch and what a correct analyzer must conclude from its log.

    `args` and `corrected` are the text after `python -m sglang.launch_server`.
    `decisive` is the start of the decisive line. `corrected` is None when no
    flag edit fixes the failure (model files or packages missing): the sidecar
    then says `no_correction = true`. `flags` None makes no claim about flags.
    """

    name: str
    args: str
    expect_class: str
    decisive: str
    flags: tuple[str, ...] | None
    note: str
    corrected: str | None = None
    typed_flags: tuple[str, ...] = ()
    wrapper: str | None = None  # "set-x": bash -x prints `+ cmd`; "dollar": echo `$ cmd`
    busy_port: bool = False
    # Without a corrected command: whether the original passes validation (the
    # failure comes later). False only where resolution itself hits the failure.
    args_valid: bool = True

    @property
    def command(self) -> str:
        return f"{LAUNCH} {self.args}"

    @property
    def corrected_command(self) -> str | None:
        return None if self.corrected is None else f"{LAUNCH} {self.corrected}"


def _unrec(
    name: str,
    args: str,
    flags: tuple[str, ...],
    corrected: str,
    note: str,
    wrapper: str | None = None,
) -> Case:
    """An `unrecognized arguments` case; argparse's error line is the decisive one."""
    return Case(
        name,
        args,
        "argparse_unrecognized",
        ARGPARSE_ERROR,
        flags,
        note,
        corrected,
        wrapper=wrapper,
    )


def _invalid(name: str, args: str, flags: tuple[str, ...], corrected: str, note: str) -> Case:
    """Any other argparse error (choice, type, missing value, ambiguity, required)."""
    return Case(name, args, "argparse_invalid", ARGPARSE_ERROR, flags, note, corrected)


CASES: tuple[Case, ...] = (
    # --- argparse_unrecognized: vLLM spellings and typos --------------------------------
    _unrec(
        "unrecognized_num_speculative_tokens",
        f"{TARGET} --num-speculative-tokens 4",
        ("--num-speculative-tokens",),
        f"{TARGET} --speculative-num-draft-tokens 4",
        "vLLM's --num-speculative-tokens; argparse lists the stray value too "
        "('unrecognized arguments: --num-speculative-tokens 4').",
    ),
    _unrec(
        "unrecognized_gpu_memory_utilization",
        f"{TARGET} --gpu-memory-utilization 0.9",
        ("--gpu-memory-utilization",),
        f"{TARGET} --mem-fraction-static 0.9",
        "vLLM's --gpu-memory-utilization is --mem-fraction-static in SGLang.",
    ),
    _unrec(
        "unrecognized_max_model_len",
        f"{TARGET} --max-model-len 4096",
        ("--max-model-len",),
        f"{TARGET} --context-length 4096",
        "vLLM's --max-model-len is --context-length in SGLang.",
    ),
    _unrec(
        "unrecognized_speculative_model",
        f"{TARGET} --speculative-algorithm EAGLE3 --speculative-model fixtures/models/eagle3-draft",
        ("--speculative-model",),
        f"{TARGET} {EAGLE3}",
        "vLLM's --speculative-model is --speculative-draft-model-path (alias "
        "--speculative-draft-model) in SGLang; --speculative-model is no prefix of it.",
    ),
    _unrec(
        "unrecognized_max_num_seqs",
        f"{TARGET} --max-num-seqs 64",
        ("--max-num-seqs",),
        f"{TARGET} --max-running-requests 64",
        "vLLM's --max-num-seqs is --max-running-requests in SGLang.",
    ),
    _unrec(
        "unrecognized_typo_not_a_prefix",
        f"{TARGET} --speculative-num-draft-tokns 4",
        ("--speculative-num-draft-tokns",),
        f"{TARGET} --speculative-num-draft-tokens 4",
        "A typo that is not a prefix of any option is rejected (compare "
        "spec_typo_prefix_silently_expanded).",
    ),
    _unrec(
        "unrecognized_after_deprecated_flag_ansi",
        f"{TARGET} --disable-cuda-graph --max-model-len 4096",
        ("--max-model-len",),
        f"{TARGET} --disable-cuda-graph --context-length 4096",
        "The deprecated --disable-cuda-graph still works but prints a yellow "
        "(ANSI \\x1b[1;33m) warning line before the usage dump; the warning is "
        "not the root cause.",
    ),
    _unrec(
        "unrecognized_set_x_wrapper",
        f"{TARGET} {EAGLE3} --speculative-num-steps 3 --speculative-eagle-topk 1 "
        "--num-speculative-tokens 4",
        ("--num-speculative-tokens",),
        f"{TARGET} {EAGLE3} --speculative-num-steps 3 --speculative-eagle-topk 1 "
        "--speculative-num-draft-tokens 4",
        "Launched through `bash -x`, so the log starts with the `+ python -m ...` "
        "line a set -x wrapper prints.",
        wrapper="set-x",
    ),
    _unrec(
        "unrecognized_dollar_wrapper",
        f"{TARGET} --gpu-memory-utilization 0.85 --max-num-seqs 32",
        ("--gpu-memory-utilization", "--max-num-seqs"),
        f"{TARGET} --mem-fraction-static 0.85 --max-running-requests 32",
        "A wrapper echoes `$ python -m ...` before running it; two unrecognized "
        "flags, each with a value, in one error line.",
        wrapper="dollar",
    ),
    # --- argparse_invalid ------------------------------------------------------------
    _invalid(
        "invalid_ambiguous_cuda_graph_max_bs",
        f"{TARGET} --cuda-graph-max-bs 8",
        ("--cuda-graph-max-bs",),
        f"{TARGET} --cuda-graph-max-bs-decode 8",
        "--cuda-graph-max-bs is gone in 0.5.23; with allow_abbrev it is an "
        "ambiguous prefix of --cuda-graph-max-bs-decode and --cuda-graph-max-bs-prefill.",
    ),
    _invalid(
        "invalid_ambiguous_speculative_draft_path",
        f"{TARGET} --speculative-algorithm EAGLE3 --speculative-draft fixtures/models/eagle3-draft "
        "--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4",
        ("--speculative-draft", "--speculative-draft-model-path"),
        f"{TARGET} --speculative-algorithm EAGLE3 --speculative-draft-model-path "
        "fixtures/models/eagle3-draft --speculative-num-steps 3 --speculative-eagle-topk 1 "
        "--speculative-num-draft-tokens 4",
        "--speculative-draft is a prefix of the draft model's path, revision, quantization and "
        "load format options; the value given is a path, which only the path option takes.",
    ),
    _invalid(
        "invalid_int_tp_size",
        f"{TARGET} --tp-size two",
        ("--tp-size",),
        f"{TARGET} --tp-size 2",
        "argparse names the option with its alias: 'argument --tp-size/"
        "--tensor-parallel-size: invalid int value'.",
    ),
    _invalid(
        "invalid_float_mem_fraction_static",
        f"{TARGET} --mem-fraction-static 90%",
        ("--mem-fraction-static",),
        f"{TARGET} --mem-fraction-static 0.9",
        "A percentage where a fraction is expected.",
    ),
    _invalid(
        "invalid_missing_value",
        f"{TARGET} {EAGLE} --speculative-num-steps --speculative-eagle-topk 1 "
        "--speculative-num-draft-tokens 4",
        ("--speculative-num-steps",),
        f"{TARGET} {EAGLE} --speculative-num-steps 3 --speculative-eagle-topk 1 "
        "--speculative-num-draft-tokens 4",
        "A flag followed by another flag instead of its value: 'expected one argument'.",
    ),
    _invalid(
        "invalid_choice_kv_cache_dtype",
        f"{TARGET} --kv-cache-dtype fp8",
        ("--kv-cache-dtype",),
        f"{TARGET} --kv-cache-dtype fp8_e4m3",
        "vLLM accepts --kv-cache-dtype fp8; SGLang wants fp8_e4m3 or fp8_e5m2.",
    ),
    _invalid(
        "invalid_choice_dtype",
        f"{TARGET} --dtype bf16",
        ("--dtype",),
        f"{TARGET} --dtype bfloat16",
        "bf16 is a --kv-cache-dtype choice but not a --dtype choice.",
    ),
    _invalid(
        "invalid_required_model_path_positional",
        "fixtures/models/llama-target --device cpu",
        ("--model-path",),
        TARGET,
        "vllm-serve style positional model: argparse reports the missing required "
        "--model-path/--model before the unrecognized positional.",
    ),
    # --- spec_assertion: raised while resolution validates speculative decoding -------
    Case(
        "spec_eagle3_topk_without_steps",
        f"{TARGET} {EAGLE3} --speculative-eagle-topk 4 --speculative-num-draft-tokens 8",
        "spec_assertion",
        "AssertionError",
        ("--speculative-eagle-topk", "--speculative-num-draft-tokens", "--speculative-num-steps"),
        "_handle_eagle_family asserts topk and draft tokens are unset when "
        "--speculative-num-steps is; a bare AssertionError with no message.",
        f"{TARGET} {EAGLE3} --speculative-eagle-topk 4 --speculative-num-draft-tokens 8 "
        "--speculative-num-steps 3",
    ),
    Case(
        "spec_typo_prefix_silently_expanded",
        f"{TARGET} {EAGLE3} --speculative-eagle-topk 4 --speculative-num-draft-token 8",
        "spec_assertion",
        "AssertionError",
        ("--speculative-eagle-topk", "--speculative-num-draft-tokens", "--speculative-num-steps"),
        "The typo --speculative-num-draft-token is a unique prefix of "
        "--speculative-num-draft-tokens, so argparse (allow_abbrev) silently expands it "
        "and the run fails later, at the EAGLE assertion; the log never shows the typo.",
        f"{TARGET} {EAGLE3} --speculative-eagle-topk 4 --speculative-num-draft-token 8 "
        "--speculative-num-steps 3",
        typed_flags=("--speculative-num-draft-token",),
    ),
    Case(
        "spec_unknown_algorithm_eagle_dash_3",
        f"{TARGET} --speculative-algorithm EAGLE-3 "
        "--speculative-draft-model-path fixtures/models/eagle3-draft",
        "spec_assertion",
        "ValueError: Unknown speculative algorithm name",
        ("--speculative-algorithm",),
        "--speculative-algorithm has no argparse choices in 0.5.23 (plugins may register "
        "names), so EAGLE-3 passes parsing and SpeculativeAlgorithm.from_string raises.",
        f"{TARGET} {EAGLE3}",
    ),
    Case(
        "spec_steps_without_topk",
        f"{TARGET} {EAGLE3} --speculative-num-steps 4",
        "spec_assertion",
        "TypeError:",
        ("--speculative-num-steps", "--speculative-eagle-topk"),
        "Steps without topk skips auto-selection and then compares None > 1: a "
        "TypeError, not a readable validation error.",
        f"{TARGET} {EAGLE3} --speculative-num-steps 4 --speculative-eagle-topk 1",
    ),
    Case(
        "spec_sink_without_window",
        f"{TARGET} {EAGLE3} --speculative-draft-sink-size 4",
        "spec_assertion",
        "ValueError: --speculative-draft-sink-size requires",
        ("--speculative-draft-sink-size", "--speculative-draft-window-size"),
        "handle_speculative_decoding: a sink size needs a draft window size.",
        # The window size has no value the message implies, and loganalyze does not invent
        # one (it says so in the advice): the sink size goes instead.
        f"{TARGET} {EAGLE3}",
    ),
    Case(
        "spec_rejection_sampling_topk",
        f"{TARGET} {EAGLE3} --speculative-use-rejection-sampling --speculative-num-steps 3 "
        "--speculative-eagle-topk 4 --speculative-num-draft-tokens 8",
        "spec_assertion",
        "ValueError: --speculative-use-rejection-sampling requires",
        ("--speculative-use-rejection-sampling", "--speculative-eagle-topk"),
        "Rejection sampling only works on the linear chain (topk 1).",
        # topk 1 makes the draft a chain: draft tokens = steps + 1 = 4 (SGLang would
        # silently cut 8 to 4; the correction says so explicitly).
        f"{TARGET} {EAGLE3} --speculative-use-rejection-sampling --speculative-num-steps 3 "
        "--speculative-eagle-topk 1 --speculative-num-draft-tokens 4",
    ),
    Case(
        "spec_window_size_not_positive",
        f"{TARGET} {EAGLE3} --speculative-draft-window-size 0",
        "spec_assertion",
        "ValueError: --speculative-draft-window-size must be positive",
        ("--speculative-draft-window-size",),
        "handle_speculative_decoding validates the draft window once for every "
        "algorithm. Any positive window is a modelling choice, so the window goes.",
        f"{TARGET} {EAGLE3}",
    ),
    # --- incompatible_flags: each flag valid alone ------------------------------------
    Case(
        "incompatible_megamoe_without_layernorm_sp",
        f"{TARGET} --enable-megamoe-for-layernorm-sp",
        "incompatible_flags",
        "ValueError: --enable-megamoe-for-layernorm-sp requires",
        ("--enable-megamoe-for-layernorm-sp", "--enable-layernorm-sp"),
        "layernorm_sp_hook.handle_layernorm_sp: one switch only works with another. Adding "
        "--enable-layernorm-sp then fails on the model ('supports only Muse Spark'), so the "
        "switch goes.",
        TARGET,
    ),
    # --- config_validation: other resolution / check_server_args errors --------------
    Case(
        "config_context_length_exceeds_model",
        f"{TARGET} --context-length 8192",
        "config_validation",
        "ValueError: Warning: User-specified context_length",
        ("--context-length",),
        "ModelConfig refuses a context length above the config's 4096; the "
        "ValueError message itself starts with 'Warning:'.",
        f"{TARGET} --context-length 4096",
    ),
    Case(
        "config_sampling_mask_max_tokens_zero",
        f"{TARGET} --sampling-mask-max-tokens 0",
        "config_validation",
        "ValueError: --sampling-mask-max-tokens must be positive",
        ("--sampling-mask-max-tokens",),
        "validate_sampling_mask_max_tokens in the resolution pipeline.",
        f"{TARGET} --sampling-mask-max-tokens 4096",
    ),
    Case(
        "config_tokenizer_worker_num_zero",
        f"{TARGET} --tokenizer-worker-num 0",
        "config_validation",
        "AssertionError: Tokenizer worker num must >= 1",
        ("--tokenizer-worker-num",),
        "check_server_args (run by the engine after resolution) asserts with a message.",
        f"{TARGET} --tokenizer-worker-num 1",
    ),
    Case(
        "config_prefill_decode_interval_negative",
        f"{TARGET} --prefill-decode-interval -1",
        "config_validation",
        "ValueError: --prefill-decode-interval must be non-negative",
        ("--prefill-decode-interval",),
        "A negative number is parsed as a value (the parser has no numeric options).",
        f"{TARGET} --prefill-decode-interval 0",
    ),
    # --- model_load ------------------------------------------------------------------
    Case(
        "model_load_bad_model_path",
        "--model-path fixtures/models/llama-3-8b --device cpu",
        "model_load",
        "OSError: Repo id must be in the form",
        ("--model-path",),
        "A local path that does not exist is taken for a hub repo id and rejected; "
        "a chained traceback (direct cause + during handling) raised from resolution. "
        "No corrected command: no sibling folder's name is close enough to be the one meant.",
        args_valid=False,
    ),
    Case(
        "model_load_bad_draft_model_path",
        f"{TARGET} --speculative-algorithm EAGLE3 "
        "--speculative-draft-model-path fixtures/models/eagle3_draft",
        "model_load",
        "OSError: Repo id must be in the form",
        ("--speculative-draft-model-path",),
        "The draft path typo is caught while resolving the speculative algorithm "
        "(it reads the draft's config.json).",
        f"{TARGET} {EAGLE3}",
    ),
    Case(
        "model_load_missing_tokenizer",
        TARGET,
        "model_load",
        "ValueError: Couldn't instantiate the backend tokenizer",
        (),
        "Negative case: a valid command; config-only model folder, so the tokenizer "
        "manager fails. The exception message spans several lines.",
    ),
    Case(
        "model_load_valid_eagle3_then_tokenizer",
        f"{TARGET} {EAGLE3} --speculative-num-steps 3 --speculative-eagle-topk 4 "
        "--speculative-num-draft-tokens 8",
        "model_load",
        "ValueError: Couldn't instantiate the backend tokenizer",
        (),
        "Negative case: a valid EAGLE-3 configuration passes all speculative checks "
        "and fails only at tokenizer loading.",
    ),
    Case(
        "model_load_lowercase_eagle3_accepted",
        f"{TARGET} --speculative-algorithm eagle3 "
        "--speculative-draft-model-path fixtures/models/eagle3-draft",
        "model_load",
        "ValueError: Couldn't instantiate the backend tokenizer",
        (),
        "Negative case: lowercase 'eagle3' is upper-cased by resolution and accepted.",
    ),
    Case(
        "model_load_tensor_parallel_size_alias",
        f"{TARGET} --tensor-parallel-size 2",
        "model_load",
        "ValueError: Couldn't instantiate the backend tokenizer",
        (),
        "Negative case: vLLM's --tensor-parallel-size is a real alias of --tp-size in "
        "0.5.23, so this is not an argparse error.",
    ),
    # --- port_in_use (dp attention checks its ports before launching) ---------------
    Case(
        "port_in_use_dist_init_addr",
        f"{TARGET} {DP_ATTN} --dist-init-addr 127.0.0.1:{BUSY_PORT}",
        "port_in_use",
        "Port is already in use.",
        ("--dist-init-addr",),
        "PortArgs.init_new waits 30 s for the busy dist-init port, logs 'Port is "
        "already in use.' with a traceback, then raises.",
        f"{TARGET} {DP_ATTN} --dist-init-addr 127.0.0.1:{BUSY_PORT + 10}",
        busy_port=True,
    ),
    Case(
        "port_in_use_nccl_port",
        f"{TARGET} {DP_ATTN} --nccl-port {BUSY_PORT}",
        "port_in_use",
        "Port is already in use.",
        ("--nccl-port",),
        "The explicit NCCL port is busy.",
        f"{TARGET} {DP_ATTN} --nccl-port {BUSY_PORT + 10}",
        busy_port=True,
    ),
    Case(
        "port_in_use_derived_from_http_port",
        f"{TARGET} {DP_ATTN} --port {BUSY_PORT - 233}",
        "port_in_use",
        "Port is already in use.",
        ("--port",),
        "Without --dist-init-addr the dist-init port is --port + 233; the busy port "
        "is not on the command line at all.",
        f"{TARGET} {DP_ATTN} --port {BUSY_PORT - 223}",
        busy_port=True,
    ),
    # --- environment -----------------------------------------------------------------
    Case(
        "environment_vllm_missing_for_cpu_rope",
        f"{TARGET} --skip-tokenizer-init --load-format dummy",
        "environment",
        "ModuleNotFoundError: No module named 'vllm'",
        (),
        "Past the tokenizer, the scheduler subprocess builds the model; the CPU rotary "
        "embedding imports vllm. The traceback starts mid-line after 'Scheduler hit an "
        "exception: ' and the parent kills its own process group (exit 137).",
    ),
    Case(
        "environment_no_nvidia_driver",
        "--model-path fixtures/models/llama-target --device cuda --skip-tokenizer-init "
        "--load-format dummy",
        "environment",
        "RuntimeError: Found no NVIDIA driver",
        None,
        "--device cuda passes validation on a machine without a GPU; the scheduler "
        "subprocess fails at CUDA init.",
    ),
    Case(
        "environment_ray_missing",
        f"{TARGET} --use-ray",
        "environment",
        "ImportError: Ray is required",
        ("--use-ray",),
        "run_server re-raises the missing ray import with an install hint.",
    ),
    Case(
        "environment_grpc_servicer_missing",
        f"{TARGET} --smg-grpc-mode",
        "environment",
        "ImportError: gRPC mode requires the smg-grpc-servicer package",
        None,  # the message names a package, not the flag
        "Chained: ModuleNotFoundError for smg_grpc_servicer, then the ImportError hint.",
    ),
    Case(
        "environment_hub_unreachable",
        "--model-path meta-llama/Llama-3.1-8B-Instruct --device cpu",
        "environment",
        "OSError: We couldn't connect to 'https://huggingface.co'",
        (),
        "A hub repo id on a machine without hub access (captured offline; with network "
        "access this run would download or hit the gated-repo error instead). Raised "
        "inside server-args resolution, which reads the model config.",
        args_valid=False,
    ),
)


@dataclass
class RunResult:
    """What one launch produced."""

    exit_code: int
    timed_out: bool
    lines: list[str] = field(default_factory=list)


def clean_env() -> dict[str, str]:
    """The environment for every run: no proxies, no SGLANG_* knobs, unbuffered output.

    SGLANG_* variables change validation (SGLANG_IS_IN_CI turns the context-length
    error into a warning), and proxies would leak this machine's setup into logs.
    """
    env = {
        key: value
        for key, value in os.environ.items()
        if "proxy" not in key.lower() and not key.startswith("SGLANG_")
    }
    env["PYTHONUNBUFFERED"] = "1"
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def launch_argv(case: Case) -> list[str]:
    """The process to start: the launch itself, or the shell wrapper that prints it."""
    if case.wrapper == "set-x":
        return ["bash", "-xc", case.command]
    if case.wrapper == "dollar":
        return ["bash", "-c", f"echo {shlex.quote('$ ' + case.command)}; exec {case.command}"]
    return [sys.executable, "-m", "sglang.launch_server", *shlex.split(case.args)]


def run_case(case: Case) -> RunResult:
    """Run one launch with a timeout, killing its whole process group on expiry."""
    proc = subprocess.Popen(
        launch_argv(case),
        cwd=ROOT,
        env=clean_env(),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    timed_out = False
    try:
        output, _ = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        timed_out = True
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
    text = output.decode("utf-8", errors="replace")
    return RunResult(shell_exit_code(proc.returncode), timed_out, text.split("\n"))


def shell_exit_code(returncode: int) -> int:
    """The status a shell would show: 128 + N for death by signal N (SIGKILL -> 137)."""
    return 128 - returncode if returncode < 0 else returncode


def decisive_line(lines: Sequence[str], prefix: str) -> int | None:
    """1-based number of the last line starting with `prefix` (after a `[time]` prefix)."""
    for index in range(len(lines) - 1, -1, -1):
        body = re.sub(r"^\[\d{4}-\d\d-\d\d [^\]]*\] ", "", lines[index].rstrip())
        if body.startswith(prefix.rstrip()):
            return index + 1
    return None


def verify(args: str) -> bool:
    """Whether `launch_server <args>` passes SGLang's parsing, resolution and checks."""
    try:
        proc = subprocess.run(
            [sys.executable, "-c", VERIFY_SNIPPET, *shlex.split(args)],
            cwd=ROOT,
            env=clean_env(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=VERIFY_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        return False
    return proc.returncode == 0 and VERIFY_MARKER in proc.stdout.decode(errors="replace")


def verification(case: Case) -> dict[str, bool]:
    """The [expect] verification keys: the corrected command, or the valid original."""
    if case.corrected is not None:
        return {"verified": verify(case.corrected)}
    return {"command_passes_validation": verify(case.args)}


def expected_verification(case: Case) -> dict[str, bool]:
    """What `verification` must return for the case to be right."""
    if case.corrected is not None:
        return {"verified": True}
    return {"command_passes_validation": case.args_valid}


@contextlib.contextmanager
def holding_port(port: int, active: bool) -> Iterator[None]:
    """Keep `port` busy with a listening socket while the port_in_use cases run."""
    if not active:
        yield
        return
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("0.0.0.0", port))
    sock.listen(1)
    try:
        yield
    finally:
        sock.close()


def render_sidecar(case: Case, result: RunResult, line: int | None, checks: dict[str, bool]) -> str:
    """The sidecar text; a pure function of its inputs so reruns write the same bytes."""
    fixture: dict[str, object] = {
        "origin": "real",
        "sglang_version": SGLANG_VERSION,
        "command": case.command,
        "exit_code": result.exit_code,
        "generated_by": "scripts/generate_real_fixtures.py",
        "note": case.note,
    }
    if case.wrapper is not None:
        fixture["command_in_log"] = True
        fixture["wrapper"] = case.wrapper
    if result.timed_out:
        fixture["timed_out"] = True
    expect: dict[str, object] = {"class": case.expect_class}
    if line is not None:
        expect["line"] = line
    if case.flags is not None:
        expect["flags"] = list(case.flags)
    if case.typed_flags:
        expect["typed_flags"] = list(case.typed_flags)
    if case.corrected_command is not None:
        expect["corrected_command"] = case.corrected_command
    else:
        expect["no_correction"] = True
    expect.update(checks)
    out = ["[fixture]"]
    out += [f"{key} = {toml_value(value)}" for key, value in fixture.items()]
    out += ["", "[expect]"]
    out += [f"{key} = {toml_value(value)}" for key, value in expect.items()]
    return "\n".join(out) + "\n"


def write_models() -> None:
    """(Re)write the config-only model folders."""
    for name, config in MODEL_CONFIGS.items():
        folder = MODELS / name
        folder.mkdir(parents=True, exist_ok=True)
        write_if_changed(folder / "config.json", json.dumps(config, indent=2) + "\n")


def write_if_changed(path: Path, text: str) -> None:
    """Write atomically, and not at all when the content is already there."""
    if path.exists() and path.read_text(encoding="utf-8") == text:
        return
    with tempfile.NamedTemporaryFile(
        "w", encoding="utf-8", dir=path.parent, delete=False, suffix=".tmp"
    ) as handle:
        handle.write(text)
    os.replace(handle.name, path)


def generate(case: Case) -> list[str]:
    """Run, capture and describe one case; returns problems found (empty if none)."""
    result = run_case(case)
    log_text = "\n".join(result.lines)
    write_if_changed(REAL / f"{case.name}.log", log_text)
    line = decisive_line(result.lines, case.decisive)
    checks = verification(case)
    write_if_changed(REAL / f"{case.name}.toml", render_sidecar(case, result, line, checks))
    problems = []
    if line is None:
        problems.append(f"{case.name}: no line starts with {case.decisive!r}")
    if checks != expected_verification(case):
        problems.append(f"{case.name}: verification gave {checks}, expected otherwise")
    status = "ok" if not problems else "PROBLEM"
    print(f"{case.name}: exit {result.exit_code}, line {line}, {checks} [{status}]", flush=True)
    return problems


def check(case: Case) -> list[str]:
    """Re-verify one case against its committed sidecar, without relaunching."""
    sidecar = REAL / f"{case.name}.toml"
    if not sidecar.exists():
        return [f"{case.name}: no sidecar"]
    expect = tomllib.loads(sidecar.read_text(encoding="utf-8"))["expect"]
    problems = []
    checks = verification(case)
    if checks != expected_verification(case):
        problems.append(f"{case.name}: verification gave {checks}, expected otherwise")
    for key, value in checks.items():
        if expect.get(key) is not value:
            problems.append(f"{case.name}: {key} is {value} now, sidecar has {expect.get(key)}")
    if expect.get("corrected_command") != case.corrected_command:
        problems.append(f"{case.name}: sidecar corrected_command differs from CASES")
    print(f"{case.name}: {'ok' if not problems else 'PROBLEM'}", flush=True)
    return problems


def remove_stale(cases: Sequence[Case]) -> None:
    """Delete fixtures/real files that no case produces (full runs only).

    `intent_*` fixtures belong to scripts/generate_intent_fixtures.py and are kept.
    """
    wanted = {f"{case.name}{suffix}" for case in cases for suffix in (".log", ".toml")}
    for path in REAL.iterdir():
        if path.name.startswith("intent_"):
            continue
        if path.suffix in (".log", ".toml") and path.name not in wanted:
            path.unlink()


def select(names: Sequence[str] | None) -> list[Case]:
    """The cases named with --only, in CASES order; all of them by default."""
    if not names:
        return list(CASES)
    known = {case.name for case in CASES}
    unknown = sorted(set(names) - known)
    if unknown:
        raise SystemExit(f"unknown case(s): {', '.join(unknown)}")
    return [case for case in CASES if case.name in names]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", metavar="CASE", help="run only these cases")
    parser.add_argument(
        "--check",
        action="store_true",
        help="only re-verify corrected commands against the sidecars",
    )
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    parser.add_argument(
        "--jobs",
        type=int,
        default=2,
        help="launches run in parallel (each is a subprocess; default 2)",
    )
    args = parser.parse_args(argv)
    cases = select(args.only)
    if args.list:
        for case in cases:
            print(f"{case.name}\t{case.expect_class}\t{case.command}")
        return 0
    problems: list[str] = []
    if args.check:
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            for found in pool.map(check, cases):
                problems += found
    else:
        write_models()
        REAL.mkdir(parents=True, exist_ok=True)
        with holding_port(BUSY_PORT, any(case.busy_port for case in cases)):
            with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
                for found in pool.map(generate, cases):
                    problems += found
        if not args.only:
            remove_stale(cases)
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
