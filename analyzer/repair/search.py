"""The repair search: corrected commands that survive every check the project has.

A rule's fix clears the error that was printed; the command can still stop at the next
check (renaming vLLM's --num-speculative-tokens walks into SGLang's speculative assertion).
So the fix is a seed, not an answer. Candidates come from the rule's plan and from the
failing check itself (the flags its error-catalog condition reads: their choices, numbers
near the typed one that satisfy the condition, removal, a switch it wants on). Each
candidate goes through analyzer/repair/predict.py (the parser with aliases and prefixes,
speculative completion, the catalogued conditions it can evaluate) and is repaired with
the fix of whatever it predicts, up to DEPTH rounds. Clean candidates are ranked by the
smallest edit that keeps what the user asked for: removing a flag costs more than changing
it, and turning speculative decoding off costs most.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field

from analyzer.core.model import Edit, Finding
from analyzer.repair.conditions import CommandValues, Unknown, site_fails
from analyzer.repair.fixes import FixPlan
from analyzer.repair.intent_loss import dropped
from analyzer.repair.predict import Predicted, predict
from analyzer.rulebook.command_checks import check_command
from analyzer.sglang.catalog import FlagCatalog, FlagSpec
from analyzer.sglang.error_catalog import (
    ErrorCatalog,
    ErrorCatalogError,
    ErrorSite,
    load_error_catalog,
)
from analyzer.sglang.launch_command import LaunchCommand

DEPTH = 3
FRONTIER = 24
KEEP = 4
# What an edit costs the user's intent: a removed flag is a lost wish; speculative
# decoding turned off is the last resort.
COST = {"rename": 1.0, "set": 1.0, "add": 1.0, "remove": 2.0}
SPECULATION_OFF = 8.0
NEW_WARNING = 0.5
# The rule's own fix is the curated answer: it wins a tie with one more edit.
RULE_PLAN = 1.0
KEPT_FLAGS = ("--model-path",)
SPECULATIVE_CORE = ("--speculative-algorithm", "--speculative-draft-model-path")


@dataclass
class Candidate:
    """Edits on the original command, what they say, and where they came from."""

    edits: list[Edit]
    notes: list[str] = field(default_factory=list)
    seed: int = 0

    def cost(self) -> float:
        total = 0.0
        for edit in self.edits:
            off = edit.op == "remove" and edit.flag in SPECULATIVE_CORE
            total += SPECULATION_OFF if off else COST.get(edit.op, 1.0)
        return total


@dataclass
class Repaired:
    """A corrected command that passes every prediction, with its edits and notes."""

    command: LaunchCommand
    edits: list[Edit]
    notes: list[str]


@dataclass
class Outcome:
    """The ranked clean commands, or what every candidate still failed."""

    repaired: list[Repaired]
    problems: list[str]


def failing_site(finding: Finding, catalog: FlagCatalog) -> ErrorSite | None:
    """The raise/assert site of SGLang that printed the finding's error, if catalogued."""
    errors = error_catalog(catalog)
    traceback = finding.match.traceback
    if errors is None or traceback is None:
        return None
    for frame in reversed(traceback.frames):
        site = errors.site_at(frame.file, frame.lineno, frame.function)
        if site is not None:
            return site if site.startup else None
    message = f"{traceback.exception_message}".strip()
    found = errors.match(traceback.exception_type, message) if message else []
    return found[0] if found and found[0].startup else None


def error_catalog(catalog: FlagCatalog) -> ErrorCatalog | None:
    try:
        return load_error_catalog(catalog.version)
    except ErrorCatalogError:
        return None


def search(
    command: LaunchCommand,
    catalog: FlagCatalog,
    finding: Finding,
    plan: FixPlan,
    site: ErrorSite | None,
) -> Outcome:
    """Clean commands reachable from the rule's plan and the failing check, best first."""
    errors = error_catalog(catalog)
    failing = _Failing(command, catalog, finding, site, tuple(plan.flags))
    frontier = _seeds(command, catalog, plan, failing, errors)
    warned = _warnings(command, catalog)
    seen: set[str] = set()
    clean: list[tuple[Candidate, LaunchCommand]] = []
    problems: list[str] = []
    for _ in range(DEPTH):
        grown: list[Candidate] = []
        for candidate in frontier:
            try:
                edited = command.apply(candidate.edits, catalog.canonical)
            except ValueError:
                continue
            text = edited.render()
            if text in seen or text == command.render():
                continue
            seen.add(text)
            found = predict(edited, catalog, errors)
            if not found and failing.still_fails(edited, candidate.edits):
                found = [Predicted("failing", finding.title, failing.flags)]
            if not found:
                clean.append((candidate, edited))
                continue
            problems = [p.message for p in found]
            grown.extend(_children(candidate, edited, catalog, found[0]))
        frontier = sorted(grown, key=_rank)[:FRONTIER]
        if not frontier:
            break
    ranked = sorted(clean, key=lambda pair: _rank(pair[0], _new_warnings(pair[1], catalog, warned)))
    repaired = [
        Repaired(edited, candidate.edits, _notes(candidate)) for candidate, edited in ranked[:KEEP]
    ]
    return Outcome(repaired, problems if not repaired else [])


