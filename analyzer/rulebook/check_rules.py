"""The launch-command checks' rule table and what every check reads and returns.

The checks themselves are in checks_typed.py (flags as typed) and checks_speculative.py;
command_checks.py runs them all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import regex

from analyzer.core.lazy_pattern import LazyPattern
from analyzer.core.model import Edit, Finding, Line, Match, ScannedLog
from analyzer.repair.fixes import FixContext
from analyzer.repair.intent_fixes import resolved_value, typed_value
from analyzer.rulebook.vocabulary import Rule, RuleDoc
from analyzer.sglang.catalog import FlagCatalog
from analyzer.sglang.launch_command import Argument, LaunchCommand, find_launch_command
from analyzer.sglang.log_format import reconstruct_command

# Below every shipped rule (the lowest, empty-log, is 5): warnings follow the fatal causes.
PRIORITY = 2
FIX = "apply_check_edits"
ACCEPT_LEN = LazyPattern(r"\baccept len: (?P<len>\d+(?:\.\d+)?)")


def _rule(
    rule_id: str,
    rule_class: str,
    title: str,
    detects: str,
    why: str,
    fix: str,
    severity: str = "warning",
) -> Rule:
    return Rule(
        id=rule_id,
        rule_class=rule_class,
        title=title,
        severity=severity,
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
            "draft-accepts-nothing",
            "hidden_dim_mismatch",
            "The draft is fed the wrong hidden states: no draft token is accepted",
            "An EAGLE-3 draft served with --speculative-algorithm EAGLE (or the reverse), from "
            "the draft's config.json, the log or the draft's name, with accept length exactly "
            "1.00 in every one of the last decode lines.",
            "The target hands the draft one layer's hidden states where it was trained on three "
            "(or the reverse); when the sizes match nothing crashes and every draft token is "
            "rejected, so speculation only costs time.",
            "Serve the draft with the algorithm it was trained for.",
            severity="error",
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
class CheckInputs:
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


def launch_line(command: LaunchCommand, log: ScannedLog | None, catalog: FlagCatalog) -> Line:
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


def finding(
    inputs: CheckInputs,
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


def decode_lines(log: ScannedLog | None) -> list[Line]:
    """The `Decode batch ... accept len: X` lines among the log's last lines."""
    if log is None:
        return []
    return [ln for ln in log.tail if "Decode batch" in ln.body and ACCEPT_LEN.search(ln.body)]


def mean_accept(lines: list[Line]) -> float | None:
    values = [float(ACCEPT_LEN.search(ln.body)["len"]) for ln in lines]
    return sum(values) / len(values) if values else None


def log_says(log: ScannedLog | None, text: str) -> bool:
    """Whether a candidate line holds `text` (it must contain some rule's trigger)."""
    return log is not None and any(text in line.body for line in log.candidates)


def int_or_zero(value: str | None) -> int:
    try:
        return int(value) if value is not None else 0
    except ValueError:
        return 0


def float_or_none(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None
