"""Pre-flight: what would make a launch fail, found before anything starts.

The costly failures are the slow ones: a flag typo that SGLang rejects only after its imports,
an incomplete speculative setting found in argument resolution, a model path that does not
exist, GPUs that other processes already fill. Each check here predicts one of them in well
under a second. Flag problems are phrased as SGLang's argparse would report them and go
through the same fixes (analyzer/repair/fixes.py) as a post-mortem of the real error, so the
corrected command offered here is the one `loganalyze LOG` would offer after the crash.
"""

from __future__ import annotations

import importlib
import os
import shlex
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from analyzer.core.model import Edit
from analyzer.engine.redact import redact_text
from analyzer.formats.terminal import CONTROL
from analyzer.repair.fixes import FixPlan
from analyzer.repair.predict import flag_problems, speculative_problems, typed_values
from analyzer.sglang.catalog import FlagCatalog
from analyzer.sglang.catalog_check import validate
from analyzer.sglang.launch_command import LaunchCommand, parse_launch_command

PATH_FLAGS = ("--model-path", "--speculative-draft-model-path", "--tokenizer-path")
NVIDIA_SMI_TIMEOUT = 5.0
UNSEEN_MEMORY_MIB = 1024  # memory in use by no visible process: another container's


@dataclass(frozen=True)
class Problem:
    """One finding of the pre-flight: `blocking` ones stop the launch."""

    check: str  # flags | speculative | paths | log | gpu | command
    message: str
    blocking: bool


@dataclass
class Preflight:
    """The pre-flight verdict on one command, with the corrected command when one exists."""

    command: str
    problems: list[Problem] = field(default_factory=list)
    edits: list[Edit] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    corrected: str | None = None
    elapsed: float = 0.0

    @property
    def refused(self) -> bool:
        return any(p.blocking for p in self.problems)


@dataclass(frozen=True)
class GpuApp:
    gpu: str  # the GPU's uuid
    pid: int
    name: str
    used_mib: int


@dataclass(frozen=True)
class Gpu:
    index: str
    uuid: str
    used_mib: int
    total_mib: int


GpuProbe = Callable[[Mapping[str, str]], tuple[list[Gpu], list[GpuApp]] | None]


def run_preflight(
    argv: list[str],
    log_path: Path,
    catalog: FlagCatalog,
    env: Mapping[str, str] | None = None,
    gpu_probe: GpuProbe | None = None,
) -> Preflight:
    """Check a launch before it starts: flags, speculative settings, paths, log folder, GPUs."""
    started = time.perf_counter()
    env = dict(os.environ if env is None else env)
    text = shlex.join(argv)
    result = Preflight(redact_text(text))
    result.problems.extend(_log_folder(log_path))
    command = parse_launch_command(text, catalog.takes_value)
    if command is None:
        result.notes.append("not an SGLang launch command: its flags were not checked")
    else:
        env.update(command.env)
        plans = _flag_plans(command, catalog, result.problems)
        plans += _speculative_plans(command, catalog, result.problems)
        result.problems.extend(_paths(command, catalog))
        _correct(result, command, catalog, plans)
        result.problems.extend(_command_checks(command, catalog))
    result.problems.extend(_gpus(command, catalog, env, gpu_probe or query_gpus))
    result.elapsed = time.perf_counter() - started
    return result


# ---- flags and speculative settings (analyzer/repair/predict.py) ------------------------


def _flag_plans(
    command: LaunchCommand, catalog: FlagCatalog, problems: list[Problem]
) -> list[FixPlan]:
    """Every argument argparse would reject, as argparse would say it, through its fix."""
    found = flag_problems(command, catalog)
    problems.extend(Problem("flags", p.message, True) for p in found)
    return [p.plan for p in found]


def _speculative_plans(
    command: LaunchCommand, catalog: FlagCatalog, problems: list[Problem]
) -> list[FixPlan]:
    """The algorithm's spelling and the steps/topk/draft-tokens trio SGLang needs complete."""
    found = speculative_problems(command, catalog)
    problems.extend(Problem("speculative", p.message, True) for p in found)
    return [p.plan for p in found]


