"""Mutation harness for corrected commands: break valid launches, let real SGLang fail, check
that loganalyze's corrected command is one real SGLang then accepts.

    LOGANALYZE_SGLANG_PYTHON=.sglang/venv/bin/python .venv/bin/python benchmarks/fix_fuzz.py
    ... benchmarks/fix_fuzz.py --sample 40 --floor 0.9      # CI: a seeded sample, a floor

From valid launch commands (EAGLE-3 on a DeepSeek/Kimi-like target, MTP/NEXTN, NGRAM,
STANDALONE, an EAGLE tree, dp-attention, multi-node, LoRA, quantized, serving options), each
checked to pass real SGLang first, seeded mutations make the mistakes users make: vLLM and
older-release names, underscores, the case of a choice, a missing companion flag, a typo,
a divisibility broken, SI suffixes, a switch given a value, Python instead of JSON in a
config flag, a speculative option the device or algorithm lacks, two exclusive flags.
Newer kinds: SGLang's words cut or spelled out (`--spec-algorithm`), a backend or dtype under
its library's name (`torch-flex`, `float8_e4m3fn`), an option an older release spelled
otherwise (`--enable-gdn-replayssm-spec`), a character SGLang's check forbids in a value.
Every mutant runs through SGLang's own parsing and resolution on CPU (`verify.run_batch`:
one SGLang import, a fork per command) to get its real failure output; loganalyze reads
that output (with the command, as `--command` gives it) and its corrected command runs
through real SGLang again. Per mutation kind it prints: mutants, those SGLang rejected,
class right, flags right (the mutated flags among the offending ones), a command offered,
then over the failures with a one- or two-edit fix: accepted (the corrected command passes
SGLang), accepted and intent kept (every flag the user typed is still there, as itself or
its counterpart, and the value the mutation broke comes back), intent lost (accepted, but
something typed is gone: SGLang accepts an empty command too). A mutation names what it
broke, so a drop where SGLang has the option is a loss; only a second wish the mutation
added that conflicts with the first may go. Exit 1 when accepted-and-intent-kept is below
--floor.
"""

from __future__ import annotations

import argparse
import json
import random
import shlex
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from analyzer.pipeline import Options, analyze  # noqa: E402
from analyzer.sglang.catalog import FlagCatalog, load_catalog  # noqa: E402
from analyzer.sglang.launch_command import parse_launch_command  # noqa: E402
from analyzer.sglang.verify import run_batch, sglang_argv, sglang_python  # noqa: E402

LAUNCH = "python -m sglang.launch_server"
LLAMA = "fixtures/models/llama-target"
EAGLE3 = "fixtures/models/eagle3-draft"
EAGLE = "fixtures/models/eagle-draft"
DEEPSEEK = "{models}/deepseek-v3"
LORA = "{models}/lora-adapter"
TRIES = 40  # draws per kind before it counts as exhausted
CHAIN = "--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4"

BASES: dict[str, str] = {
    "eagle3_deepseek": f"--model-path {DEEPSEEK} --trust-remote-code --tp-size 2 "
    f"--speculative-algorithm EAGLE3 --speculative-draft-model-path {EAGLE3} {CHAIN} "
    "--mem-fraction-static 0.85",
    "mtp_nextn": f"--model-path {DEEPSEEK} --trust-remote-code --speculative-algorithm NEXTN "
    "--speculative-num-steps 1 --speculative-eagle-topk 1 --speculative-num-draft-tokens 2",
    "ngram": f"--model-path {LLAMA} --speculative-algorithm NGRAM "
    "--speculative-num-draft-tokens 8 --max-running-requests 32",
    "standalone": f"--model-path {LLAMA} --speculative-algorithm STANDALONE "
    f"--speculative-draft-model-path {LLAMA} {CHAIN}",
    "eagle_tree": f"--model-path {LLAMA} --speculative-algorithm EAGLE "
    f"--speculative-draft-model-path {EAGLE} --speculative-num-steps 3 "
    "--speculative-eagle-topk 4 --speculative-num-draft-tokens 8 --context-length 4096",
    "dp_attention": f"--model-path {DEEPSEEK} --trust-remote-code --tp-size 4 --attn-dp-size 4 "
    "--enable-dp-attention --chunked-prefill-size 4096",
    "multi_node": f"--model-path {LLAMA} --tp-size 4 --nnodes 2 --node-rank 0 "
    "--dist-init-addr 10.0.0.1:5000 --mem-fraction-static 0.8",
    "lora": f"--model-path {LLAMA} --enable-lora --lora-paths a={LORA} --max-lora-rank 16 "
    "--lora-target-modules all --max-loras-per-batch 4",
    "quantized": f"--model-path {LLAMA} --quantization fp8 --kv-cache-dtype fp8_e4m3 "
    "--dtype bfloat16 --mem-fraction-static 0.85",
    "serving": f"--model-path {LLAMA} --context-length 4096 --max-running-requests 64 "
    "--page-size 16 --chunked-prefill-size 2048 "
    "--json-model-override-args '{{\"rope_theta\": 20000}}'",
}

