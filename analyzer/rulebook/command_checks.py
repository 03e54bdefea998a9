"""Launch-command checks: settings SGLang reinterprets without printing a word.

SGLang 0.5.23 accepts these and runs something other than what the command seems to say:
a shortened flag argparse expanded (`--tp`, `--speculative-num-draft-token`), `--dp 8`
(eight replicas, not attention DP), `--context-length 128k` (128000), `--enable-dp-attention`
without `--dp-size` (attention DP stays off), `--mem-fraction-static 85`, a lowercase
algorithm, an EAGLE-3 draft served as EAGLE (no crash, accept length stuck near 1.00), and
speculative settings left to SGLang's own choice. They are found from the command, the
`server_args` record and the decode lines, so they also work before a launch (log None).

Each finding is a warning with a synthetic Match whose evidence lines are real: the
launch-command line (number 0 when the command did not come from the log), the
`server_args` line, a `Load weight end` line, decode lines. The edits travel in the
Finding; the check rules below name `apply_check_edits`, so the corrected command is
applied and validated on the same path as every rule's.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import regex

from analyzer.core.model import Edit, Finding, Line, Match, ScannedLog
from analyzer.engine.correct import reconstruct_command
from analyzer.rulebook.fixes import FixContext, late_choices
from analyzer.rulebook.intent_fixes import attention_dp_plan, resolved_value, typed_value
from analyzer.rulebook.vocabulary import Rule, RuleDoc
from analyzer.sglang.catalog import FlagCatalog
from analyzer.sglang.launch_command import Argument, LaunchCommand, find_launch_command

# Below every shipped rule (the lowest, empty-log, is 5): warnings follow the fatal causes.
PRIORITY = 2
FIX = "apply_check_edits"
SI_SUFFIX = regex.compile(r"^(?P<number>\d+)(?P<suffix>[kMG])$")
BINARY = {"k": 2**10, "M": 2**20, "G": 2**30}
DECIMAL = {"k": 10**3, "M": 10**6, "G": 10**9}
ACCEPT_LEN = regex.compile(r"\baccept len: (?P<len>\d+(?:\.\d+)?)")
ARCHITECTURE = regex.compile(r"\btype=(?P<arch>\w+)")
# At 1.00 no draft token is ever accepted; a working EAGLE draft gives 2-4.
COLLAPSED_ACCEPT_LEN = 1.15
MIN_DECODE_LINES = 3
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


def _rule(rule_id: str, rule_class: str, title: str, detects: str, why: str, fix: str) -> Rule:
    return Rule(
        id=rule_id,
        rule_class=rule_class,
        title=title,
        severity="warning",
        scope="log",
        doc=RuleDoc(detects, why, fix),
        path="analyzer/rulebook/command_checks.py",
        fix=FIX,
        priority=PRIORITY,
    )


CHECK_RULES: dict[str, Rule] = {
    rule.id: rule
    for rule in (
        _rule(
            "flag-prefix-expanded",
            "flag_prefix_expanded",
            "A shortened flag was silently expanded",
            "Flags typed as unambiguous prefixes (`--tp`, `--speculative-num-draft-token`).",
            "argparse expands them without a word; the next release that adds a flag with the "
            "same prefix turns the command into an `ambiguous option` error.",
            "Spell the flag out.",
        ),
        _rule(
            "dp-means-replicas",
            "dp_replicas",
            "--dp runs data-parallel replicas, not attention DP",
            "`--dp N` (a prefix of --dp-size) with N > 1 and no attention-DP flag.",
            "In 0.5.23 --dp-size counts whole-model replicas; attention DP is --attn-dp-size.",
            "Write --dp-size N for replicas or --attn-dp-size N for attention DP.",
        ),
        _rule(
            "si-suffix-value",
            "si_suffix_value",
            "A size suffix means powers of ten",
            "`--context-length 128k` and the other size flags with k/M/G suffixes.",
            "SGLang reads k as 1000 (128k = 128000); 128Ki is 131072.",
            "Write the number of tokens in full.",
        ),
        _rule(
            "dp-attention-off",
            "dp_attention_off",
            "--enable-dp-attention without --dp-size leaves attention DP off",
            "`--enable-dp-attention` with no --dp-size/--attn-dp-size.",
            "In 0.5.23 the flag only moves --dp-size N to --attn-dp-size N; with no --dp-size it "
            "does nothing.",
            "Use --attn-dp-size N.",
        ),
        _rule(
            "mem-fraction-above-one",
            "mem_fraction_above_one",
            "--mem-fraction-static is above 1",
            "`--mem-fraction-static 85` and other values above 1.",
            "The flag is a fraction of GPU memory; argparse takes any float and SGLang does not "
            "check the range.",
            "Divide a percentage by 100.",
        ),
        _rule(
            "algorithm-respelled",
            "algorithm_respelled",
            "The speculative algorithm name was upper-cased",
            "`--speculative-algorithm eagle3` and other lowercase spellings.",
            "SGLang upper-cases the name during resolution; the log shows another spelling than "
            "the command.",
            "Write the name as SGLang does.",
        ),
        _rule(
            "draft-algorithm-mismatch",
            "draft_algorithm_mismatch",
            "The draft model does not match --speculative-algorithm",
            "An EAGLE-3 draft (architecture *Eagle3) served with --speculative-algorithm EAGLE, "
            "or an EAGLE draft with EAGLE3; from the draft's config.json or the log.",
            "When the hidden sizes match nothing crashes: the draft is fed the wrong hidden "
            "states and its tokens are rejected (accept length near 1.00).",
            "Serve the draft with the algorithm it was trained for.",
        ),
        _rule(
            "spec-acceptance-collapsed",
            "spec_acceptance_collapsed",
            "Speculative decoding accepts almost no draft tokens",
            "Decode lines at the end of the log whose accept length stays near 1.00.",
            "Every step pays for the draft and keeps only the target's own token: slower than no "
            "speculation.",
            "Check the draft against the target and the algorithm.",
        ),
        _rule(
            "spec-auto-params",
            "spec_auto_params",
            "SGLang chose the speculative settings itself",
            "A speculative launch without steps/topk/draft tokens; the values from server_args.",
            "SGLang's built-in choice depends on the target architecture only, not on the draft "
            "or the workload, and may change between releases.",
            "Write the values it chose (or tuned ones) into the command.",
        ),
        _rule(
            "spec-draft-tokens-cut",
            "setting_adjusted",
            "--speculative-num-draft-tokens will be cut to steps + 1",
            "--speculative-eagle-topk 1 with a draft-token count other than steps + 1, when the "
            "log does not show SGLang's own adjustment message.",
            "With topk 1 the draft is a chain; SGLang silently uses steps + 1 draft tokens.",
            "Write steps + 1, or use topk > 1 for a tree.",
        ),
    )
}


@dataclass
class _Inputs:
    """What every check reads."""

    command: LaunchCommand
    catalog: FlagCatalog
    server_args: dict[str, Any] | None
    log: ScannedLog | None
    launch: Line

    @property
    def fix_context(self) -> FixContext:
        return FixContext(self.command, self.catalog, self.server_args)

    def typed(self, flag: str) -> str | None:
        return typed_value(self.fix_context, flag)

    def value(self, flag: str) -> str | None:
        """Typed, else as SGLang resolved it."""
        typed = self.typed(flag)
        return typed if typed is not None else resolved_value(self.fix_context, flag)

    def arguments_for(self, flag: str) -> list[Argument]:
        return [a for a in self.command.arguments if self.catalog.canonical(a.flag) == flag]


def check_command(
    command: LaunchCommand,
    catalog: FlagCatalog,
    server_args: dict[str, Any] | None,
    log: ScannedLog | None,
) -> list[Finding]:
    """Every silent reinterpretation of this launch, as warnings (empty when none)."""
    inputs = _Inputs(command, catalog, server_args, log, _launch_line(command, log, catalog))
    findings: list[Finding] = []
    for check in CHECKS:
        findings.extend(check(inputs))
    return findings


def _launch_line(command: LaunchCommand, log: ScannedLog | None, catalog: FlagCatalog) -> Line:
    """The log line the command was read from (the server_args line for a command rebuilt
    from that record); else the command itself as line 0 (given by the user)."""
    if log is not None:
        for line in log.commands:
            if (find_launch_command(line.body) or line.body) == command.original:
                return line
        record = log.server_args_line
        if record and log.server_args:
            if reconstruct_command(log.server_args, catalog) == command.original:
                return record
    source = log.summary.path if log is not None else "<command>"
    return Line(source, 0, command.original, command.original)


def _finding(
    inputs: _Inputs,
    rule_id: str,
    flags: list[str],
    explanation: str,
    advice: list[str],
    edits: list[Edit],
    title: str | None = None,
    evidence: tuple[Line, ...] = (),
    decisive: Line | None = None,
    typed: str | None = None,
) -> Finding:
    rule = CHECK_RULES[rule_id]
    line = decisive or inputs.launch
    lines = {ln.number: ln for ln in (inputs.launch, *evidence, line)}
    match = Match(
        rule_id=rule_id,
        line=line,
        span=_span(line, typed) if typed else None,
        groups={"flag": flags[0]} if flags else {},
        evidence=tuple(lines[n] for n in sorted(lines)),
    )
    return Finding(
        match=match,
        rule_class=rule.rule_class,
        title=title or rule.title,
        severity=rule.severity,
        flags=flags,
        explanation=explanation,
        advice=advice,
        edits=edits,
        priority=rule.priority,
    )


def _span(line: Line, typed: str) -> tuple[int, int] | None:
    found = regex.search(rf"(?<![\w-]){regex.escape(typed)}(?![\w-])", line.text)
    return found.span() if found else None


# --------------------------------------------------------------------------- flags as typed


def check_prefixes(inputs: _Inputs) -> list[Finding]:
    """Flags argparse expanded from a prefix (`--dp` has its own check)."""
    expanded: list[tuple[str, str]] = []
    for argument in inputs.command.arguments:
        resolution = inputs.catalog.resolve(argument.flag)
        if resolution.kind != "prefix" or resolution.spec is None:
            continue
        if resolution.spec.dest == "dp_size" and _int(argument.value) > 1:
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
        _finding(
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


def check_dp_prefix(inputs: _Inputs) -> list[Finding]:
    """`--dp N`: N whole-model replicas in 0.5.23, easily taken for attention DP."""
    arguments = [
        a for a in inputs.arguments_for("--dp-size") if a.flag != "--dp-size" and _int(a.value) > 1
    ]
    if not arguments or inputs.typed("--attn-dp-size") or inputs.typed("--enable-dp-attention"):
        return []
    typed, count = arguments[-1].flag, _int(arguments[-1].value)
    tp = _int(inputs.value("--tp-size")) or 1
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
        _finding(
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


def check_size_suffixes(inputs: _Inputs) -> list[Finding]:
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
        _finding(
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


def check_dp_attention(inputs: _Inputs) -> list[Finding]:
    """`--enable-dp-attention` alone: the deprecated flag only renames --dp-size."""
    if inputs.typed("--enable-dp-attention") is None or _int(inputs.typed("--dp-size")) > 1:
        return []
    if (
        inputs.typed("--attn-dp-size")
        or _int(resolved_value(inputs.fix_context, "--attn-dp-size")) > 1
    ):
        return []
    if _log_says(inputs.log, "'--enable-dp-attention' is deprecated"):
        return []  # the deprecated-flag rule reports it with the same corrected command
    plan = attention_dp_plan(inputs.fix_context)
    explanation = (
        "In 0.5.23 --enable-dp-attention is deprecated and only turns --dp-size N into "
        "--attn-dp-size N. Without --dp-size there is nothing to turn: attention DP stays off "
        "and every rank holds the full KV cache."
    )
    evidence = (inputs.log.server_args_line,) if inputs.log and inputs.log.server_args_line else ()
    return [
        _finding(
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


def check_mem_fraction(inputs: _Inputs) -> list[Finding]:
    """`--mem-fraction-static 85`: a percentage where a fraction belongs."""
    value = inputs.value("--mem-fraction-static")
    fraction = _float(value)
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
        _finding(
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


def check_algorithm_case(inputs: _Inputs) -> list[Finding]:
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
        _finding(
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


# --------------------------------------------------------------------------- speculative


def check_draft_tokens(inputs: _Inputs) -> list[Finding]:
    """topk 1 with draft tokens != steps + 1: SGLang cuts them (said here before a launch)."""
    steps = _int(inputs.typed("--speculative-num-steps"))
    topk = _int(inputs.typed("--speculative-eagle-topk"))
    tokens = _int(inputs.typed("--speculative-num-draft-tokens"))
    if not inputs.typed("--speculative-algorithm") or topk != 1 or steps < 1 or tokens < 1:
        return []
    if tokens == steps + 1 or _log_says(inputs.log, ADJUSTED_LINE):
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
        _finding(
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


def check_draft_algorithm(inputs: _Inputs) -> list[Finding]:
    """An EAGLE-3 draft served as EAGLE (or the reverse), and accept length stuck near 1."""
    algorithm = (inputs.value("--speculative-algorithm") or "").upper()
    if not algorithm:
        return []
    decode = _decode_lines(inputs.log)
    draft, weight_line = _draft_architecture(inputs)
    wanted = _algorithm_for(draft) if draft else None
    if wanted is None or {wanted, algorithm} != {"EAGLE", "EAGLE3"}:
        return _collapsed(inputs, algorithm, decode)
    path = inputs.value("--speculative-draft-model-path") or "the draft"
    mean = _mean_accept(decode)
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
    explanation = (
        f"{path} is {draft}, an {_family(wanted)} draft, but --speculative-algorithm is "
        f"{algorithm}: {why}{measured}."
    )
    edits = [Edit("set", "--speculative-algorithm", value=wanted)]
    evidence = tuple(ln for ln in (weight_line, *decode[-MAX_DECODE_EVIDENCE:]) if ln is not None)
    typed = inputs.arguments_for("--speculative-algorithm")
    return [
        _finding(
            inputs,
            "draft-algorithm-mismatch",
            ["--speculative-algorithm", "--speculative-draft-model-path"],
            explanation,
            [f"Serve {draft} with --speculative-algorithm {wanted}."],
            edits,
            title=f"An {_family(wanted)} draft is served with --speculative-algorithm {algorithm}",
            evidence=evidence,
            decisive=weight_line,
            typed=f"type={draft}" if weight_line else (typed[-1].flag if typed else None),
        )
    ]


def _collapsed(inputs: _Inputs, algorithm: str, decode: list[Line]) -> list[Finding]:
    """Accept length stuck near 1.00 with no mismatch to blame: say so, propose nothing."""
    mean = _mean_accept(decode)
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
        _finding(
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


def check_auto_params(inputs: _Inputs) -> list[Finding]:
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
        _finding(
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


def _decode_lines(log: ScannedLog | None) -> list[Line]:
    """The `Decode batch ... accept len: X` lines among the log's last lines."""
    if log is None:
        return []
    return [ln for ln in log.tail if "Decode batch" in ln.body and ACCEPT_LEN.search(ln.body)]


def _mean_accept(lines: list[Line]) -> float | None:
    values = [float(ACCEPT_LEN.search(ln.body)["len"]) for ln in lines]
    return sum(values) / len(values) if values else None


def _draft_architecture(inputs: _Inputs) -> tuple[str | None, Line | None]:
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
        config = json.loads(path.read_text("utf-8"))
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


def _log_says(log: ScannedLog | None, text: str) -> bool:
    """Whether a candidate line holds `text` (it must contain some rule's trigger)."""
    return log is not None and any(text in line.body for line in log.candidates)


def _int(value: str | None) -> int:
    try:
        return int(value) if value is not None else 0
    except ValueError:
        return 0


def _float(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


CHECKS: tuple[Callable[[_Inputs], list[Finding]], ...] = (
    check_prefixes,
    check_dp_prefix,
    check_size_suffixes,
    check_dp_attention,
    check_mem_fraction,
    check_algorithm_case,
    check_draft_tokens,
    check_draft_algorithm,
    check_auto_params,
)
