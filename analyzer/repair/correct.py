"""Stage 5: propose a corrected launch command for each finding.

The command comes, in order, from the user (`--command`), from a launch line
found in the input, or is rebuilt from the `server_args` record. A rule's named
fix proposes edits; the repair search (repair.py) applies them, checks the result
against every prediction the project can make and repairs it again until clean,
also trying edits of the flags the failing check reads. A command any check
predicts to fail is not offered; the next-best clean ones are alternatives. With
`--verify`, SGLang itself judges them (verify_incidents).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from analyzer.core.model import Alternative, Edit, Finding, Incident, Line
from analyzer.repair.fix_registry import FIXES
from analyzer.repair.fixes import FixContext, FixPlan
from analyzer.rulebook.vocabulary import Rule
from analyzer.sglang.catalog import FlagCatalog
from analyzer.sglang.launch_command import LaunchCommand, find_launch_command, parse_launch_command
from analyzer.sglang.log_format import reconstruct_command

if TYPE_CHECKING:
    from analyzer.repair.search import Repaired


# `sglang serve --model-type X` picks the serving backend before SGLang's LLM parser sees the
# flags (sglang 0.5.23 cli/serve.py _extract_model_type_override); any other than the LLM
# server (diffusion, a plugin's) parses flags the catalog does not hold
MODEL_TYPE_FLAG = "--model-type"
LLM_BACKENDS = ("llm", "auto")


@dataclass
class CommandChoice:
    """The launch command an incident is judged against, and where it came from."""

    command: LaunchCommand
    source: str


@dataclass
class Proposal:
    """A finding's corrected command (or why there is none)."""

    corrected: str | None
    edits: list
    notes: list[str]
    flags: list[str] = field(default_factory=list)
    alternatives: list[Alternative] = field(default_factory=list)
    outside_command: bool = False  # the fix's data: no command edit fixes it


def choose_command(
    user_command: str | None,
    log_commands: list[Line],
    server_args: dict[str, Any] | None,
    catalog: FlagCatalog,
    before_line: int | None = None,
    source_kind: str = "log",
) -> CommandChoice | None:
    """The best available launch command for an incident at `before_line`."""
    if user_command:
        parsed = parse_launch_command(user_command, catalog.takes_value)
        if parsed:
            return CommandChoice(parsed, "user")
    for line in reversed(log_commands):
        if before_line is not None and line.number > before_line:
            continue
        text = find_launch_command(line.body) or line.body
        parsed = parse_launch_command(text, catalog.takes_value)
        if parsed:
            return CommandChoice(parsed, source_kind)
    if server_args:
        text = reconstruct_command(server_args, catalog)
        parsed = parse_launch_command(text, catalog.takes_value)
        if parsed:
            return CommandChoice(parsed, "reconstructed")
    return None


def propose(
    finding: Finding,
    rule: Rule,
    choice: CommandChoice | None,
    catalog: FlagCatalog,
    server_args: dict[str, Any] | None,
) -> Proposal:
    """Run the rule's fix on the command, then the repair search; the best clean command.

    The search starts from the failing check too (its catalogued site), so a validation
    error whose rule has no fix of its own can still get a command.
    """
    if choice is None:
        return Proposal(None, [], [])
    backend = choice.command.get(MODEL_TYPE_FLAG)
    if backend and backend.lower() not in LLM_BACKENDS:
        note = f"no corrected command: `{MODEL_TYPE_FLAG} {backend}` serves with flags of its own"
        return Proposal(None, [], [note])
    # the repair search (predictions, condition checks, the error catalog): only for a command
    from analyzer.repair.search import failing_site, search

    plan = FixPlan()
    if rule.fix:
        plan = FIXES[rule.fix](finding, FixContext(choice.command, catalog, server_args))
    site = failing_site(finding, catalog)
    if site is not None:
        # the typed flags the failing condition reads are offending too (a bare assert names none)
        typed = {catalog.canonical(a.flag) for a in choice.command.arguments}
        read = [f for f in site.condition_flags if f in typed]
        plan.flags = [*plan.flags, *(f for f in read if f not in plan.flags)]
    # an argparse error the rule's fix has no edit for: the parser checks still know one
    if plan.outside_command:
        return Proposal(None, [], plan.notes, plan.flags, outside_command=True)
    if not plan.edits and site is None and rule.scope != "usage":
        return Proposal(None, [], plan.notes, plan.flags)
    outcome = search(choice.command, catalog, finding, plan, site)
    if not outcome.repaired:
        if not plan.edits:
            return Proposal(None, [], plan.notes, plan.flags)
        note = "no corrected command offered: " + "; ".join(outcome.problems or ["it fails again"])
        return Proposal(None, plan.edits, [*plan.notes, note], plan.flags)
    best, *others = [_inert(choice.command, r, catalog) for r in outcome.repaired]
    notes = [*plan.notes, *(n for n in outcome.repaired[0].notes if n not in plan.notes)]
    alternatives = [Alternative(text, edits) for text, edits in others if text != best[0]]
    return Proposal(best[0], best[1], notes, plan.flags, alternatives)


def _inert(
    command: LaunchCommand, repaired: Repaired, catalog: FlagCatalog
) -> tuple[str, list[Edit]]:
    """The repaired command rendered with shell expansions made inert, and its edits."""
    edits = [*repaired.edits, *_inert_edits(command, repaired.edits, catalog)]
    return command.apply(edits, catalog.canonical).render(), edits


SHELL_EXPANSION = ("$", "`")


def _inert_edits(command: LaunchCommand, edits: list[Edit], catalog: FlagCatalog) -> list[Edit]:
    """Re-set values holding `$`/backticks so they come out single-quoted.

    A command copied from a log may hold `$(...)` inside double quotes; pasted back into a
    shell it would run. Setting the same value again makes the renderer quote it inertly.
    """
    edited = {catalog.canonical(e.flag) or e.flag for e in edits}
    inert: list[Edit] = []
    for argument in command.arguments:
        flag = catalog.canonical(argument.flag) or argument.flag
        value = argument.value
        if value is None or flag in edited or not any(c in value for c in SHELL_EXPANSION):
            continue
        inert.append(Edit("set", argument.flag, value=value))
        edited.add(flag)
    return inert


def verify_incidents(incidents: list[Incident], catalogs: dict[str, str | None]) -> None:
    """SGLang's own verdict on each corrected command and its alternatives, in one SGLang
    process; the first that passes becomes the corrected command (the shown one is the
    best-ranked command SGLang accepts)."""
    from analyzer.sglang.verify import verify_commands

    wanted = {i.source: [] for i in incidents}
    for incident in incidents:
        for command in _candidates(incident):
            if command not in wanted[incident.source]:
                wanted[incident.source].append(command)
    verdicts = {}
    for source, commands in wanted.items():
        if commands:
            found = verify_commands(commands, catalog_version=catalogs.get(source))
            verdicts.update(zip(commands, found, strict=True))
    for incident in incidents:
        if incident.corrected_command is None:
            continue
        ranked = [
            Alternative(incident.corrected_command, incident.edits),
            *incident.alternatives,
        ]
        for option in ranked:
            option.verification = verdicts[option.command]
        best = next((o for o in ranked if o.verification.status == "pass"), ranked[0])
        incident.corrected_command, incident.edits = best.command, best.edits
        incident.verification = best.verification
        incident.alternatives = [o for o in ranked if o is not best]


def _candidates(incident: Incident) -> list[str]:
    if incident.corrected_command is None:
        return []
    return [incident.corrected_command, *(a.command for a in incident.alternatives)]
