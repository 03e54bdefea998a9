"""The post-mortem of a crash that has not happened: each problem's lines (what SGLang would
print) go through the analyzer with the command, so the pre-flight names the class, flags
and corrected command `loganalyze LOG` would name after the crash; then the corrected
command is checked again until no check refuses it."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

from analyzer.core.model import Edit, Incident
from analyzer.preflight.report import PreflightReport, Problem
from analyzer.sglang.catalog import FlagCatalog
from analyzer.sglang.catalog_check import validate
from analyzer.sglang.launch_command import LaunchCommand, parse_launch_command

ROUNDS = 4
UNKNOWN = ("unknown", "")

StaticCheck = Callable[[LaunchCommand, FlagCatalog, Path, Mapping[str, str]], list[Problem]]


def post_mortem(log: str, command: str, catalog: FlagCatalog) -> Incident | None:
    """The root-cause incident the analyzer finds in `log` for `command`."""
    from analyzer.pipeline import Options, analyze

    with tempfile.TemporaryDirectory(prefix="loganalyze-preflight-") as scratch:
        path = Path(scratch, "sglang.log")
        path.write_text(log, "utf-8")
        report = analyze(
            [str(path)], Options(command=command, sglang_version=catalog.version, redact=False)
        )
    fatal = [i for i in report.incidents if i.severity == "fatal"]
    return (fatal or report.incidents or [None])[0]


def classify(problem: Problem, command: LaunchCommand, catalog: FlagCatalog) -> Problem:
    """The post-mortem's class, flags, title and corrected command for the problem's lines;
    the check's own where the post-mortem has no answer."""
    if not problem.log:
        return problem
    incident = post_mortem(problem.log, command.render(), catalog)
    if incident is None or incident.rule_class in UNKNOWN:
        return problem
    problem.rule_class = incident.rule_class
    if incident.offending_flags:
        problem.flags = list(incident.offending_flags)
    problem.title = incident.title
    problem.explanation = incident.explanation
    problem.corrected = incident.corrected_command
    if incident.corrected_command:
        problem.edits = list(incident.edits)
    return problem


def corrected_command(
    report: PreflightReport,
    command: LaunchCommand,
    catalog: FlagCatalog,
    cwd: Path,
    env: Mapping[str, str],
    checks: StaticCheck,
) -> None:
    """Fix the first blocking problem, check again, fix the next, until nothing blocks.

    Only a command every check passes is offered; its edits are those of each round.
    """
    problems = [p for p in report.problems if p.blocking]
    if not problems:
        return
    current = command
    edits: list[Edit] = []
    for _ in range(ROUNDS):
        first = problems[0]
        text = first.corrected
        if text is None and first.edits:
            try:
                text = current.apply(first.edits, catalog.canonical).render()
            except ValueError as exc:
                report.notes.append(f"no corrected command offered: {exc}")
                return
        fixed = parse_launch_command(text, catalog.takes_value) if text else None
        if fixed is None or fixed.render() == current.render():
            if first.explanation and not first.edits:
                report.notes.append(f"no command edit fixes {first.rule_class}: {first.message}")
            return
        edits.extend(e for e in first.edits if e not in edits)
        current = fixed
        problems = [p for p in checks(current, catalog, cwd, env) if p.blocking]
        if not problems:
            if validate(current, catalog):
                return
            from analyzer.engine.redact import redact_text

            report.corrected = redact_text(current.render())
            report.edits = edits
            return
    report.notes.append("no corrected command offered: " + "; ".join(p.message for p in problems))