# ---- the corrected command ---------------------------------------------------------------


def _correct(
    result: Preflight, command: LaunchCommand, catalog: FlagCatalog, plans: list[FixPlan]
) -> None:
    """All plans' edits applied at once, kept only if SGLang's parser would accept the result."""
    for plan in plans:
        result.notes.extend(n for n in plan.notes if n not in result.notes)
        result.edits.extend(e for e in plan.edits if e not in result.edits)
    if not result.edits:
        return
    try:
        corrected = command.apply(result.edits, catalog.canonical)
    except ValueError as exc:
        result.notes.append(f"no corrected command offered: {exc}")
        return
    problems = validate(corrected, catalog)
    if problems:
        result.notes.append("no corrected command offered: " + "; ".join(problems))
        return
    result.corrected = redact_text(corrected.render())


# ---- paths -------------------------------------------------------------------------------


def _log_folder(log_path: Path) -> list[Problem]:
    folder = log_path.parent if str(log_path.parent) else Path(".")
    if not folder.is_dir():
        return [Problem("log", f"the log folder {folder} does not exist", True)]
    if not os.access(folder, os.W_OK):
        return [Problem("log", f"the log folder {folder} is not writable", True)]
    return []


def _paths(command: LaunchCommand, catalog: FlagCatalog) -> list[Problem]:
    """Local model/draft/tokenizer paths that do not exist (hub ids `org/name` are left alone)."""
    problems = []
    values = typed_values(command, catalog)
    for flag in PATH_FLAGS:
        value = values.get(flag)
        if not value:
            continue
        path = Path(value).expanduser()
        if path.is_dir() and not (path / "config.json").is_file() and flag != "--tokenizer-path":
            problems.append(
                Problem("paths", f"{flag} {value}: the folder has no config.json", False)
            )
        elif not path.exists() and _looks_local(value):
            problems.append(Problem("paths", f"{flag} {value}: no such file or folder", True))
    return problems


def _looks_local(value: str) -> bool:
    """A path, not a Hugging Face id: absolute, ./ ../ ~, or more than one `/`."""
    return value.startswith(("/", "./", "../", "~")) or value.count("/") > 1


# ---- GPUs --------------------------------------------------------------------------------


def query_gpus(env: Mapping[str, str]) -> tuple[list[Gpu], list[GpuApp]] | None:
    """GPUs and compute processes from nvidia-smi; None when there is no nvidia-smi."""
    smi = shutil.which("nvidia-smi", path=env.get("PATH"))
    if smi is None:
        return None
    gpu_rows = _smi_rows(smi, "--query-gpu=index,uuid,memory.used,memory.total", env)
    app_rows = _smi_rows(smi, "--query-compute-apps=gpu_uuid,pid,process_name,used_memory", env)
    gpus = [Gpu(r[0], r[1], _mib(r[2]), _mib(r[3])) for r in gpu_rows if len(r) == 4]
    apps = [GpuApp(r[0], _mib(r[1]), r[2], _mib(r[3])) for r in app_rows if len(r) == 4]
    return gpus, apps


def _smi_rows(smi: str, query: str, env: Mapping[str, str]) -> list[list[str]]:
    done = subprocess.run(
        [smi, query, "--format=csv,noheader,nounits"],
        capture_output=True,
        text=True,
        timeout=NVIDIA_SMI_TIMEOUT,
        env=dict(env),
        check=False,
    )
    if done.returncode != 0:
        return []
    return [[cell.strip() for cell in row.split(",")] for row in done.stdout.splitlines() if row]


def _mib(text: str) -> int:
    try:
        return int(float(text))
    except ValueError:
        return 0  # [N/A] or [Not Supported]


