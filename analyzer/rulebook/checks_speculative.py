"""Launch-command checks of speculative settings: draft tokens SGLang cuts, an EAGLE-3 draft
served as EAGLE (accept length stuck near 1.00), speculative settings left to SGLang."""

from __future__ import annotations

from pathlib import Path

from analyzer.core import bounded_json
from analyzer.core.lazy_pattern import LazyPattern
from analyzer.core.model import Edit, Finding, Line
from analyzer.repair.intent_fixes import resolved_value
from analyzer.rulebook.check_rules import (
    ACCEPT_LEN,
    CheckInputs,
    decode_lines,
    finding,
    int_or_zero,
    log_says,
    mean_accept,
)

ARCHITECTURE = LazyPattern(r"\btype=(?P<arch>\w+)")
# At 1.00 no draft token is ever accepted; a working EAGLE draft gives 2-4.
COLLAPSED_ACCEPT_LEN = 1.15
MIN_DECODE_LINES = 3
NOTHING_ACCEPTED_LINES = 5
# a draft folder or hub id named for its kind (`sglang-EAGLE3-LLaMA3.1-Instruct-8B`)
EAGLE3_NAME = LazyPattern(r"(?i)eagle-?3")
MAX_CONFIG_BYTES = 4 * 2**20  # a model's config.json is a few KiB; the path comes from a log
MAX_DECODE_EVIDENCE = 3
AUTO_PARAM_FLAGS = (
    "--speculative-num-steps",
    "--speculative-eagle-topk",
    "--speculative-num-draft-tokens",
)
# Algorithms whose missing steps/topk/draft tokens SGLang fills in itself
# (speculative_hook._handle_eagle_family -> _auto_choose_speculative_params).
AUTO_PARAM_ALGORITHMS = ("EAGLE", "EAGLE3", "STANDALONE", "NEXTN")
ADJUSTED_LINE = "speculative_num_draft_tokens is adjusted"


def check_draft_tokens(inputs: CheckInputs) -> list[Finding]:
    """topk 1 with draft tokens != steps + 1: SGLang cuts them (said here before a launch)."""
    steps = int_or_zero(inputs.typed("--speculative-num-steps"))
    topk = int_or_zero(inputs.typed("--speculative-eagle-topk"))
    tokens = int_or_zero(inputs.typed("--speculative-num-draft-tokens"))
    if not inputs.typed("--speculative-algorithm") or topk != 1 or steps < 1 or tokens < 1:
        return []
    if tokens == steps + 1 or log_says(inputs.log, ADJUSTED_LINE):
        return []
    explanation = (
        f"With --speculative-eagle-topk 1 the draft is a chain of --speculative-num-steps {steps} "
        f"tokens, so SGLang replaces --speculative-num-draft-tokens {tokens} with {steps + 1} "
        "(speculative_hook._handle_eagle_family) and only logs that it did."
    )
    advice = [
        f"Write --speculative-num-draft-tokens {steps + 1} to say what runs; for more tokens per "
        "step, draft a tree: --speculative-eagle-topk above 1.",
    ]
    return [
        finding(
            inputs,
            "spec-draft-tokens-cut",
            ["--speculative-num-draft-tokens", "--speculative-eagle-topk"],
            explanation,
            advice,
            [Edit("set", "--speculative-num-draft-tokens", value=str(steps + 1))],
            title=f"--speculative-num-draft-tokens {tokens} will run as {steps + 1}",
            typed=inputs.arguments_for("--speculative-num-draft-tokens")[-1].flag,
        )
    ]


def check_draft_algorithm(inputs: CheckInputs) -> list[Finding]:
    """An EAGLE-3 draft served as EAGLE (or the reverse), and accept length stuck near 1.

    With no draft token accepted at all (accept length exactly 1.00 in every recent decode
    line) the mismatch is an error, and the draft's name is evidence enough for an EAGLE-3
    head; otherwise it is a warning that needs the draft's config.json or the log."""
    algorithm = (inputs.value("--speculative-algorithm") or "").upper()
    if not algorithm:
        return []
    decode = decode_lines(inputs.log)
    nothing = _nothing_accepted(decode)
    draft, weight_line = _draft_architecture(inputs)
    wanted = _algorithm_for(draft) if draft else None
    path = inputs.value("--speculative-draft-model-path") or "the draft"
    named = wanted is None and nothing and EAGLE3_NAME.search(path.rstrip("/").rsplit("/", 1)[-1])
    if named:
        wanted = "EAGLE3"
    if wanted is None or {wanted, algorithm} != {"EAGLE", "EAGLE3"}:
        return _collapsed(inputs, algorithm, decode)
    mean = mean_accept(decode)
    if wanted == "EAGLE3":
        why = (
            "the target hands the draft one layer's hidden states instead of the three an "
            "EAGLE-3 head is trained on. When the hidden sizes match nothing crashes; the "
            "draft's guesses are simply rejected"
        )
    else:
        why = (
            "the target hands an EAGLE head the three-layer EAGLE-3 features it was not trained on"
        )
    measured = (
        f": accept length {mean:.2f} over the last {len(decode)} decode lines "
        "(1.00 = no draft token accepted)"
        if decode
        else "; expect an accept length near 1.00 in the decode lines"
    )
    family = _family(wanted)
    kind = f"named as an {family} draft" if named else f"{draft}, an {family} draft"
    explanation = f"{path} is {kind}, but --speculative-algorithm is {algorithm}: {why}{measured}."
    edits = [Edit("set", "--speculative-algorithm", value=wanted)]
    evidence = tuple(ln for ln in (weight_line, *decode[-MAX_DECODE_EVIDENCE:]) if ln is not None)
    typed = inputs.arguments_for("--speculative-algorithm")
    return [
        finding(
            inputs,
            "draft-accepts-nothing" if nothing else "draft-algorithm-mismatch",
            ["--speculative-algorithm", "--speculative-draft-model-path"],
            explanation,
            [f"Serve {path if named else draft} with --speculative-algorithm {wanted}."],
            edits,
            title=f"An {_family(wanted)} draft is served with --speculative-algorithm {algorithm}"
            + (": no draft token is accepted" if nothing else ""),
            evidence=evidence,
            decisive=weight_line,
            typed=f"type={draft}" if weight_line else (typed[-1].flag if typed else None),
        )
    ]