DEEPSEEK_CONFIG = {
    "architectures": ["DeepseekV3ForCausalLM"],
    "model_type": "deepseek_v3",
    "hidden_size": 256,
    "intermediate_size": 512,
    "moe_intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_nextn_predict_layers": 1,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "n_shared_experts": 1,
    "n_routed_experts": 8,
    "num_experts_per_tok": 2,
    "routed_scaling_factor": 2.5,
    "kv_lora_rank": 64,
    "q_lora_rank": 96,
    "qk_rope_head_dim": 16,
    "v_head_dim": 32,
    "qk_nope_head_dim": 32,
    "topk_method": "noaux_tc",
    "n_group": 2,
    "topk_group": 1,
    "first_k_dense_replace": 1,
    "moe_layer_freq": 1,
    "scoring_func": "sigmoid",
    "norm_topk_prob": True,
    "hidden_act": "silu",
    "max_position_embeddings": 8192,
    "rms_norm_eps": 1e-6,
    "rope_theta": 10000,
    "vocab_size": 32000,
    "bos_token_id": 0,
    "eos_token_id": 1,
    "torch_dtype": "bfloat16",
    "tie_word_embeddings": False,
    "transformers_version": "4.46.0",
    "attention_bias": False,
}
LORA_CONFIG = {
    "r": 16,
    "lora_alpha": 32,
    "target_modules": ["q_proj", "v_proj"],
    "peft_type": "LORA",
    "base_model_name_or_path": "llama-target",
    "task_type": "CAUSAL_LM",
}


@dataclass
class Mutant:
    """A broken command: what was done, the flags it touched, the class a reader expects."""

    kind: str
    base: str
    words: list[str]
    expect_class: str
    expect_flags: list[str]
    # whether one or two edits undo it (every kind here, unless it says otherwise)
    small_fix: bool = True
    # what the user meant, beyond keeping every flag of the base command: values a flag must
    # come back with (the value the mutation broke), flags the fix may drop (a second wish
    # the mutation added that conflicts with the first), a flag that must come back
    values: dict[str, str | None] = field(default_factory=dict)
    may_drop: list[str] = field(default_factory=list)
    intended: list[str] = field(default_factory=list)  # the base command's words

    @property
    def command(self) -> str:
        return f"{LAUNCH} {shlex.join(self.words)}"


@dataclass
class Outcome:
    mutant: Mutant
    rejected: bool = False
    rule_class: str | None = None
    flags: list[str] = field(default_factory=list)
    corrected: str | None = None
    fixed: bool = False
    message: str = ""
    intent_kept: bool = False
    lost: list[str] = field(default_factory=list)


# ---- mutations -------------------------------------------------------------------------

Words = list[str]
Mutation = Callable[[random.Random, str, Words], Mutant | None]


def _index(words: Words, flag: str) -> int | None:
    return words.index(flag) if flag in words else None


def _has_value(words: Words, i: int) -> bool:
    return i + 1 < len(words) and not words[i + 1].startswith("--")


def _flags(words: Words) -> list[str]:
    return [w for w in words if w.startswith("--")]


