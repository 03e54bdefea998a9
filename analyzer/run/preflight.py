"""`loganalyze run`'s pre-flight: the one of analyzer/preflight (the command, its model
folders, SGLang's own check where it is installed, GPUs), plus the log folder the run
writes to."""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from pathlib import Path

from analyzer.preflight import PreflightReport, Problem, preflight
from analyzer.preflight import render_text as render_preflight
from analyzer.preflight.gpus import GpuProbe
from analyzer.sglang.catalog import FlagCatalog
from analyzer.sglang.verify import PYTHON_ENV

__all__ = ["log_folder_problems", "render_preflight", "run_preflight"]


def run_preflight(
    argv: list[str],
    log_path: Path,
    catalog: FlagCatalog,
    env: Mapping[str, str] | None = None,
    gpu_probe: GpuProbe | None = None,
) -> PreflightReport:
    """The pre-flight of `argv` run here; SGLang's check when $LOGANALYZE_SGLANG_PYTHON (in
    `env`, default ours) names its Python or ours imports sglang."""
    env = dict(os.environ if env is None else env)
    python = env.get(PYTHON_ENV)
    report = preflight(
        shlex.join(argv),
        None,
        use_sglang=python is not None or _sglang_here(),
        sglang_version=catalog.version,
        env=env,
        gpu_probe=gpu_probe,
        python=python,
    )
    report.problems[:0] = log_folder_problems(log_path)
    return report


def _sglang_here() -> bool:
    import importlib.util

    return importlib.util.find_spec("sglang") is not None


def log_folder_problems(log_path: Path) -> list[Problem]:
    """The log folder a launch writes to: it must exist and be writable."""
    folder = log_path.parent if str(log_path.parent) else Path(".")
    if not folder.is_dir():
        return [Problem("log", "environment", [], f"the log folder {folder} does not exist", True)]
    if not os.access(folder, os.W_OK):
        message = f"the log folder {folder} is not writable"
        return [Problem("log", "environment", [], message, True)]
    return []
