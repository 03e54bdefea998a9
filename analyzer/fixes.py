"""The fix a rule may name with `fix = "..."`: edits that turn the command into one that works.

Each function gets the Finding and a FixContext (the parsed command, the flag
catalog, the effective settings) and returns a FixPlan: minimal edits plus notes
for the advice. Functions only propose; analyzer/fix.py applies and validates.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

import regex

from analyzer.catalog import FlagCatalog
from analyzer.command import LaunchCommand
from analyzer.model import Edit, Finding

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

GOOD_MATCH = 0.72


@dataclass
class FixContext:
    """What a fix may read: the command, the catalog, and ServerArgs as logged (if any)."""

    command: LaunchCommand
    catalog: FlagCatalog
    server_args: dict[str, Any] | None = None

    def value(self, flag: str) -> str | None:
        """The flag's value as typed in the command, else as recorded in server_args."""
        for argument in reversed(self.command.arguments):
            if self.catalog.canonical(argument.flag) == flag:
                return argument.value if argument.value is not None else "true"
        spec = self.catalog.spec(flag)
        if spec and self.server_args and self.server_args.get(spec.dest) is not None:
            return str(self.server_args[spec.dest])
        return None

    def typed(self, flag: str) -> bool:
        return any(self.catalog.canonical(a.flag) == flag for a in self.command.arguments)


@dataclass
class FixPlan:
    edits: list[Edit] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@cache
def foreign_flags() -> dict[str, dict[str, str]]:
    """Names from vLLM and older SGLang releases, mapped to SGLang's option."""
    text = resources.files("analyzer.catalogs").joinpath("foreign_flags.toml").read_text("utf-8")
    return tomllib.loads(text)


def replacement_for(typed: str, catalog: FlagCatalog) -> tuple[str | None, str]:
    """The SGLang flag meant by an unrecognized one, and why we think so."""
    flag = typed.split("=", 1)[0]
    known = foreign_flags().get(flag)
    if known and known["to"] and catalog.spec(known["to"]):
        note = f"{flag} is {known['engine']}'s name; SGLang calls it {known['to']}"
        return known["to"], note + (f". {known['note']}" if known.get("note") else "")
    if known and not known["to"]:
        return None, known.get("note", f"SGLang has no equivalent of {flag}")
    dashed = flag.replace("_", "-")
    if dashed != flag and catalog.canonical(dashed):
        return catalog.canonical(dashed), f"{flag} uses underscores; SGLang's flags use dashes"
    scored = catalog.similar(flag)
    if scored and scored[0][1] >= GOOD_MATCH and _same_family(flag, scored[0][0]):
        return scored[0][0], f"{flag} is closest to SGLang's {scored[0][0]}"
    closest = ", ".join(option for option, _ in scored)
    return None, f"no SGLang {catalog.version} flag is close to {flag} (closest: {closest})"


def _same_family(typed: str, option: str) -> bool:
    """Speculative flags only map to speculative flags: a wrong family is worse than none."""
    spec_typed = "specul" in typed or "draft" in typed or "eagle" in typed
    return spec_typed == ("specul" in option)


def rename_unrecognized(finding: Finding, ctx: FixContext) -> FixPlan:
    plan = FixPlan()
    for flag in finding.flags:
        if ctx.catalog.canonical(flag):
            continue
        target, note = replacement_for(flag, ctx.catalog)
        plan.notes.append(note)
        if target is None:
            if flag in foreign_flags() and ctx.command.has(flag):
                plan.edits.append(Edit("remove", flag))
            continue
        if ctx.typed(target):
            plan.edits.append(Edit("remove", flag))
            plan.notes.append(f"{target} is already set; dropping {flag}")
            continue
        value = ctx.command.get(flag)
        problem = ctx.catalog.check_value(target, value)
        if problem:
            plan.notes.append(f"the value of {flag} does not fit {target}: {problem}")
            continue
        plan.edits.append(Edit("rename", flag, to=target))
    return plan


INVALID_CHOICE = regex.compile(r"argument (?P<flag>[-\w/ ]+): invalid choice: '(?P<value>[^']*)'")
INVALID_TYPE = regex.compile(
    r"argument (?P<flag>[-\w/ ]+): invalid (?P<type>\w+) value: '(?P<value>[^']*)'"
)
AMBIGUOUS = regex.compile(
    r"ambiguous option: (?P<flag>--[\w-]+)(?:=\S*)? could match (?P<options>.+)$"
)


def fix_invalid_value(finding: Finding, ctx: FixContext) -> FixPlan:
    message = finding.match.line.body
    for handler in (_fix_choice, _fix_type, _fix_ambiguous):
        plan = handler(message, ctx)
        if plan is not None:
            return plan
    return FixPlan()


def _first_long(flags: str) -> str:
    return next((f for f in flags.split("/") if f.startswith("--")), flags.split("/")[0])


def _fix_choice(message: str, ctx: FixContext) -> FixPlan | None:
    found = INVALID_CHOICE.search(message)
    if not found:
        return None
    flag = _first_long(found["flag"].strip())
    spec = ctx.catalog.spec(flag)
    if spec is None or not spec.choices:
        return FixPlan()
    wanted = _normalise(found["value"])
    for choice in spec.choices:
        if _normalise(str(choice)) == wanted:
            note = (
                f"{found['value']!r} is not one of {spec.long}'s choices; SGLang spells it {choice}"
            )
            return FixPlan([Edit("set", spec.long, value=str(choice))], [note])
    choices = ", ".join(map(str, spec.choices))
    return FixPlan([], [f"{spec.long} accepts: {choices}"])


