"""Stage 5: propose a corrected launch command for each finding.

The command comes, in order, from the user (`--command`), from a launch line
found in the input, or is rebuilt from the `server_args` record. A rule's named
fix proposes edits; they are applied to the parsed command and the result is
checked against the flag catalog. A command that fails the check is not offered.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from analyzer.core.model import Edit, Finding, Line
from analyzer.rulebook.fixes import FixContext
from analyzer.rulebook.registry import FIXES
from analyzer.rulebook.vocabulary import Rule
from analyzer.sglang.catalog import FlagCatalog
from analyzer.sglang.catalog_check import validate
from analyzer.sglang.launch_command import LaunchCommand, find_launch_command, parse_launch_command
from analyzer.sglang.log_format import reconstruct_command


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
    """Run the rule's fix on the command, apply its edits and validate the result."""
    if not rule.fix or choice is None:
        return Proposal(None, [], [])
    plan = FIXES[rule.fix](finding, FixContext(choice.command, catalog, server_args))
    if not plan.edits:
        return Proposal(None, [], plan.notes, plan.flags)
    edits = [*plan.edits, *_inert_edits(choice.command, plan.edits, catalog)]
    corrected = choice.command.apply(edits, catalog.canonical)
    problems = validate(corrected, catalog)
    if problems:
        note = "no corrected command offered: " + "; ".join(problems)
        return Proposal(None, edits, [*plan.notes, note], plan.flags)
    return Proposal(corrected.render(), edits, plan.notes, plan.flags)


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


