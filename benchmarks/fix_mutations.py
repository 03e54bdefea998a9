"""The mutations benchmarks/fix_fuzz.py makes: each breaks a valid launch command the way users
do and records what it broke (the value a flag must come back with, a conflicting second wish
the fix may drop), so the harness can tell a fix that keeps the user's intent from one that
SGLang merely accepts.
"""

from __future__ import annotations

import random
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field

LAUNCH = "python -m sglang.launch_server"


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
