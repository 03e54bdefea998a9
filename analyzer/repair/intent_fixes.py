"""Fixes for silent misconfigurations: commands that say what SGLang really runs.

The rules for SGLang's adjustment, deprecation and "has no effect" warnings name these with
`fix = "..."`; the launch-command checks (analyzer/rulebook/command_checks.py) carry their edits in
the Finding and use `apply_check_edits`. Same contract as analyzer/repair/fixes.py: each function
gets the Finding and a FixContext and only proposes; analyzer/repair/correct.py applies and validates.
"""

from __future__ import annotations

from collections.abc import Callable

from analyzer.core.lazy_pattern import LazyPattern
from analyzer.core.model import Edit, Finding
from analyzer.repair.fixes import FixContext, FixPlan

BRACES = LazyPattern(r"^(?P<pre>[^{]*)\{(?P<alts>[^}]+)\}(?P<post>[^=\s]*)(?:=(?P<value>\S+))?$")
PLACEHOLDER = LazyPattern(r"^(?P<flag>--[\w-]+)\s+<[\w-]+>$")
DRAFT_TOKENS = "--speculative-num-draft-tokens"


def typed_value(ctx: FixContext, flag: str) -> str | None:
    """The value as typed in the command (`"true"` for a bare switch); None when absent.

    Unlike FixContext.value this never falls back to server_args: the record holds what
    SGLang resolved, which is exactly what these fixes compare the command against.
    """
    for argument in reversed(ctx.command.arguments):
        if ctx.catalog.canonical(argument.flag) == flag:
            return argument.value if argument.value is not None else "true"
    return None


def resolved_value(ctx: FixContext, flag: str) -> str | None:
    """What the server_args record says SGLang ran with."""
    spec = ctx.catalog.spec(flag)
    if spec is None or not ctx.server_args or ctx.server_args.get(spec.dest) is None:
        return None
    return str(ctx.server_args[spec.dest])


def pin_adjusted_value(finding: Finding, ctx: FixContext) -> FixPlan:
    """Write the value SGLang switched to into the command."""
    if not finding.flags:
        return FixPlan()
    flag = finding.flags[0]
    value = finding.match.groups.get("new") or _adjusted_value(flag, ctx)
    if value is None:
        return FixPlan([], [f"the log does not say which value SGLang used for {flag}"])
    typed = typed_value(ctx, flag)
    if typed == value:
        return FixPlan()
    said = f" (the command says {typed})" if typed is not None else " (the command leaves it out)"
    plan = FixPlan([Edit("set", flag, value=value)], [f"SGLang set {flag} to {value}{said}"])
    if flag == DRAFT_TOKENS and typed is not None and _int(typed, 0) > _int(value, 0):
        plan.notes.append(
            f"to really verify {typed} tokens per step, draft a tree instead of a chain: "
            "--speculative-eagle-topk above 1 (SGLang keeps the draft-token count only then)"
        )
    return plan


def _adjusted_value(flag: str, ctx: FixContext) -> str | None:
    """The value SGLang used when its message does not print it: the record, else the rule."""
    recorded = resolved_value(ctx, flag)
    if recorded is not None:
        return recorded
    if flag == DRAFT_TOKENS:
        steps = ctx.value("--speculative-num-steps")
        if steps is not None and steps.isdigit():
            return str(int(steps) + 1)
    return None


def replace_deprecated(finding: Finding, ctx: FixContext) -> FixPlan:
    """Swap a deprecated flag or value for the replacement the warning names."""
    groups = finding.match.groups
    if not finding.flags:
        return FixPlan()
    flag = finding.flags[0]
    new, new_value = groups.get("new"), groups.get("new_value")
    if typed_value(ctx, flag) is None:
        return FixPlan([], [f"{flag} is not in the command; it came from a config file or wrapper"])
    if flag == "--enable-dp-attention":
        return attention_dp_plan(ctx)
    if new and new_value and flag == "--dp-size":
        note = f"--dp-size {groups.get('old', new_value)} is read as attention DP here"
        return FixPlan([Edit("rename", flag, to=new)], [note])
    if new_value and not new:
        return FixPlan([Edit("set", flag, value=new_value)])
    if not new:
        return FixPlan([Edit("remove", flag)], [f"{flag} does nothing any more"])
    return _replacement_edits(flag, new, ctx)


def _replacement_edits(flag: str, new: str, ctx: FixContext) -> FixPlan:
    """`--a` -> `--b`, `--b=v`, `--b-{x,y}=v` (one flag each) or `--b <placeholder>`."""
    wanted = _expand(new)
    if wanted is None:
        return FixPlan([], [f"replace {flag} with {new} by hand"])
    old_spec = ctx.catalog.spec(flag)
    if len(wanted) == 1 and wanted[0][1] is None and old_spec and not old_spec.takes_value:
        target = ctx.catalog.spec(wanted[0][0])
        if target is not None and not target.takes_value:
            return FixPlan([Edit("rename", flag, to=target.long)])
    edits = [Edit("remove", flag)]
    for target, value in wanted:
        if value is None and (ctx.catalog.takes_value(target) or False):
            return FixPlan([], [f"{new} needs a value SGLang cannot imply: add it by hand"])
        op = "set" if typed_value(ctx, target) is not None else "add"
        edits.append(Edit(op, target, value=value))
    return FixPlan(edits)


