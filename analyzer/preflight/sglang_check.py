"""SGLang's own verdict, where SGLang is installed: its parsing, resolution and checks in a
CPU-only subprocess (analyzer/sglang/verify.py), its output read by the post-mortem and
merged into the pre-flight's problems (a failure the checks already named is not repeated)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from analyzer.core.model import Edit
from analyzer.preflight.postmortem import post_mortem
from analyzer.preflight.report import Problem
from analyzer.sglang.catalog import FlagCatalog
from analyzer.sglang.launch_command import MODEL_PATH_FLAGS, LaunchCommand
from analyzer.sglang.verify import BatchRun, judge_run, run_batch, sglang_argv, sglang_python

SglangAnswer = tuple[str | None, BatchRun | None, str]  # version, its run, why none


def ask_sglang(
    commands: list[LaunchCommand],
    catalog: FlagCatalog,
    cwd: Path,
    python: str | None,
    timeout: float,
) -> list[SglangAnswer]:
    """SGLang's run of each command, all in one SGLang import (verify.run_batch)."""
    python = python or sglang_python()
    if python is None:
        return [(None, None, "sglang is not installed here")] * len(commands)
    argvs: list[list[str] | None] = []
    with tempfile.TemporaryDirectory(prefix="loganalyze-preflight-") as scratch:
        for index, command in enumerate(commands):
            folder = Path(scratch, str(index))
            folder.mkdir()
            try:
                argvs.append(sglang_argv(_absolute(command, catalog, cwd).render(), folder))
            except ValueError:
                argvs.append(None)
        runnable = [a for a in argvs if a is not None]
        version, runs = run_batch(runnable, python, timeout)
    answers = iter(runs)
    out: list[SglangAnswer] = []
    for argv in argvs:
        run = next(answers) if argv is not None else None
        why = "" if run is not None and version is not None else "sglang did not answer"
        out.append((version, run, why))
    return out


def sglang_problems(
    answer: SglangAnswer, command: LaunchCommand, catalog: FlagCatalog, found: list[Problem]
) -> tuple[list[Problem], dict[str, Any]]:
    """Problems SGLang's answer adds to `found`, and its verdict (status, version, message)."""
    version, run, why = answer
    if run is None or version is None:
        return [], {"status": "unavailable", "message": why}
    verdict = judge_run(run, version)
    answer_json = {"status": verdict.status, "version": verdict.sglang_version or version}
    answer_json["message"] = verdict.message
    if verdict.status != "fail":
        return [], answer_json
    incident = post_mortem(run.output, command.render(), catalog)
    rule_class = incident.rule_class if incident else "unknown"
    if any(p.blocking and p.rule_class == rule_class for p in found):
        return [], answer_json
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
    return [problem], answer_json


def _absolute(command: LaunchCommand, catalog: FlagCatalog, cwd: Path) -> LaunchCommand:
    """Model paths relative to `cwd` made absolute: the subprocess runs elsewhere."""
    edits = []
    for argument in command.arguments:
        flag = catalog.canonical(argument.flag)
        value = argument.value
        if flag in MODEL_PATH_FLAGS and value and not Path(value).is_absolute():
            if (cwd / value).exists():
                edits.append(Edit("set", flag, value=str((cwd / value).resolve())))
    return command.apply(edits, catalog.canonical) if edits else command