def _rank(candidate: Candidate, warnings: int = 0) -> tuple[float, int]:
    bonus = RULE_PLAN if candidate.seed == 0 else 0.0
    return (candidate.cost() + NEW_WARNING * warnings - bonus, candidate.seed)


def _notes(candidate: Candidate) -> list[str]:
    notes = list(dict.fromkeys(candidate.notes))
    if any(e.op == "remove" and e.flag == "--speculative-algorithm" for e in candidate.edits):
        notes.append(
            "speculative decoding is turned off: no speculative setting the checks know passes"
        )
    return notes


def _warnings(command: LaunchCommand, catalog: FlagCatalog) -> set[str]:
    return {f.match.rule_id for f in check_command(command, catalog, None, None)}


def _new_warnings(command: LaunchCommand, catalog: FlagCatalog, before: set[str]) -> int:
    return len(_warnings(command, catalog) - before)


def _children(
    parent: Candidate, edited: LaunchCommand, catalog: FlagCatalog, problem: Predicted
) -> list[Candidate]:
    """The next round: the problem's own fix, else edits of the flags it names."""
    plans = [problem.plan] if problem.plan.edits else []
    if problem.site is not None or not plans:
        plans += _flag_plans(edited, catalog, problem.flags, problem.site is not None, problem.site)
    return [
        Candidate([*parent.edits, *p.edits], [*parent.notes, *p.notes], parent.seed) for p in plans
    ]


class _Failing:
    """The check that failed in the log: does a candidate still fail it?

    With a catalogued site whose condition evaluates to a failure on the original command,
    the candidate's value of that condition decides. Otherwise a candidate must at least
    change one of the flags the failure names; the parser checks judge argparse errors.
    """

    def __init__(
        self,
        command: LaunchCommand,
        catalog: FlagCatalog,
        finding: Finding,
        site: ErrorSite | None,
        named: tuple[str, ...] = (),
    ) -> None:
        self.catalog = catalog
        self.site = site
        # the finding's flags, those the rule's fix named from the command, the site's
        names = [*finding.flags, *named, *(site.flags if site else ())]
        self.flags = [f for f in dict.fromkeys(names) if catalog.spec(f)]
        self.judged = site is not None and _fails(site, command, catalog) is True
        self.parser = finding.match.traceback is None

    def still_fails(self, command: LaunchCommand, edits: list[Edit]) -> bool:
        if self.parser:
            return False
        if self.judged and self.site is not None:
            return _fails(self.site, command, self.catalog) is not False
        touched = {self.catalog.canonical(e.flag) or e.flag for e in edits}
        touched |= {e.to for e in edits if e.to}
        return bool(self.flags) and not touched & set(self.flags)


def _fails(site: ErrorSite, command: LaunchCommand, catalog: FlagCatalog) -> bool | None:
    """The failing site on a command, reading unset flags as argparse leaves them (None):
    the site is known to be reached, so no later default can hide it."""
    try:
        return site_fails(site, CommandValues(command, catalog, unset_is_none=True))
    except Unknown:
        return None


def _seeds(
    command: LaunchCommand,
    catalog: FlagCatalog,
    plan: FixPlan,
    failing: _Failing,
    errors: ErrorCatalog | None,
) -> list[Candidate]:
    seeds = [Candidate(list(plan.edits), list(plan.notes), 0)] if plan.edits else []
    if failing.parser and not seeds:
        # the rule had no edit for this argparse error: start from what the parser checks
        # predict of the command as typed (`--switch true`: the stray word's own plan)
        for index, problem in enumerate(predict(command, catalog, errors), 1):
            if problem.plan.edits:
                seeds.append(Candidate(list(problem.plan.edits), list(problem.plan.notes), index))
    if failing.parser or failing.site is None:
        return seeds  # argparse errors: the parser checks decide; no site: the rule's fix only
    plans = _flag_plans(command, catalog, failing.flags, failing.judged, failing.site)
    for index, extra in enumerate(plans, 1):
        seeds.append(Candidate(list(extra.edits), list(extra.notes), index))
    return seeds