VLLM_NAMES = {
    "--mem-fraction-static": "--gpu-memory-utilization",
    "--context-length": "--max-model-len",
    "--max-running-requests": "--max-num-seqs",
    "--speculative-draft-model-path": "--speculative-model",
    "--chunked-prefill-size": "--max-num-batched-tokens",
}


def vllm_name(rng: random.Random, base: str, words: Words) -> Mutant | None:
    present = [f for f in VLLM_NAMES if f in words]
    if not present:
        return None
    flag = rng.choice(present)
    new = list(words)
    i = new.index(flag)
    new[i] = VLLM_NAMES[flag]
    return Mutant(
        "vllm_name",
        base,
        new,
        "argparse_unrecognized",
        [VLLM_NAMES[flag]],
        values={flag: new[i + 1]},
    )


def vllm_speculative_tokens(rng: random.Random, base: str, words: Words) -> Mutant | None:
    """vLLM's `--num-speculative-tokens N` for SGLang's chain of N steps."""
    steps = _index(words, "--speculative-num-steps")
    topk = _index(words, "--speculative-eagle-topk")
    if steps is None or topk is None or words[topk + 1] != "1":
        return None
    n = words[steps + 1]
    drop = {"--speculative-num-steps", "--speculative-eagle-topk", "--speculative-num-draft-tokens"}
    new: Words = []
    skip = False
    for word in words:
        if skip:
            skip = False
            continue
        if word in drop:
            skip = True
            continue
        new.append(word)
    new += ["--num-speculative-tokens", n]
    return Mutant(
        "vllm_spec_tokens",
        base,
        new,
        "argparse_unrecognized",
        ["--num-speculative-tokens"],
        values={"--speculative-num-steps": n},
    )


# an option of an older release, and the 0.5.23 option that does its job
OLD_NAMES = (
    (["--stream-output"], "argparse_unrecognized", "--incremental-streaming-output"),
    (["--cuda-graph-max-bs", "32"], "argparse_invalid", "--cuda-graph-max-bs-decode"),
)


def old_release_name(rng: random.Random, base: str, words: Words) -> Mutant | None:
    added, rule_class, successor = rng.choice(OLD_NAMES)
    value = added[1] if len(added) > 1 else None
    return Mutant(
        "old_release_name",
        base,
        [*words, *added],
        rule_class,
        [added[0]],
        values={successor: value},
    )


# renamed between shipped releases (the older spelling, the 0.5.23 option, a value)
RENAMES = (
    ("--enable-gdn-replayssm-spec", "--enable-linear-replayssm-spec", None),
    ("--speculative-dflash-draft-window-size", "--speculative-draft-window-size", "64"),
    ("--mamba-scheduler-strategy", "--mamba-radix-cache-strategy", "no_buffer"),
    ("--enable-prefill-context-parallel", "--enable-prefill-cp", None),
    ("--piecewise-cuda-graph-max-tokens", "--cuda-graph-max-bs-prefill", "512"),
)


def release_rename(rng: random.Random, base: str, words: Words) -> Mutant | None:
    """An option an older release spelled otherwise: the successor must come back."""
    old, successor, value = rng.choice(RENAMES)
    added = [old] if value is None else [old, value]
    return Mutant(
        "release_rename",
        base,
        [*words, *added],
        "argparse_unrecognized",
        [old],
        values={successor: value},
    )


# SGLang's words written out or cut the other way (`spec` for `speculative`, `attention`
# for `attn`, `memory` for `mem`, `reqs` for `requests`)
ABBREVIATED = {
    "--speculative-algorithm": "--spec-algorithm",
    "--speculative-draft-model-path": "--spec-draft-model-path",
    "--speculative-num-steps": "--spec-num-steps",
    "--speculative-eagle-topk": "--spec-eagle-topk",
    "--speculative-num-draft-tokens": "--spec-num-draft-tokens",
    "--mem-fraction-static": "--memory-fraction-static",
    "--attn-dp-size": "--attention-dp-size",
    "--max-running-requests": "--max-running-reqs",
    "--enable-dp-attention": "--enable-dp-attn",
    "--chunked-prefill-size": "--chunked-prefill-sz",
    "--lora-target-modules": "--lora-target-mods",
}