def _normalise(value: str) -> str:
    return regex.sub(r"[-_ ]", "", value).lower()


def _fix_type(message: str, ctx: FixContext) -> FixPlan | None:
    found = INVALID_TYPE.search(message)
    if not found:
        return None
    flag = _first_long(found["flag"].strip())
    number = _parse_number(found["value"], found["type"])
    if number is None:
        return FixPlan([], [f"{flag} expects a {found['type']} value, got {found['value']!r}"])
    note = f"{found['value']!r} read as {number} ({flag} takes a plain {found['type']})"
    return FixPlan([Edit("set", flag, value=number)], [note])


WORD_NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "six": 6, "eight": 8, "sixteen": 16}


def _parse_number(value: str, kind: str) -> str | None:
    text = value.strip().lower().replace("_", "").replace(",", "")
    if text in WORD_NUMBERS:
        return str(WORD_NUMBERS[text])
    scale = {"k": 1000, "m": 1000_000}.get(text[-1:]) if kind == "int" else None
    try:
        if scale:
            return str(int(float(text[:-1]) * scale))
        return str(int(float(text))) if kind == "int" else str(float(text))
    except ValueError:
        return None


def _fix_ambiguous(message: str, ctx: FixContext) -> FixPlan | None:
    found = AMBIGUOUS.search(message)
    if not found:
        return None
    options = [o.strip() for o in found["options"].split(",")]
    decode = [o for o in options if o.endswith("-decode")]
    note = f"{found['flag']} is a prefix of {', '.join(options)}; argparse cannot choose"
    if len(decode) == 1:
        note += f" (older releases' {found['flag']} meant the decode batch size: {decode[0]})"
        return FixPlan([Edit("rename", found["flag"], to=decode[0])], [note])
    return FixPlan([], [note])


SPEC_FLAGS = (
    "--speculative-num-steps",
    "--speculative-eagle-topk",
    "--speculative-num-draft-tokens",
)


def complete_speculative(finding: Finding, ctx: FixContext) -> FixPlan:
    """Give the speculative settings SGLang needs together, consistently.

    With topk 1 the draft is a chain: draft tokens = steps + 1. With topk > 1 the
    tree needs at least (draft tokens - 1) / topk steps.
    """
    steps = _int(ctx.value("--speculative-num-steps"))
    topk = _int(ctx.value("--speculative-eagle-topk"))
    tokens = _int(ctx.value("--speculative-num-draft-tokens"))
    if steps is not None and ctx.typed("--speculative-num-steps"):
        return FixPlan()
    topk_value = topk if topk is not None else 1
    if tokens is None:
        steps, tokens = 3, 4 if topk_value == 1 else None
    elif topk_value == 1:
        steps = max(tokens - 1, 1)
    else:
        steps = max(math.ceil((tokens - 1) / topk_value), 1)
    plan = FixPlan([Edit("add", "--speculative-num-steps", value=str(steps))])
    relation = (
        "draft tokens = steps + 1" if topk_value == 1 else "steps >= (draft tokens - 1) / topk"
    )
    plan.notes.append(
        f"with --speculative-eagle-topk {topk_value}, SGLang needs {relation}: "
        f"--speculative-num-steps {steps}"
    )
    if topk is None and ctx.typed("--speculative-num-draft-tokens"):
        plan.edits.append(Edit("add", "--speculative-eagle-topk", value="1"))
    if tokens is not None and not ctx.typed("--speculative-num-draft-tokens"):
        plan.edits.append(Edit("add", "--speculative-num-draft-tokens", value=str(tokens)))
    return plan


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def eagle3_algorithm(finding: Finding, ctx: FixContext) -> FixPlan:
    if finding.match.groups.get("ratio") != "3":
        return FixPlan()
    current = (ctx.value("--speculative-algorithm") or "").upper()
    if current == "EAGLE3":
        note = "the algorithm is already EAGLE3: check that the draft really is an EAGLE-3 head"
        return FixPlan([], [note])
    note = "the draft is an EAGLE-3 head: serve it with --speculative-algorithm EAGLE3"
    return FixPlan([Edit("set", "--speculative-algorithm", value="EAGLE3")], [note])


def memory_fix(finding: Finding, ctx: FixContext) -> FixPlan:
    """Phase-aware memory edits; none when other processes hold the memory."""
    groups = finding.match.groups
    if groups.get("other_processes"):
        return FixPlan([], ["free the GPUs first (see nvidia-smi), then rerun the same command"])
    fraction = _float(ctx.value("--mem-fraction-static"))
    phase = groups.get("phase", "startup")
    if phase == "kv_cache":
        if fraction is not None and fraction < 0.93:
            new = round(min(fraction + 0.05, 0.95), 2)
            return FixPlan([Edit("set", "--mem-fraction-static", value=f"{new:g}")])
        return FixPlan([], _context_note(ctx))
    if phase in ("cuda_graph_capture", "serving"):
        base = fraction if fraction is not None else 0.88
        new = round(max(base - 0.05, 0.5), 2)
        return FixPlan([Edit("set", "--mem-fraction-static", value=f"{new:g}")])
    return FixPlan()


def _context_note(ctx: FixContext) -> list[str]:
    length = ctx.value("--context-length")
    if length:
        return [f"--context-length is {length}: a shorter context needs a smaller KV cache"]
    return []


def _float(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


FIXES: dict[str, Callable[[Finding, FixContext], FixPlan]] = {
    "rename_unrecognized": rename_unrecognized,
    "fix_invalid_value": fix_invalid_value,
    "complete_speculative": complete_speculative,
    "eagle3_algorithm": eagle3_algorithm,
    "memory_fix": memory_fix,
}
