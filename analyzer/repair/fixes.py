"""The fix a rule may name with `fix = "..."`: edits that turn the command into one that works.

Each function gets the Finding and a FixContext (the parsed command, the flag
catalog, the effective settings) and returns a FixPlan: minimal edits plus notes
for the advice. Functions only propose; analyzer/repair/correct.py applies and validates.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import regex

from analyzer.core.lazy_pattern import LazyPattern
from analyzer.core.model import Edit, Finding
from analyzer.core.toml_data import shipped_toml
from analyzer.repair.intent_loss import dropped
from analyzer.repair.switch_counterparts import switch_counterpart
from analyzer.sglang.catalog import FlagCatalog, FlagSpec, swaps_a_word
from analyzer.sglang.choice_aliases import choice_named
from analyzer.sglang.flag_history import shipped_history
from analyzer.sglang.flag_words import option_in_other_words
from analyzer.sglang.launch_command import LaunchCommand

GOOD_MATCH = 0.72
# A name this close to one flag and no other is a typo of it, whatever its family.
TYPO_MATCH = 0.95


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
    """Edits, notes for the advice, and flags only the command could name (a path's flag)."""

    edits: list[Edit] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    # the fix lies outside the command (other processes hold the memory)
    outside_command: bool = False


@cache
def foreign_flags() -> dict[str, dict[str, str]]:
    """Names from vLLM and older SGLang releases, mapped to SGLang's option."""
    return shipped_toml("analyzer.catalogs", "foreign_flags.toml")


def replacement_for(typed: str, catalog: FlagCatalog) -> tuple[str | None, str]:
    """The SGLang flag meant by an unrecognized one, and why we think so."""
    flag = typed.split("=", 1)[0]
    known = foreign_flags().get(flag)
    if known and known["to"] and catalog.spec(known["to"]):
        note = f"{flag} is {known['engine']}'s name; SGLang calls it {known['to']}"
        return known["to"], note + (f". {known['note']}" if known.get("note") else "")
    if known and known["to"] and catalog.from_usage:
        return None, (
            f"{flag} is {known['engine']}'s name for SGLang's {known['to']}, which the usage "
            "text of this release does not list: no rename is offered"
        )
    if known and not known["to"]:
        return None, known.get("note", f"SGLang has no equivalent of {flag}")
    change = shipped_history().change(flag, catalog)
    if change is not None:
        return change.replacement, change.explain(catalog.version)
    dashed = flag.replace("_", "-")
    if dashed != flag and catalog.canonical(dashed):
        return catalog.canonical(dashed), f"{flag} uses underscores; SGLang's flags use dashes"
    scored = catalog.similar(flag)
    if scored and scored[0][1] >= TYPO_MATCH and not swaps_a_word(flag, scored[0][0]):
        # a typo of a spelling SGLang takes (an alias included) keeps the spelling typed
        return scored[0][0], f"{flag} is closest to SGLang's {scored[0][0]}"
    in_words = option_in_other_words(flag, catalog)
    if in_words is not None:
        return in_words, f"{flag} is SGLang's {in_words} with its words cut or spelled out"
    near = scored and (scored[0][1] >= TYPO_MATCH or len(scored) == 1 or scored[1][1] < GOOD_MATCH)
    if (
        scored
        and scored[0][1] >= GOOD_MATCH
        and (_same_family(flag, scored[0][0]) or near)
        and not swaps_a_word(flag, scored[0][0])
    ):
        return scored[0][0], f"{flag} is closest to SGLang's {scored[0][0]}"
    closest = ", ".join(option for option, _ in scored)
    return None, f"no flag of {catalog.release} is close to {flag} (closest: {closest})"


def _speculated_tokens(flag: str, value: str | None, ctx: FixContext) -> FixPlan | None:
    """vLLM's `--num-speculative-tokens N` as SGLang's chain of N steps (foreign_flags.toml
    `counts_steps`), when the command has an algorithm and leaves the steps to us."""
    if not foreign_flags().get(flag, {}).get("counts_steps"):
        return None
    steps = int_value(value)
    topk = ctx.value("--speculative-eagle-topk")
    if (
        steps is None
        or steps < 1
        or not ctx.typed("--speculative-algorithm")
        or ctx.typed("--speculative-num-steps")
        or ctx.typed("--speculative-num-draft-tokens")
        or topk not in (None, "1")
    ):
        return None
    edits = [Edit("rename", flag, to="--speculative-num-steps")]
    if topk is None:
        edits.append(Edit("add", "--speculative-eagle-topk", value="1"))
    edits.append(Edit("add", "--speculative-num-draft-tokens", value=str(steps + 1)))
    note = (
        f"{flag} {steps} counts vLLM's speculated tokens, a chain of {steps} draft steps: in "
        f"SGLang --speculative-num-steps {steps} --speculative-eagle-topk 1 "
        f"--speculative-num-draft-tokens {steps + 1}"
    )
    return FixPlan(edits, [note])


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
            tp = int_value(ctx.value("--tp-size"))
            counterpart = switch_counterpart(flag, ctx.command, ctx.catalog, tp)
            if counterpart is not None and ctx.command.has(flag):
                plan.edits.append(counterpart[0])
                plan.notes.append(counterpart[1])
                continue
            # no counterpart in the history, the vocabulary or the foreign names: the last
            # resort drops it, and says what is lost
            if ctx.command.has(flag):
                edit, lost = dropped(flag, ctx.command.get(flag), ctx.catalog)
                plan.edits.append(edit)
                plan.notes.append(lost)
            continue
        if ctx.typed(target):
            plan.edits.append(Edit("remove", flag))
            plan.notes.append(f"{target} is already set; dropping {flag}")
            continue
        value = ctx.command.get(flag)
        change = shipped_history().change(flag, ctx.catalog)
        if change is not None and change.replacement == target and change.value is not None:
            # the deprecation names the value too: a switch that became one value of an option
            plan.edits.append(Edit("rename", flag, to=target, value=change.value))
            continue
        chain = _speculated_tokens(flag, value, ctx)
        if chain is not None:
            plan.edits.extend(chain.edits)
            plan.notes.extend(chain.notes)
            continue
        problem = ctx.catalog.check_value(target, value)
        if problem:
            plan.notes.append(f"the value of {flag} does not fit {target}: {problem}")
            continue
        plan.edits.append(Edit("rename", flag, to=target))
    return plan


INVALID_CHOICE = LazyPattern(r"argument (?P<flag>[-\w/ ]+): invalid choice: '(?P<value>[^']*)'")
INVALID_TYPE = LazyPattern(
    r"argument (?P<flag>[-\w/ ]+): (?i:invalid) (?P<type>\w+) value: '(?P<value>[^']*)'"
)
AMBIGUOUS = LazyPattern(
    r"ambiguous option: (?P<flag>--[\w-]+)(?:=\S*)? could match (?P<options>.+)$"
)


def fix_invalid_value(finding: Finding, ctx: FixContext) -> FixPlan:
    message = finding.match.line.body
    for handler in (_fix_choice, _fix_type, _fix_ambiguous, _fix_missing_value, _fix_required):
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
    # the choices argparse printed are those of the user's release; the catalog's may differ
    printed = _printed_choices(message)
    known = printed or (spec.choices if spec else ())
    if not known:
        return FixPlan()
    long = spec.long if spec else flag
    choice = _matching_choice(found["value"], known)
    if choice is not None:
        note = f"{found['value']!r} is not one of {long}'s choices; SGLang spells it {choice}"
        return FixPlan([Edit("set", long, value=choice)], [note])
    accepts = f"{long} accepts: {', '.join(map(str, known))}"
    if not ctx.command.has(flag):
        return FixPlan([], [accepts])
    # none of them is the value meant: without the flag SGLang takes its default
    edit, lost = dropped(flag, found["value"], ctx.catalog)
    return FixPlan([edit], [accepts, lost])


CHOOSE_FROM = LazyPattern(r"\(choose from (?P<choices>[^()]*)\)\s*$")


def _printed_choices(message: str) -> tuple[str, ...]:
    """`(choose from 'a', 'b')` (3.9+ quotes them) or `(choose from a, b)`: the choices."""
    found = CHOOSE_FROM.search(message)
    if not found:
        return ()
    return tuple(c.strip().strip("'\"") for c in found["choices"].split(",") if c.strip())


@cache
def value_aliases() -> dict[str, str]:
    return shipped_toml("analyzer.catalogs", "value_aliases.toml")


def late_choices(flag: str) -> tuple[str, ...]:
    """Choices SGLang checks after argparse (see value_aliases.toml)."""
    return tuple(value_aliases().get("late_choices", {}).get(flag, ()))


def respell_algorithm(finding: Finding, ctx: FixContext) -> FixPlan:
    typed = finding.match.groups.get("value", "")
    choice = _matching_choice(typed, late_choices("--speculative-algorithm"))
    if choice is None:
        return FixPlan()
    note = f"SGLang spells the algorithm {choice}, not {typed}"
    return FixPlan([Edit("set", "--speculative-algorithm", value=choice)], [note])


def satisfy_requirement(finding: Finding, ctx: FixContext) -> FixPlan:
    """`--A requires --B=V`: set B to V (keeping the speculative trio consistent)."""
    groups = finding.match.groups
    required, value = groups.get("req"), groups.get("value")
    if not required or not ctx.catalog.spec(required):
        return FixPlan()
    if value is None:
        note = f"{required} has no value SGLang can imply: choose one, or drop {groups['flag']}"
        return FixPlan([], [note])
    plan = FixPlan([Edit("set", required, value=value)])
    if required == "--speculative-eagle-topk" and value == "1":
        steps = int_value(ctx.value("--speculative-num-steps"))
        tokens = int_value(ctx.value("--speculative-num-draft-tokens"))
        if steps is not None and tokens is not None and tokens != steps + 1:
            plan.edits.append(Edit("set", "--speculative-num-draft-tokens", value=str(steps + 1)))
            plan.notes.append(
                f"with topk 1, draft tokens = steps + 1 = {steps + 1} "
                f"(SGLang would silently cut {tokens} to {steps + 1})"
            )
    return plan


def _matching_choice(value: str, choices: tuple) -> str | None:
    """The choice meant by `value`: same up to case and separators, or a known alias."""
    wanted = _normalise(value)
    for choice in choices:
        if _normalise(str(choice)) == wanted:
            return str(choice)
    alias = value_aliases().get(value.lower())
    if isinstance(alias, str) and alias in map(str, choices):
        return alias
    return choice_named(value, choices)


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
    """A number written in words, with a percent sign, or a suffix SGLang does not take
    (an upper-case `K` is read as 1024, the way context lengths are usually written)."""
    kind = {"integer": "int"}.get(kind.lower(), kind.lower())
    binary = value.strip().endswith("K")
    text = value.strip().lower().replace("_", "").replace(",", "")
    if text in WORD_NUMBERS:
        return str(WORD_NUMBERS[text])
    if text.endswith("%") and kind == "float":
        try:
            return f"{float(text[:-1]) / 100:g}"
        except ValueError:
            return None
    scale = {"k": 1024 if binary else 1000, "m": 1000_000}.get(text[-1:]) if kind == "int" else None
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
    note = f"{found['flag']} is a prefix of {', '.join(options)}; argparse cannot choose"
    change = shipped_history().change(found["flag"], ctx.catalog)
    if change is None or change.replacement is None:
        meant = _option_for_value(found["flag"], options, ctx)
        if meant is None:
            return FixPlan([], [note, *_described(options, ctx.catalog)])
        notes = [note, f"of these, only {meant} takes a value like the one given"]
        return FixPlan([Edit("rename", found["flag"], to=meant)], notes, [meant])
    notes = [note, change.explain(ctx.catalog.version)]
    return FixPlan([Edit("rename", found["flag"], to=change.replacement)], notes)


def _described(options: list[str], catalog: FlagCatalog) -> list[str]:
    """What each option a prefix could mean takes, from the catalog: its type or choices."""
    described = []
    for option in options:
        spec = catalog.spec(option)
        if spec is None or spec.long != option:
            continue
        takes = (
            "a switch"
            if not spec.takes_value
            else f"one of {', '.join(map(str, spec.choices))}"
            if spec.choices
            else f"a {spec.type or 'str'}"
        )
        described.append(f"{option} takes {takes}: {spec.help}".rstrip(": "))
    return described


PATH_WORDS = LazyPattern(r"(?i)\b(?:path|directory|dir|file)\b")


def _option_for_value(typed: str, options: list[str], ctx: FixContext) -> str | None:
    """The one option an ambiguous prefix can mean, judged by the value typed after it: a
    switch for none, an option listing the value among its choices, a number's type, a path
    for an option whose name or help says path (`--speculative-draft /models/d` is the draft
    model's path, not its revision)."""
    argument = next((a for a in ctx.command.arguments if a.flag == typed), None)
    if argument is None:
        return None
    specs = {s.dest: s for o in options if (s := ctx.catalog.spec(o)) is not None}
    value = argument.value
    fitting = [s for s in specs.values() if _takes(s, value)]
    if len(fitting) > 1:
        # an option the command already sets in full is not the one the prefix meant
        fitting = [s for s in fitting if not ctx.typed(s.long)]
    return fitting[0].long if len(fitting) == 1 else None


def _takes(spec: FlagSpec, value: str | None) -> bool:
    if value is None or not spec.takes_value:
        return value is None and not spec.takes_value
    if spec.choices:
        return value in {str(c) for c in spec.choices}
    if spec.type in ("int", "float"):
        return value.lstrip("-").replace(".", "", 1).isdigit()
    if "/" in value:
        return spec.long.endswith(("-path", "-dir", "-file")) or bool(PATH_WORDS.search(spec.help))
    return True


REQUIRED = LazyPattern(r"the following arguments are required: (?P<flags>.+)$")


def _fix_required(message: str, ctx: FixContext) -> FixPlan | None:
    """A required flag missing while a lone positional is there: name the positional.

    `sglang serve /models/x` (vLLM's `vllm serve MODEL` habit) means --model-path.
    """
    found = REQUIRED.search(message)
    if not found:
        return None
    required = [_first_long(f.strip()) for f in found["flags"].split(",")]
    positionals = ctx.command.positionals
    if required != ["--model-path"] or len(positionals) != 1:
        return FixPlan([], [f"add {', '.join(required)}"])
    note = f"{positionals[0]} was given as a positional argument; SGLang wants --model-path"
    return FixPlan([Edit("rename", positionals[0], to="--model-path")], [note])


MISSING_VALUE = LazyPattern(r"argument (?P<flag>[-\w/ ]+): expected one argument")


def _fix_missing_value(message: str, ctx: FixContext) -> FixPlan | None:
    """A flag written without its value: derive it for the speculative trio, else say so."""
    found = MISSING_VALUE.search(message)
    if not found:
        return None
    flag = _first_long(found["flag"].strip())
    derived = speculative_values(ctx).get(flag)
    if derived is None:
        spec = ctx.catalog.spec(flag)
        default = f" (SGLang's default is {spec.default!r})" if spec else ""
        return FixPlan([], [f"{flag} was given without a value{default}: add one or drop it"])
    note = f"{flag} was given without a value; {derived} fits the other speculative settings"
    return FixPlan([Edit("set", flag, value=derived)], [note])


def speculative_values(ctx: FixContext) -> dict[str, str]:
    """Values for the missing members of the speculative trio that fit the given ones.

    With topk 1 the draft is a chain: draft tokens = steps + 1. With topk > 1 the steps
    are the tree's depth, independent of the token budget: 3, SGLang's usual depth (fewer
    only when the budget is smaller). With neither steps nor draft tokens: 3 steps.
    """
    steps = int_value(ctx.value("--speculative-num-steps"))
    topk = int_value(ctx.value("--speculative-eagle-topk"))
    tokens = int_value(ctx.value("--speculative-num-draft-tokens"))
    values: dict[str, str] = {}
    if topk is None:
        values["--speculative-eagle-topk"] = "1"
    per_step = topk or 1
    if steps is None and tokens is not None:
        chain = max(tokens - 1, 1)
        values["--speculative-num-steps"] = str(chain if per_step == 1 else min(3, chain))
    if steps is None and tokens is None:
        values["--speculative-num-steps"] = "3"
        steps = 3
    if tokens is None and steps is not None and per_step == 1:
        values["--speculative-num-draft-tokens"] = str(steps + 1)
    return values


def complete_speculative(finding: Finding, ctx: FixContext) -> FixPlan:
    """Add the missing --speculative-num-steps / --speculative-eagle-topk, consistently.

    SGLang derives the draft-token count from the steps when topk is 1, so it is never
    added; the two it cannot do without are.
    """
    values = speculative_values(ctx)
    trio = ("--speculative-num-steps", "--speculative-eagle-topk", "--speculative-num-draft-tokens")
    plan = FixPlan(flags=[f for f in trio if ctx.typed(f)])
    for flag in ("--speculative-num-steps", "--speculative-eagle-topk"):
        if flag in values and not ctx.typed(flag):
            plan.edits.append(Edit("add", flag, value=values[flag]))
    if plan.edits:
        topk = ctx.value("--speculative-eagle-topk") or values["--speculative-eagle-topk"]
        relation = "draft tokens = steps + 1" if topk == "1" else "a tree of depth steps"
        plan.notes.append(
            f"with --speculative-eagle-topk {topk} SGLang builds {relation}; added "
            + ", ".join(f"{e.flag} {e.value}" for e in plan.edits)
        )
    return plan


def int_value(value: str | None) -> int | None:
    """A flag's value as an int, None when it is not one."""
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def eagle3_algorithm(finding: Finding, ctx: FixContext) -> FixPlan:
    if finding.match.groups.get("ratio") != "3":
        # not an EAGLE-3 head's 3 x hidden: the draft was trained for another target
        return FixPlan([], [], outside_command=True)
    current = (ctx.value("--speculative-algorithm") or "").upper()
    if current == "EAGLE3":
        # the draft's hidden size is not the target's: another draft, not another flag
        note = "the algorithm is already EAGLE3: the draft was trained for another target"
        return FixPlan([], [note], outside_command=True)
    note = "the draft is an EAGLE-3 head: serve it with --speculative-algorithm EAGLE3"
    return FixPlan([Edit("set", "--speculative-algorithm", value="EAGLE3")], [note])


BOUNDS = (
    (LazyPattern(r"must be non-negative"), 0),
    (LazyPattern(r"must be positive"), 1),
    (LazyPattern(r"must (?:be )?(?:>=|at least) ?(?P<n>-?\d+)"), None),
)
DERIVED_CONTEXT = LazyPattern(
    r"context_length \((?P<given>\d+)\) is greater than the derived context_length \((?P<derived>\d+)\)"
)


def respect_bound(finding: Finding, ctx: FixContext) -> FixPlan:
    """A value outside the range a check names: SGLang's default if it fits, else the bound."""
    message = finding.match.groups.get("message", "")
    derived = DERIVED_CONTEXT.search(message)
    if derived:
        note = f"the model's own context length is {derived['derived']}"
        return FixPlan([Edit("set", "--context-length", value=derived["derived"])], [note])
    flag = next((f for f in finding.flags if ctx.typed(f)), None)
    if flag is None:
        return FixPlan()
    for pattern, bound in BOUNDS:
        found = pattern.search(message)
        if found:
            low = int(found["n"]) if bound is None else bound
            spec = ctx.catalog.spec(flag)
            default = spec.default if spec else None
            value = default if isinstance(default, int) and default >= low else low
            note = f"{flag} must be at least {low}; {value} is the nearest valid value"
            return FixPlan([Edit("set", flag, value=str(value))], [note])
    return FixPlan()


PORT_FLAGS = ("--nccl-port", "--dist-init-addr", "--port")
PORT_STEP = 10


def move_port(finding: Finding, ctx: FixContext) -> FixPlan:
    """Move the port the user chose that collides; +10 clears SGLang's derived ports."""
    message = finding.match.line.body
    busy = set(regex.findall(r"\b(\d{2,5})\b", message))
    for flag in PORT_FLAGS:
        typed = typed_argument(ctx, flag)
        if typed is None:
            continue
        host, _, port = typed.rpartition(":") if flag == "--dist-init-addr" else ("", "", typed)
        if not port.isdigit() or (busy and port not in busy and flag != "--port"):
            continue
        new = str(int(port) + PORT_STEP)
        value = f"{host}:{new}" if host else new
        note = f"port {port} of {flag} is taken; any free port works (check with `ss -ltnp`)"
        return FixPlan([Edit("set", flag, value=value)], [note], [flag])
    return FixPlan([], [], ["--port"])


def typed_argument(ctx: FixContext, flag: str) -> str | None:
    """The value typed for the flag (None for a bare switch or an absent flag)."""
    for argument in reversed(ctx.command.arguments):
        if ctx.catalog.canonical(argument.flag) == flag:
            return argument.value
    return None


# The fixes of failures; analyzer/repair/fix_registry.py joins them with intent_fixes.py's.
FLAG_FIXES: dict[str, Callable[[Finding, FixContext], FixPlan]] = {
    "move_port": move_port,
    "respect_bound": respect_bound,
    "rename_unrecognized": rename_unrecognized,
    "fix_invalid_value": fix_invalid_value,
    "complete_speculative": complete_speculative,
    "respell_algorithm": respell_algorithm,
    "satisfy_requirement": satisfy_requirement,
    "eagle3_algorithm": eagle3_algorithm,
}