def _flag_plans(
    command: LaunchCommand,
    catalog: FlagCatalog,
    flags: list[str],
    judged: bool,
    site: ErrorSite | None = None,
) -> list[FixPlan]:
    """One-edit plans over the flags a check reads: other values, removal, a switch on.

    New numbers only for a check whose condition is evaluated (`judged`): elsewhere any
    number would be a guess that merely touches the flag. A character the condition
    forbids is replaced, keeping the rest of the value. Removal comes last and says what
    is lost.
    """
    typed = {catalog.canonical(a.flag): a.value for a in command.arguments}
    numbers = [n for f in flags if (n := _int(typed.get(f))) is not None]
    plans: list[FixPlan] = []
    for flag in flags:
        spec = catalog.spec(flag)
        if spec is None:
            continue
        if flag not in typed:
            if spec.action == "store_true" and _switch_is_judged(command, catalog, flag):
                plans.append(FixPlan([Edit("add", flag)], [f"{flag} is what the check asks for"]))
            continue
        value = typed[flag]
        others = [n for n in numbers if n != _int(value)]
        for new in _values(spec, value, others) if judged or spec.choices else []:
            note = f"{flag} {value} -> {new}: the nearest value the check accepts"
            plans.append(FixPlan([Edit("set", flag, value=new)], [note]))
        for new, char in _without_forbidden(spec, value, site):
            note = f"{flag} {value} -> {new}: SGLang's check refuses {char!r} in it"
            plans.append(FixPlan([Edit("set", flag, value=new)], [note]))
        if flag not in KEPT_FLAGS:
            edit, lost = dropped(flag, value, catalog)
            plans.append(FixPlan([edit], [f"{flag} cannot stay as given; {lost}"]))
    return plans


FORBIDDEN = re.compile(r"""(?P<q>['"])(?P<char>[^'"\\])(?P=q) not in (?:\w+\.)*(?P<dest>\w+)""")
STAND_INS = ("-", "_", ".")


def _without_forbidden(
    spec: FlagSpec, value: str | None, site: ErrorSite | None
) -> list[tuple[str, str]]:
    """The value with each character the site's condition forbids in it replaced (`':' not
    in cfg.served_model_name`): by the first separator the condition does not forbid too."""
    if value is None or site is None or not site.condition:
        return []
    forbidden = {
        found["char"]
        for found in FORBIDDEN.finditer(site.condition)
        if found["dest"] == spec.dest and found["char"] in value
    }
    if not forbidden:
        return []
    stand_in = next((c for c in STAND_INS if c not in forbidden), None)
    if stand_in is None:
        return []
    new = value
    for char in sorted(forbidden):
        new = new.replace(char, stand_in)
    return [(new, "".join(sorted(forbidden)))]


def _switch_is_judged(command: LaunchCommand, catalog: FlagCatalog, flag: str) -> bool:
    """Whether turning a switch on is safe to propose: every check that reads it can be
    evaluated on the command. A feature whose checks read the model (`supports only ...`)
    cannot be vouched for from the flags alone."""
    errors = error_catalog(catalog)
    if errors is None:
        return False
    switched = command.apply([Edit("add", flag)], catalog.canonical)
    for site in errors.entries:
        if site.startup and flag in (*site.condition_flags, *site.context_flags):
            if _fails(site, switched, catalog) is None:
                return False
    return True


def _values(spec: FlagSpec, value: str | None, others: list[int]) -> list[str]:
    """Values to try instead of `value`: close choices, or numbers near it that relate to
    the other numbers the check reads (divisors, multiples) or are powers of two."""
    if value is None:
        return []
    if spec.choices:
        options = [str(c) for c in spec.choices if str(c) != value]
        return difflib.get_close_matches(value, options, n=2, cutoff=0.3)
    number = _int(value)
    if spec.type != "int" or number is None:
        return []
    near: set[int] = set()
    for other in others:
        if other <= 0:
            continue
        divisors = [d for d in range(1, other + 1) if other % d == 0]
        near.add(max((d for d in divisors if d <= number), default=1))
        near.add(min((d for d in divisors if d >= number), default=other))
        near.add(max(other, (number // other) * other))
        near.add(-(-number // other) * other)
    if number > 0:
        power = 1 << (number.bit_length() - 1)
        near.update((power, power * 2, 1))
    near.discard(number)
    return [str(n) for n in sorted(near, key=lambda n: (abs(n - number), n)) if n > 0][:4]


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None
