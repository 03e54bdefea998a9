"""SGLang's own verdict, where SGLang is installed: its parsing, resolution and checks in a
CPU-only subprocess (analyzer/sglang/verify.py), its output read by the post-mortem and
merged into the pre-flight's problems (a failure the checks already named is not repeated)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from analyzer.core.model import Edit
from analyzer.preflight.folders import PATH_FLAGS
from analyzer.preflight.postmortem import post_mortem
from analyzer.preflight.report import Problem
from analyzer.sglang.catalog import FlagCatalog
from analyzer.sglang.launch_command import LaunchCommand
from analyzer.sglang.verify import judge_run, run_batch, sglang_argv, sglang_python


def sglang_problems(
    command: LaunchCommand,
    catalog: FlagCatalog,
    cwd: Path,
    found: list[Problem],
    python: str | None,
    timeout: float,
) -> tuple[list[Problem], dict[str, Any]]:
    """Problems SGLang adds to `found`, and its verdict (status, version, message)."""
    python = python or sglang_python()
    if python is None:
        return [], {"status": "unavailable", "message": "sglang is not installed here"}
    text = _absolute(command, catalog, cwd).render()
    with tempfile.TemporaryDirectory(prefix="loganalyze-preflight-") as scratch:
        try:
            argv = sglang_argv(text, Path(scratch))
        except ValueError as exc:
            return [], {"status": "unavailable", "message": str(exc)}
        version, runs = run_batch([argv], python, timeout)
    run = runs[0]
    if run is None or version is None:
        return [], {"status": "unavailable", "message": "sglang did not answer"}
    verdict = judge_run(run, version)
    answer = {"status": verdict.status, "version": verdict.sglang_version or version}
    answer["message"] = verdict.message
    if verdict.status != "fail":
        return [], answer
    incident = post_mortem(run.output, command.render(), catalog)
    rule_class = incident.rule_class if incident else "unknown"
    if any(p.blocking and p.rule_class == rule_class for p in found):
        return [], answer
    problem = Problem(
        "sglang",
        rule_class,
        list(incident.offending_flags) if incident else [],
        f"sglang {version} refuses it: {verdict.message}",
        True,
        title=incident.title if incident else "",
        explanation=incident.explanation if incident else "",
        corrected=incident.corrected_command if incident else None,
        edits=list(incident.edits) if incident and incident.corrected_command else [],
    )
    return [problem], answer


def _absolute(command: LaunchCommand, catalog: FlagCatalog, cwd: Path) -> LaunchCommand:
    """Model paths relative to `cwd` made absolute: the subprocess runs elsewhere."""
    edits = []
    for argument in command.arguments:
        flag = catalog.canonical(argument.flag)
        value = argument.value
        if flag in PATH_FLAGS and value and not Path(value).is_absolute():
            if (cwd / value).exists():
                edits.append(Edit("set", flag, value=str((cwd / value).resolve())))
    return command.apply(edits, catalog.canonical) if edits else command
