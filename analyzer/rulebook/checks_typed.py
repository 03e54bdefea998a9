"""Launch-command checks of flags as typed: prefixes argparse expands, `--dp`, SI suffixes,
dp attention without its size, a percentage mem fraction, a lowercase algorithm."""

from __future__ import annotations

import regex

from analyzer.core.model import Edit, Finding
from analyzer.repair.fixes import late_choices
from analyzer.repair.intent_fixes import attention_dp_plan, resolved_value
from analyzer.rulebook.check_rules import (
    CheckInputs,
    finding,
    float_or_none,
    int_or_zero,
    log_says,
)

SI_SUFFIX = regex.compile(r"^(?P<number>\d+)(?P<suffix>[kMG])$")
BINARY = {"k": 2**10, "M": 2**20, "G": 2**30}
DECIMAL = {"k": 10**3, "M": 10**6, "G": 10**9}


def check_prefixes(inputs: CheckInputs) -> list[Finding]:
    """Flags argparse expanded from a prefix (`--dp` has its own check)."""
    expanded: list[tuple[str, str]] = []
    for argument in inputs.command.arguments:
        resolution = inputs.catalog.resolve(argument.flag)
        if resolution.kind != "prefix" or resolution.spec is None:
            continue
        if resolution.spec.dest == "dp_size" and int_or_zero(argument.value) > 1:
            continue
        pair = (argument.flag, resolution.spec.long)
        if pair not in expanded:
            expanded.append(pair)
    if not expanded:
        return []
    said = ", ".join(f"{typed} to {long}" for typed, long in expanded)
    explanation = (
        f"argparse silently expanded {said} (allow_abbrev). The run is what was meant, but "
        "the command only works while no other flag shares the prefix: 0.5.23 added "
        "--cuda-graph-max-bs-prefill and made the old --cuda-graph-max-bs an `ambiguous "
        "option` error. The log never shows the spelling that was typed."
    )
    edits = [Edit("rename", typed, to=long) for typed, long in expanded]
    title = f"A shortened flag was silently expanded: {expanded[0][0]} -> {expanded[0][1]}"
    return [
        finding(
            inputs,
            "flag-prefix-expanded",
            [long for _, long in expanded],
            explanation,
            ["Spell flags out in scripts; the corrected command does."],
            edits,
            title=title,
            typed=expanded[0][0],
        )
    ]


def check_dp_prefix(inputs: CheckInputs) -> list[Finding]:
    """`--dp N`: N whole-model replicas in 0.5.23, easily taken for attention DP."""
    arguments = [
        a
        for a in inputs.arguments_for("--dp-size")
        if a.flag != "--dp-size" and int_or_zero(a.value) > 1
    ]
    if not arguments or inputs.typed("--attn-dp-size") or inputs.typed("--enable-dp-attention"):
        return []
    typed, count = arguments[-1].flag, int_or_zero(arguments[-1].value)
    tp = int_or_zero(inputs.value("--tp-size")) or 1
    explanation = (
        f"argparse expanded {typed} to --dp-size: {count} data-parallel replicas of the whole "
        f"model, each on --tp-size {tp} GPUs ({count * tp} GPUs in all), behind one router. "
        "In 0.5.23 attention data parallelism (DeepSeek-style DP attention) is --attn-dp-size; "
        "--dp-size no longer means it."
    )
    advice = [
        f"For attention DP write --attn-dp-size {count} instead of {typed} {count} "
        f"(it must divide --tp-size {tp}).",
    ]
    return [
        finding(
            inputs,
            "dp-means-replicas",
            ["--dp-size"],
            explanation,
            advice,
            [Edit("rename", typed, to="--dp-size")],
            title=f"{typed} {count} runs {count} data-parallel replicas, not attention DP",
            typed=typed,
        )
    ]