def abbreviation(rng: random.Random, base: str, words: Words) -> Mutant | None:
    present = [f for f in ABBREVIATED if f in words]
    if not present:
        return None
    flag = rng.choice(present)
    i = words.index(flag)
    new = list(words)
    new[i] = ABBREVIATED[flag]
    value = words[i + 1] if _has_value(words, i) else None
    return Mutant(
        "abbreviation", base, new, "argparse_unrecognized", [new[i]], values={flag: value}
    )


# a backend or dtype under its library's name, the SGLang choice it is
LIBRARY_NAMES = (
    ("--attention-backend", "TorchNativeAttention", "torch_native"),
    ("--attention-backend", "torch-flex", "flex_attention"),
    ("--attention-backend", "TritonAttn", "triton"),
    ("--attention-backend", "IntelAMX", "intel_amx"),
    ("--sampling-backend", "torch", "pytorch"),
    ("--kv-cache-dtype", "float8_e4m3fn", "fp8_e4m3"),
    ("--kv-cache-dtype", "float8_e5m2", "fp8_e5m2"),
    ("--grammar-backend", "guidance", "llguidance"),
)


def choice_library(rng: random.Random, base: str, words: Words) -> Mutant | None:
    flag, typed, choice = rng.choice(LIBRARY_NAMES)
    if flag in words:
        new = list(words)
        new[new.index(flag) + 1] = typed
    else:
        new = [*words, flag, typed]
    return Mutant("choice_library", base, new, "argparse_invalid", [flag], values={flag: choice})


def forbidden_character(rng: random.Random, base: str, words: Words) -> Mutant | None:
    """A value with a character SGLang's check refuses (`:` in the served model name)."""
    name = rng.choice(["llama:8b", "team:llama-3", "org:model:v2"])
    new = [*words, "--served-model-name", name]
    return Mutant(
        "forbidden_char",
        base,
        new,
        "config_validation",
        ["--served-model-name"],
        values={"--served-model-name": None},
    )


def underscores(rng: random.Random, base: str, words: Words) -> Mutant | None:
    candidates = [w for w in _flags(words) if "-" in w[2:] and w != "--model-path"]
    if not candidates:
        return None
    flag = rng.choice(candidates)
    typed = "--" + flag[2:].replace("-", "_")
    new = [typed if w == flag else w for w in words]
    i = words.index(flag)
    value = words[i + 1] if _has_value(words, i) else None
    return Mutant("underscore", base, new, "argparse_unrecognized", [typed], values={flag: value})


CHOICE_FLAGS = {"--kv-cache-dtype": "fp8_e4m3", "--dtype": "bfloat16", "--quantization": "fp8"}


def choice_case(rng: random.Random, base: str, words: Words) -> Mutant | None:
    present = [f for f in CHOICE_FLAGS if f in words]
    if present:
        flag = rng.choice(present)
        i = words.index(flag)
        value = words[i + 1]
        new = list(words)
    else:
        flag, value = "--dtype", "bfloat16"
        new = [*words, flag, value]
        i = len(new) - 2
    variants = [value.upper(), value.title(), value.replace("_", "-").upper()]
    new[i + 1] = rng.choice([v for v in variants if v != value])
    return Mutant("choice_case", base, new, "argparse_invalid", [flag], values={flag: value})