def _nothing_accepted(decode: list[Line]) -> bool:
    """Accept length exactly 1.00 in each of enough decode lines: not one draft token
    accepted (metrics_reporter prints it with two decimals; a working draft gives 2-4)."""
    values = [float(ACCEPT_LEN.search(line.body)["len"]) for line in decode]
    return len(values) >= NOTHING_ACCEPTED_LINES and all(v == 1.0 for v in values)


def _collapsed(inputs: CheckInputs, algorithm: str, decode: list[Line]) -> list[Finding]:
    """Accept length stuck near 1.00 with no mismatch to blame: say so, propose nothing."""
    mean = mean_accept(decode)
    if len(decode) < MIN_DECODE_LINES or mean is None or mean > COLLAPSED_ACCEPT_LEN:
        return []
    explanation = (
        f"The last {len(decode)} decode lines show accept length {mean:.2f} with "
        f"--speculative-algorithm {algorithm}: almost every draft token is rejected, so each "
        "step pays for drafting and verification and keeps only the target's own token."
    )
    advice = [
        "Check that the draft was trained for this target (same tokenizer and hidden size) and "
        "for this algorithm (EAGLE vs EAGLE3).",
        "A wrong --speculative-token-map or very high sampling temperature also lowers acceptance.",
    ]
    return [
        finding(
            inputs,
            "spec-acceptance-collapsed",
            ["--speculative-algorithm", "--speculative-draft-model-path"],
            explanation,
            advice,
            [],
            evidence=tuple(decode[:-1][-(MAX_DECODE_EVIDENCE - 1) :]),
            decisive=decode[-1],
        )
    ]


def check_auto_params(inputs: CheckInputs) -> list[Finding]:
    """No steps/topk/draft tokens given: report what SGLang chose, from server_args."""
    algorithm = (inputs.typed("--speculative-algorithm") or "").upper()
    if algorithm not in AUTO_PARAM_ALGORITHMS or inputs.typed("--speculative-adaptive"):
        return []
    if any(inputs.typed(flag) is not None for flag in AUTO_PARAM_FLAGS):
        return []
    chosen = [(flag, resolved_value(inputs.fix_context, flag)) for flag in AUTO_PARAM_FLAGS]
    if any(value is None for _, value in chosen) or inputs.log is None:
        return []
    said = ", ".join(f"{flag} {value}" for flag, value in chosen)
    explanation = (
        f"No speculative step, topk or draft-token count was given, so SGLang chose {said} "
        "(speculative_hook._auto_choose_speculative_params: a fixed table by target "
        "architecture, not tuned for this draft or workload, and free to change between "
        "releases). The server_args record shows the values."
    )
    advice = [
        "Write them into the command, then tune them (SGLang's "
        "scripts/playground/bench_speculative.py).",
    ]
    evidence = (inputs.log.server_args_line,) if inputs.log.server_args_line else ()
    return [
        finding(
            inputs,
            "spec-auto-params",
            list(AUTO_PARAM_FLAGS),
            explanation,
            advice,
            [Edit("add", flag, value=value) for flag, value in chosen],
            title=f"SGLang chose the speculative settings itself: {said}",
            evidence=evidence,
            decisive=inputs.log.server_args_line,
        )
    ]


def _draft_architecture(inputs: CheckInputs) -> tuple[str | None, Line | None]:
    """The draft's architecture: its config.json when readable, else `Load weight end`."""
    path = inputs.value("--speculative-draft-model-path")
    if path:
        architecture = _config_architecture(Path(path) / "config.json")
        if architecture:
            return architecture, None
    for line in inputs.log.weight_loads if inputs.log else ():
        found = ARCHITECTURE.search(line.body)
        if found and "Eagle" in found["arch"]:
            return found["arch"], line
    return None, None


def _config_architecture(path: Path) -> str | None:
    """`architectures[0]` of a model folder's config.json; None when unreadable or odd."""
    try:
        if path.stat().st_size > MAX_CONFIG_BYTES:
            return None
        config = bounded_json.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    architectures = config.get("architectures") if isinstance(config, dict) else None
    if isinstance(architectures, list) and architectures and isinstance(architectures[0], str):
        return architectures[0]
    return None


def _algorithm_for(architecture: str) -> str | None:
    """EAGLE3 for `*Eagle3*` heads, EAGLE for the other `*Eagle*` ones, else unknown."""
    if "Eagle3" in architecture:
        return "EAGLE3"
    if "Eagle" in architecture:
        return "EAGLE"
    return None


def _family(algorithm: str) -> str:
    return "EAGLE-3" if algorithm == "EAGLE3" else "EAGLE"