def _gpus(
    command: LaunchCommand | None, catalog: FlagCatalog, env: Mapping[str, str], probe: GpuProbe
) -> list[Problem]:
    """Memory other processes already hold on the GPUs the server will see.

    Blocking only when it cannot fit: SGLang sizes its static pool as a fraction of the total,
    so others holding more than (1 - --mem-fraction-static) of a GPU ends in an OOM.
    """
    try:
        found = probe(env)
    except (OSError, subprocess.SubprocessError) as exc:
        return [Problem("gpu", f"nvidia-smi did not answer ({exc}); GPUs not checked", False)]
    if found is None:
        return []
    gpus, apps = found
    visible = _visible(gpus, env.get("CUDA_VISIBLE_DEVICES"))
    fraction = _fraction(command, catalog)
    problems = []
    for gpu in visible:
        holders = [a for a in apps if a.gpu == gpu.uuid]
        held = sum(a.used_mib for a in holders)
        if holders:
            who = ", ".join(f"pid {a.pid} {a.name} ({a.used_mib} MiB)" for a in holders)
            room = fraction is not None and held > (1 - fraction) * gpu.total_mib
            limit = f"; --mem-fraction-static {fraction:g} cannot fit" if room else ""
            message = f"GPU {gpu.index}: {held} of {gpu.total_mib} MiB held by {who}{limit}"
            problems.append(Problem("gpu", message, room))
        elif gpu.used_mib >= UNSEEN_MEMORY_MIB:
            message = (
                f"GPU {gpu.index}: {gpu.used_mib} of {gpu.total_mib} MiB in use by processes "
                "nvidia-smi cannot see (another container?)"
            )
            problems.append(Problem("gpu", message, False))
    return problems


def _visible(gpus: list[Gpu], devices: str | None) -> list[Gpu]:
    """The GPUs CUDA_VISIBLE_DEVICES lets the server see (indices or uuids)."""
    if devices is None:
        return gpus
    wanted = [d.strip() for d in devices.split(",") if d.strip()]
    return [g for g in gpus if g.index in wanted or any(g.uuid.startswith(w) for w in wanted)]


def _fraction(command: LaunchCommand | None, catalog: FlagCatalog) -> float | None:
    if command is None:
        return None
    try:
        return float(typed_values(command, catalog).get("--mem-fraction-static", ""))
    except ValueError:
        return None


# ---- silent misconfigurations ------------------------------------------------------------


def _command_checks(command: LaunchCommand, catalog: FlagCatalog) -> list[Problem]:
    """Warnings from analyzer/rulebook/command_checks.py, where that module exists."""
    try:
        module = importlib.import_module("analyzer.rulebook.command_checks")
    except ImportError:
        return []
    check = getattr(module, "check_command", None)
    if check is None:
        return []
    try:
        found = check(command, catalog, None, None) or []
    except Exception as exc:  # noqa: BLE001 - a check's bug must not stop the launch
        return [Problem("command", f"the command checks failed: {exc!r}", False)]
    return [Problem("command", redact_text(_describe(item)), False) for item in found]


def _describe(item: object) -> str:
    title = getattr(item, "title", None)
    return str(title) if title else str(item)


# ---- rendering ---------------------------------------------------------------------------


def render_preflight(result: Preflight) -> str:
    """Plain text: the problems, then the corrected command (shell-quoted by construction)."""
    verdict = "refused" if result.refused else "passed"
    out = [f"loganalyze pre-flight: {verdict} ({result.elapsed * 1000:.0f} ms)"]
    for problem in result.problems:
        mark = "ERROR" if problem.blocking else "warning"
        out.append(f"  {mark} [{problem.check}] {_clean(problem.message)}")
    for note in result.notes:
        out.append(f"  - {_clean(note)}")
    if result.refused:
        out.append("  command:")
        out.append(f"    {result.command}")
        if result.corrected:
            out.append("  corrected command:")
            out.append(f"    {result.corrected}")
            out.append("  edits: " + "; ".join(_edit_text(e) for e in result.edits))
    return "\n".join(out) + "\n"


def _clean(text: str) -> str:
    return CONTROL.sub("?", text)


def _edit_text(edit: Edit) -> str:
    if edit.op == "rename":
        return f"rename {edit.flag} -> {edit.to}"
    if edit.op == "remove":
        return f"remove {edit.flag}"
    return f"{edit.op} {edit.flag}" + (f" {edit.value}" if edit.value is not None else "")