def check_size_suffixes(inputs: CheckInputs) -> list[Finding]:
    """`--context-length 128k` is 128000 tokens; the 131072 usually meant is 128Ki."""
    found: list[tuple[str, str, str, int, int]] = []
    for spec in inputs.catalog.specs:
        arguments = inputs.arguments_for(spec.long) if spec.type == "human_readable_int" else []
        value = arguments[-1].value if arguments else None
        suffixed = SI_SUFFIX.match(value or "")
        if suffixed:
            number, suffix = int(suffixed["number"]), suffixed["suffix"]
            decimal, binary = number * DECIMAL[suffix], number * BINARY[suffix]
            found.append((arguments[-1].flag, spec.long, value, decimal, binary))
    if not found:
        return []
    said = "; ".join(
        f"{long} {value} is {decimal}, not {binary} ({value}i)"
        for _, long, value, decimal, binary in found
    )
    explanation = (
        f'SGLang reads size suffixes as powers of ten: {said}. Model cards\' "128k" context '
        "usually means 131072."
    )
    advice = [
        f"If {decimal} was meant, write {decimal}; either way write the number in full."
        for _, _, _, decimal, _ in found
    ]
    typed, long, value, decimal, binary = found[0]
    return [
        finding(
            inputs,
            "si-suffix-value",
            [item[1] for item in found],
            explanation,
            advice,
            [Edit("set", item[1], value=str(item[4])) for item in found],
            title=f"{long} {value} means {decimal}, not {binary}",
            typed=typed,
        )
    ]


def check_dp_attention(inputs: CheckInputs) -> list[Finding]:
    """`--enable-dp-attention` alone: the deprecated flag only renames --dp-size."""
    if inputs.typed("--enable-dp-attention") is None or int_or_zero(inputs.typed("--dp-size")) > 1:
        return []
    if (
        inputs.typed("--attn-dp-size")
        or int_or_zero(resolved_value(inputs.fix_context, "--attn-dp-size")) > 1
    ):
        return []
    if log_says(inputs.log, "'--enable-dp-attention' is deprecated"):
        return []  # the deprecated-flag rule reports it with the same corrected command
    plan = attention_dp_plan(inputs.fix_context)
    explanation = (
        "In 0.5.23 --enable-dp-attention is deprecated and only turns --dp-size N into "
        "--attn-dp-size N. Without --dp-size there is nothing to turn: attention DP stays off "
        "and every rank holds the full KV cache."
    )
    evidence = (inputs.log.server_args_line,) if inputs.log and inputs.log.server_args_line else ()
    return [
        finding(
            inputs,
            "dp-attention-off",
            ["--enable-dp-attention", "--attn-dp-size"],
            explanation,
            plan.notes,
            plan.edits,
            evidence=evidence,
            typed="--enable-dp-attention",
        )
    ]


def check_mem_fraction(inputs: CheckInputs) -> list[Finding]:
    """`--mem-fraction-static 85`: a percentage where a fraction belongs."""
    value = inputs.value("--mem-fraction-static")
    fraction = float_or_none(value)
    if fraction is None or fraction <= 1:
        return []
    edits, advice = [], ["The flag is the fraction of GPU memory for weights and KV cache (<= 1)."]
    if fraction <= 100:
        edits = [Edit("set", "--mem-fraction-static", value=f"{fraction / 100:g}")]
        advice.insert(0, f"{value} reads as a percentage: {fraction / 100:g}.")
    explanation = (
        f"--mem-fraction-static {value} is a fraction of GPU memory above 1. argparse takes any "
        "float and SGLang 0.5.23 does not check the range, so the server sizes its static memory "
        "pool from more memory than the GPU has and fails (or starves activations) at startup."
    )
    arguments = inputs.arguments_for("--mem-fraction-static")
    decisive = None
    if not arguments and inputs.log and inputs.log.server_args_line:
        decisive = inputs.log.server_args_line
    return [
        finding(
            inputs,
            "mem-fraction-above-one",
            ["--mem-fraction-static"],
            explanation,
            advice,
            edits,
            title=f"--mem-fraction-static {value} is above 1",
            decisive=decisive,
            typed=arguments[-1].flag if arguments else None,
        )
    ]


def check_algorithm_case(inputs: CheckInputs) -> list[Finding]:
    """`--speculative-algorithm eagle3`: accepted, upper-cased, logged as EAGLE3."""
    typed = inputs.typed("--speculative-algorithm")
    if not typed or typed == typed.upper():
        return []
    canonical = typed.upper()
    if canonical not in late_choices("--speculative-algorithm"):
        return []
    explanation = (
        f"SGLang upper-cases the algorithm during resolution: {typed} runs as {canonical}, and "
        f"the log and server_args say {canonical}. Nothing breaks today; the command and what "
        "ran just differ, which trips scripts that compare them, and plugins register names "
        "case-sensitively."
    )
    return [
        finding(
            inputs,
            "algorithm-respelled",
            ["--speculative-algorithm"],
            explanation,
            [f"Write --speculative-algorithm {canonical}."],
            [Edit("set", "--speculative-algorithm", value=canonical)],
            title=f"--speculative-algorithm {typed} ran as {canonical}",
            typed=inputs.arguments_for("--speculative-algorithm")[-1].flag,
        )
    ]
