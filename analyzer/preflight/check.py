"""The pre-flight: what would make a launch fail, found before anything starts, in one order
for `loganalyze run`, `loganalyze verify` and the GitHub Action's check step.

1. the command: the flag catalog, the speculative trio and every error-catalog condition
   its values decide (analyzer/repair/predict.py and conditions.py, as the repair search
   reads them);
2. the model folders it names (folders.py);
3. where SGLang is installed, SGLang's own parsing and resolution in a CPU-only subprocess
   (analyzer/sglang/verify.py), its verdict merged;
4. GPUs other processes hold (gpus.py).

Each problem carries the lines SGLang would print for it; the post-mortem (postmortem.py)
classes them, so a refusal here names the class, flags and corrected command that
`loganalyze LOG` would name after the crash.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path

from analyzer.engine.redact import redact_text
from analyzer.preflight.commands import command_problems, typed_values
from analyzer.preflight.folders import Folders, folder_problems
from analyzer.preflight.gpus import GpuProbe, gpu_problems, query_gpus
from analyzer.preflight.postmortem import classify, corrected_command
from analyzer.preflight.report import PreflightReport, Problem
from analyzer.preflight.sglang_check import ask_sglang, sglang_problems
from analyzer.repair.search import error_catalog
from analyzer.sglang.catalog import FlagCatalog, load_catalog
from analyzer.sglang.launch_command import LaunchCommand, parse_launch_command
from analyzer.sglang.model_registry import load_model_registry

REMOTE_WRAPPERS = ("ssh",)
REMOTE_NOTE = "runs over ssh: its model folders and GPUs are not on this machine, not checked"


def preflight(
    command: str,
    cwd: Path | None = None,
    use_sglang: bool = True,
    *,
    sglang_version: str | None = None,
    env: Mapping[str, str] | None = None,
    gpu_probe: GpuProbe | None = None,
    python: str | None = None,
    timeout: float = 120.0,
) -> PreflightReport:
    """Check one launch command (shell text) before it runs; relative paths from `cwd`.

    Raises analyzer.sglang.catalog.CatalogError for an unknown `sglang_version`.
    """
    return preflight_many(
        [command],
        cwd,
        use_sglang,
        sglang_version=sglang_version,
        env=env,
        gpu_probe=gpu_probe,
        python=python,
        timeout=timeout,
    )[0]


def preflight_many(
    commands: list[str],
    cwd: Path | None = None,
    use_sglang: bool = True,
    *,
    sglang_version: str | None = None,
    env: Mapping[str, str] | None = None,
    gpu_probe: GpuProbe | None = None,
    python: str | None = None,
    timeout: float = 120.0,
) -> list[PreflightReport]:
    """preflight() of many commands at the cost of one SGLang import and one GPU query."""
    started = time.perf_counter()
    catalog = load_catalog(sglang_version)
    base = cwd or Path.cwd()
    environment = dict(os.environ if env is None else env)
    gpus = gpu_probe or query_gpus
    reports = []
    parsed_all = []
    for command in commands:
        report = PreflightReport(redact_text(command), catalog.version)
        parsed = parse_launch_command(command, catalog.takes_value)
        if parsed is None:
            report.notes.append("not an SGLang launch command: its flags were not checked")
        else:
            own = {**environment, **parsed.env}
            report.problems.extend(static_problems(parsed, catalog, base, own))
            if runs_elsewhere(parsed):
                report.notes.append(REMOTE_NOTE)
        reports.append(report)
        parsed_all.append(parsed)
    launches = [p for p in parsed_all if p is not None]
    answers = iter(ask_sglang(launches, catalog, base, python, timeout) if use_sglang else [])
    for report, parsed in zip(reports, parsed_all, strict=True):
        values: dict[str, str] = {}
        own = dict(environment)
        if parsed is not None:
            own.update(parsed.env)
            values = typed_values(parsed, catalog)
            if use_sglang:
                found, report.sglang = sglang_problems(
                    next(answers), parsed, catalog, report.problems
                )
                report.problems.extend(found)
            else:
                report.sglang = {"status": "skipped"}
            corrected_command(report, parsed, catalog, base, own, static_problems)
        if parsed is None or not runs_elsewhere(parsed):
            report.problems.extend(gpu_problems(values, own, gpus))
        report.elapsed = time.perf_counter() - started
    return reports


def static_problems(
    command: LaunchCommand, catalog: FlagCatalog, cwd: Path, env: Mapping[str, str]
) -> list[Problem]:
    """The checks that read only the command and its folders, classed by the post-mortem."""
    problems = command_problems(command, catalog)
    values = typed_values(command, catalog)
    registry = load_model_registry(catalog.version)
    if not runs_elsewhere(command):
        folders = Folders(values, cwd, env, registry, error_catalog(catalog))
        problems.extend(folder_problems(folders))
    return [classify(p, command, catalog) for p in problems]


def runs_elsewhere(command: LaunchCommand) -> bool:
    """A launch wrapped in `ssh host '...'` runs on another machine: its model folders and
    GPUs are not the ones here."""
    return any(w in REMOTE_WRAPPERS for w in command.wrappers)


__all__ = ["preflight", "preflight_many", "runs_elsewhere", "static_problems"]