def missing_companion(rng: random.Random, base: str, words: Words) -> Mutant | None:
    """A speculative chain or a LoRA setup with one of the flags it needs left out."""
    eagle_family = any(a in words for a in ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE"))
    options = [
        f
        for f in ("--speculative-num-steps", "--speculative-eagle-topk")
        if eagle_family and f in words
    ]
    options += ["--lora-paths"] if "--lora-paths" in words else []
    if not options:
        return None
    flag = rng.choice(options)
    i = words.index(flag)
    new = words[:i] + words[i + 2 :]
    if flag == "--lora-paths":
        i = new.index("--max-lora-rank")
        new = new[:i] + new[i + 2 :]
        flags = ["--max-lora-rank", "--lora-paths"]
        return Mutant("missing_companion", base, new, "config_validation", flags)
    return Mutant("missing_companion", base, new, "spec_assertion", ["--speculative-num-steps"])


def typo(rng: random.Random, base: str, words: Words) -> Mutant | None:
    candidates = [w for w in _flags(words) if len(w) > 12 and w != "--model-path"]
    if not candidates:
        return None
    flag = rng.choice(candidates)
    name = flag[2:]
    cut = rng.randrange(2, len(name) - 3)
    if name[cut] == "-":
        cut += 1
    typed = "--" + name[:cut] + name[cut + 1 :]
    new = [typed if w == flag else w for w in words]
    i = words.index(flag)
    value = words[i + 1] if _has_value(words, i) else None
    return Mutant("typo", base, new, "argparse_unrecognized", [typed], values={flag: value})


def divisibility(rng: random.Random, base: str, words: Words) -> Mutant | None:
    new = list(words)
    if "--attn-dp-size" in words:
        new[new.index("--attn-dp-size") + 1] = "3"
        flags = ["--tp-size", "--attn-dp-size"]
    elif "--nnodes" in words:
        new[new.index("--tp-size") + 1] = "3"
        flags = ["--tp-size", "--nnodes"]
    elif "--page-size" in words:
        new[new.index("--chunked-prefill-size") + 1] = rng.choice(["1000", "2050", "3000"])
        flags = ["--chunked-prefill-size", "--page-size"]
    else:
        return None
    return Mutant("divisibility", base, new, "config_validation", flags)


SI_FLAGS = ("--context-length", "--chunked-prefill-size", "--max-running-requests")


def si_suffix(rng: random.Random, base: str, words: Words) -> Mutant | None:
    present = [f for f in SI_FLAGS if f in words]
    new = list(words)
    if present:
        flag = rng.choice(present)
        i = new.index(flag)
        number = int(new[i + 1])
        new[i + 1] = f"{number // 1024}K" if number % 1024 == 0 else f"{number / 1000:g}k"
        meant: str | None = str(number)
    else:
        flag = "--context-length"
        new += [flag, rng.choice(["4k", "8K", "2k"])]
        meant = None
    return Mutant("si_suffix", base, new, "argparse_invalid", [flag], values={flag: meant})


SWITCHES = ("--trust-remote-code", "--enable-dp-attention", "--enable-lora")


def switch_value(rng: random.Random, base: str, words: Words) -> Mutant | None:
    """`--switch true` (a stray word for argparse) or `--switch=True` (an explicit value)."""
    present = [f for f in SWITCHES if f in words]
    if not present:
        return None
    flag = rng.choice(present)
    i = words.index(flag)
    if rng.random() < 0.5:
        new = [*words[: i + 1], rng.choice(["true", "True"]), *words[i + 1 :]]
        return Mutant("switch_value", base, new, "argparse_unrecognized", [])
    new = [*words[:i], f"{flag}={rng.choice(['true', 'True', '1'])}", *words[i + 1 :]]
    return Mutant("switch_value", base, new, "argparse_invalid", [flag])


def python_json(rng: random.Random, base: str, words: Words) -> Mutant | None:
    """A Python dict where SGLang wants JSON (single quotes, a trailing comma)."""
    flag = "--json-model-override-args"
    bad = rng.choice(["{'rope_theta': 20000}", '{"rope_theta": 20000,}', "{rope_theta: 20000}"])
    if flag in words:
        new = list(words)
        new[new.index(flag) + 1] = bad
    else:
        new = [*words, flag, bad]
    return Mutant("bad_json", base, new, "config_validation", [flag], values={flag: None})


def missing_value(rng: random.Random, base: str, words: Words) -> Mutant | None:
    candidates = [
        i for i, w in enumerate(words) if w.startswith("--speculative-num") and _has_value(words, i)
    ]
    if not candidates:
        return None
    i = rng.choice(candidates)
    new = words[: i + 1] + words[i + 2 :]
    return Mutant(
        "missing_value", base, new, "argparse_invalid", [words[i]], values={words[i]: None}
    )


def word_number(rng: random.Random, base: str, words: Words) -> Mutant | None:
    if "--tp-size" not in words:
        return None
    new = list(words)
    i = new.index("--tp-size")
    meant = new[i + 1] if new[i + 1] in ("2", "4") else "2"
    new[i + 1] = {"2": "two", "4": "four"}[meant]
    return Mutant(
        "word_number", base, new, "argparse_invalid", ["--tp-size"], values={"--tp-size": meant}
    )


def unsupported_speculative(rng: random.Random, base: str, words: Words) -> Mutant | None:
    """A speculative option this device or setup lacks (block verification is CUDA/ROCm)."""
    algorithm = (
        words[words.index("--speculative-algorithm") + 1]
        if "--speculative-algorithm" in words
        else None
    )
    if algorithm in ("EAGLE", "EAGLE3", "NEXTN"):
        new = [*words, "--speculative-use-block-verification"]
        return Mutant(
            "spec_unsupported",
            base,
            new,
            "spec_assertion",
            ["--speculative-use-block-verification"],
            may_drop=["--speculative-use-block-verification"],
        )
    if algorithm == "STANDALONE":
        new = [*words, "--tp-size", "2", "--attn-dp-size", "2", "--enable-dp-attention"]
        # speculative decoding and attention DP exclude each other here: one wish goes
        return Mutant(
            "spec_unsupported",
            base,
            new,
            "incompatible_flags",
            ["--speculative-algorithm"],
            may_drop=["--attn-dp-size", "--enable-dp-attention"],
        )
    return None


def exclusive(rng: random.Random, base: str, words: Words) -> Mutant | None:
    new = [*words, "--enable-hierarchical-cache", "--disable-radix-cache"]
    flags = ["--enable-hierarchical-cache", "--disable-radix-cache"]
    return Mutant("exclusive", base, new, "incompatible_flags", flags, may_drop=flags)


def algorithm_spelling(rng: random.Random, base: str, words: Words) -> Mutant | None:
    if "EAGLE3" not in words:
        return None
    new = list(words)
    new[new.index("EAGLE3")] = rng.choice(["EAGLE-3", "eagle-3", "Eagle_3"])
    return Mutant(
        "algorithm_spelling",
        base,
        new,
        "spec_assertion",
        ["--speculative-algorithm"],
        values={"--speculative-algorithm": "EAGLE3"},
    )


MUTATIONS: tuple[Mutation, ...] = (
    vllm_name,
    vllm_speculative_tokens,
    old_release_name,
    underscores,
    choice_case,
    missing_companion,
    typo,
    divisibility,
    si_suffix,
    switch_value,
    python_json,
    missing_value,
    word_number,
    unsupported_speculative,
    exclusive,
    algorithm_spelling,
    release_rename,
    abbreviation,
    choice_library,
    forbidden_character,
)


def mutants(count: int, seed: int, models: Path) -> list[Mutant]:
    """`count` distinct mutants, the kinds in turn (a kind with no new mutant left for any
    base drops out), bases drawn by the seeded generator."""
    rng = random.Random(seed)
    bases = {name: shlex.split(args.format(models=models)) for name, args in BASES.items()}
    found: list[Mutant] = []
    seen: set[str] = set()
    active = list(MUTATIONS)
    while len(found) < count and active:
        for mutation in list(active):
            for _ in range(TRIES):
                base = rng.choice(sorted(bases))
                words = [*bases[base], "--device", "cpu"]
                mutant = mutation(rng, base, words)
                if mutant is not None and mutant.command not in seen:
                    mutant.intended = words
                    seen.add(mutant.command)
                    found.append(mutant)
                    break
            else:
                active.remove(mutation)
            if len(found) == count:
                break
    return found


# ---- running ----------------------------------------------------------------------------


def _scratch_models(folder: Path) -> Path:
    (folder / "deepseek-v3").mkdir(parents=True, exist_ok=True)
    (folder / "deepseek-v3" / "config.json").write_text(json.dumps(DEEPSEEK_CONFIG))
    (folder / "lora-adapter").mkdir(exist_ok=True)
    (folder / "lora-adapter" / "adapter_config.json").write_text(json.dumps(LORA_CONFIG))
    return folder


def _sglang(commands: list[str], python: str, scratch: Path, jobs: int) -> list:
    argvs = [sglang_argv(c, scratch) for c in commands]
    version, runs = run_batch(argvs, python, timeout=120, jobs=jobs)
    if version is None:
        raise SystemExit(f"sglang could not be run with {python}")
    return runs


def run(count: int, seed: int, jobs: int, python: str, verbose: bool) -> list[Outcome]:
    with tempfile.TemporaryDirectory(prefix="fix-fuzz-") as tmp:
        scratch = Path(tmp)
        models = _scratch_models(scratch / "models")
        bases = [f"{LAUNCH} {args.format(models=models)} --device cpu" for args in BASES.values()]
        for name, result in zip(BASES, _sglang(bases, python, scratch, jobs), strict=True):
            if result is None or result.code != 0:
                raise SystemExit(f"base command {name} does not pass sglang: {result}")
        found = mutants(count, seed, models)
        outcomes = [Outcome(m) for m in found]
        runs = _sglang([m.command for m in found], python, scratch, jobs)
        corrected: list[Outcome] = []
        for index, (outcome, result) in enumerate(zip(outcomes, runs, strict=True)):
            if result is None or result.code == 0:
                continue
            outcome.rejected = True
            log = scratch / f"mutant-{index}.log"
            log.write_text(result.output)
            report = analyze([str(log)], Options(command=outcome.mutant.command))
            if not report.incidents:
                continue
            root = report.incidents[0]
            outcome.rule_class = root.rule_class
            outcome.flags = list(root.offending_flags)
            outcome.corrected = root.corrected_command
            outcome.message = (
                result.output.strip().splitlines()[-1] if result.output.strip() else ""
            )
            if root.corrected_command:
                corrected.append(outcome)
        checks = _sglang([o.corrected for o in corrected if o.corrected], python, scratch, jobs)
        catalog = load_catalog()
        for outcome, result in zip(corrected, checks, strict=True):
            outcome.fixed = result is not None and result.code == 0
            outcome.lost = intent_lost(outcome.mutant, outcome.corrected or "", catalog)
            outcome.intent_kept = outcome.fixed and not outcome.lost
            if not outcome.fixed and result is not None:
                outcome.message += " || then: " + (result.output.strip().splitlines() or [""])[-1]
    if verbose:
        for outcome in outcomes:
            if outcome.rejected and not (
                outcome.intent_kept and _class_ok(outcome) and _flags_ok(outcome)
            ):
                print(f"- {outcome.mutant.kind} [{outcome.mutant.base}] {outcome.mutant.command}")
                print(f"    class {outcome.rule_class} flags {outcome.flags}")
                print(f"    sglang: {outcome.message[:300]}")
                print(f"    corrected: {outcome.corrected}")
                if outcome.lost:
                    print(f"    intent lost: {', '.join(outcome.lost)}")
    return outcomes


def intent_lost(mutant: Mutant, corrected: str, catalog: FlagCatalog) -> list[str]:
    """What the corrected command no longer says of what the user asked for: a flag typed
    (kept from the base command, or the one the mutation broke) with no counterpart, or the
    value the mutation broke not restored."""
    typed = parse_launch_command(mutant.command, catalog.takes_value)
    base = parse_launch_command(f"{LAUNCH} {shlex.join(mutant.intended)}", catalog.takes_value)
    fixed = parse_launch_command(corrected, catalog.takes_value) if corrected else None
    if typed is None or base is None or fixed is None:
        return ["no command"]
    have = {_name(a.flag, catalog): a.value for a in fixed.arguments}
    meant = {_name(a.flag, catalog) for a in base.arguments}
    kept = [f for a in typed.arguments if (f := _name(a.flag, catalog)) in meant]
    lost = [f for f in dict.fromkeys([*kept, *mutant.values]) if f not in have]
    lost = [f for f in lost if f not in mutant.may_drop]
    for flag, value in mutant.values.items():
        if flag in have and value is not None and not _same(have[flag], value):
            lost.append(f"{flag} {value} (got {have[flag]})")
    return lost


def _name(flag: str, catalog: FlagCatalog) -> str:
    return catalog.canonical(flag) or flag


def _same(got: str | None, wanted: str) -> bool:
    if got is None:
        return False
    try:
        return float(got) == float(wanted)
    except ValueError:
        return got == wanted


def _class_ok(outcome: Outcome) -> bool:
    return outcome.rule_class == outcome.mutant.expect_class


def _flags_ok(outcome: Outcome) -> bool:
    return set(outcome.mutant.expect_flags) <= set(outcome.flags)


def _share(part: int, whole: int) -> str:
    return f"{part}/{whole} ({100 * part / whole:.0f}%)" if whole else "-"


def table(outcomes: list[Outcome]) -> tuple[str, float, float, float, float]:
    """The per-kind table and the overall class, flags, accepted and accepted-with-intent
    shares (the last two over the failures with a one- or two-edit fix)."""
    rows = [
        "| mutation | mutants | rejected | class | flags | command offered | accepted | "
        "accepted and intent kept | intent lost |"
    ]
    rows.append("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    kinds = sorted({o.mutant.kind for o in outcomes})
    totals = [0] * 9
    for kind in [*kinds, "all"]:
        group = [o for o in outcomes if kind in ("all", o.mutant.kind)]
        rejected = [o for o in group if o.rejected]
        small = [o for o in rejected if o.mutant.small_fix]
        counts = (
            len(group),
            len(rejected),
            sum(_class_ok(o) for o in rejected),
            sum(_flags_ok(o) for o in rejected),
            sum(o.corrected is not None for o in rejected),
            sum(o.fixed for o in small),
            len(small),
            sum(o.intent_kept for o in small),
            sum(o.fixed and bool(o.lost) for o in small),
        )
        if kind == "all":
            totals = list(counts)
        rows.append(
            f"| {kind} | {counts[0]} | {counts[1]} | {_share(counts[2], counts[1])} | "
            f"{_share(counts[3], counts[1])} | {_share(counts[4], counts[1])} | "
            f"{_share(counts[5], counts[6])} | {_share(counts[7], counts[6])} | "
            f"{_share(counts[8], counts[6])} |"
        )
    class_share = totals[2] / totals[1] if totals[1] else 0.0
    flag_share = totals[3] / totals[1] if totals[1] else 0.0
    fix_share = totals[5] / totals[6] if totals[6] else 0.0
    kept_share = totals[7] / totals[6] if totals[6] else 0.0
    return "\n".join(rows), class_share, flag_share, fix_share, kept_share


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sample", type=int, default=320, help="how many mutants")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=2, help="SGLang checks at a time")
    parser.add_argument(
        "--floor", type=float, default=None, help="least share accepted with intent kept (0..1)"
    )
    parser.add_argument("--python", default=None, help="SGLang's python (default: as verify)")
    parser.add_argument("-v", "--verbose", action="store_true", help="list every miss")
    args = parser.parse_args(argv)
    python = args.python or sglang_python()
    if python is None:
        print("fix_fuzz: no SGLang (install loganalyze[sglang] or set LOGANALYZE_SGLANG_PYTHON)")
        return 2
    started = time.monotonic()
    outcomes = run(args.sample, args.seed, args.jobs, python, args.verbose)
    text, class_share, flag_share, fix_share, kept_share = table(outcomes)
    print(text)
    print(
        f"\nclass {class_share:.1%}, flags {flag_share:.1%}, accepted {fix_share:.1%}, "
        f"accepted and intent kept {kept_share:.1%} "
        f"({len(outcomes)} mutants over {len(BASES)} bases, seed {args.seed}, "
        f"{time.monotonic() - started:.0f} s)"
    )
    if args.floor is not None and kept_share < args.floor:
        print(f"accepted and intent kept {kept_share:.1%} is below the floor {args.floor:.0%}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