def _expand(new: str) -> list[tuple[str, str | None]] | None:
    """The flags (and values) a warning's replacement text stands for."""
    new = new.strip()
    if PLACEHOLDER.match(new):
        return None
    braces = BRACES.match(new)
    if braces:
        flags = [
            f"{braces['pre']}{alt.strip()}{braces['post']}" for alt in braces["alts"].split(",")
        ]
        return [(f, braces["value"]) for f in flags]
    flag, _, value = new.partition("=")
    return [(flag, value or None)]


def attention_dp_plan(ctx: FixContext) -> FixPlan:
    """`--enable-dp-attention` in 0.5.23 terms: `--attn-dp-size N`.

    It only moves `--dp-size N` to `--attn-dp-size N`; without --dp-size it does nothing.
    With TP > 1 the usual layout (one attention-DP group per TP rank, as in SGLang's DeepSeek
    recipes) is proposed; with TP 1 attention DP is impossible, so the flag is dropped.
    """
    dp = _int(typed_value(ctx, "--dp-size"), 1)
    off = "without --dp-size, --enable-dp-attention does nothing: attention DP stays off"
    if dp > 1:
        edits = [
            Edit("remove", "--enable-dp-attention"),
            Edit("rename", "--dp-size", to="--attn-dp-size"),
        ]
        return FixPlan(edits, [f"--dp-size {dp} --enable-dp-attention means --attn-dp-size {dp}"])
    tp = _int(typed_value(ctx, "--tp-size") or resolved_value(ctx, "--tp-size"), 1)
    if tp > 1:
        edits = [
            Edit("remove", "--enable-dp-attention"),
            Edit("add", "--attn-dp-size", value=str(tp)),
        ]
        note = (
            f"{off}; assumed one attention-DP group per TP rank (--attn-dp-size {tp}), "
            f"any divisor of --tp-size {tp} works"
        )
        return FixPlan(edits, [note])
    note = f"{off}; it needs --tp-size above 1, so dropping the flag keeps what ran"
    return FixPlan([Edit("remove", "--enable-dp-attention")], [note])


def per_rank_chunked_prefill(finding: Finding, ctx: FixContext) -> FixPlan:
    """Say the chunk size explicitly; a typed one is scaled so each rank gets what was typed.

    SGLang divides whatever --chunked-prefill-size says by the attention-DP size, so no value
    pins the per-rank size directly: per-rank size x attention-DP size is what to write.
    """
    groups = finding.match.groups
    old, new = _int(groups.get("old"), 0), _int(groups.get("new"), 0)
    if old <= 0 or new <= 0:
        return FixPlan([], ["chunked prefill is off (size <= 0): nothing to divide"])
    ratio = max(old // new, 1)
    typed = typed_value(ctx, "--chunked-prefill-size")
    if typed is None:
        note = (
            f"SGLang chose {old} and each of the {ratio} attention-DP ranks gets {new}; the "
            f"corrected command writes {old} out (write {old * ratio} for {old} per rank)"
        )
        return FixPlan([Edit("add", "--chunked-prefill-size", value=str(old))], [note])
    value = str(_int(typed, old) * ratio)
    note = f"each of the {ratio} attention-DP ranks then prefills {typed}-token chunks"
    return FixPlan([Edit("set", "--chunked-prefill-size", value=value)], [note])


def drop_no_effect_flag(finding: Finding, ctx: FixContext) -> FixPlan:
    """Remove a flag SGLang ignores in this configuration."""
    edits = [Edit("remove", f) for f in finding.flags if typed_value(ctx, f) is not None]
    if not edits:
        return FixPlan(
            [], ["the flag is not in the command; it came from a config file or wrapper"]
        )
    return FixPlan(edits)


def apply_check_edits(finding: Finding, ctx: FixContext) -> FixPlan:
    """A launch-command check already knows its edits; they travel in the Finding."""
    return FixPlan(list(finding.edits))


def _int(value: str | None, default: int) -> int:
    try:
        return int(value) if value is not None else default
    except ValueError:
        return default


INTENT_FIXES: dict[str, Callable[[Finding, FixContext], FixPlan]] = {
    "pin_adjusted_value": pin_adjusted_value,
    "replace_deprecated": replace_deprecated,
    "per_rank_chunked_prefill": per_rank_chunked_prefill,
    "drop_no_effect_flag": drop_no_effect_flag,
    "apply_check_edits": apply_check_edits,
}
# Registered here rather than in fixes.py: fixes.py imports this module at its end, and
# whichever of the two is imported first, this line runs once both are complete.
