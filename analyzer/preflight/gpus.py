"""GPU occupancy before a launch: memory other processes already hold on the GPUs the server
will see (nvidia-smi), named as the `oom` it would end in when it cannot fit."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from analyzer.preflight.report import Problem

NVIDIA_SMI_TIMEOUT = 5.0
UNSEEN_MEMORY_MIB = 1024  # memory in use by no visible process: another container's


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


def gpu_problems(
    values: Mapping[str, str], env: Mapping[str, str], probe: GpuProbe
) -> list[Problem]:
    """Memory other processes already hold on the GPUs the server will see.

    Blocking only when it cannot fit: SGLang sizes its static pool as a fraction of the total,
    so others holding more than (1 - --mem-fraction-static) of a GPU ends in an OOM.
    """
    try:
        found = probe(env)
    except (OSError, subprocess.SubprocessError) as exc:
        message = f"nvidia-smi did not answer ({exc}); GPUs not checked"
        return [Problem("gpu", "oom", [], message, False)]
    if found is None:
        return []
    gpus, apps = found
    visible = _visible(gpus, env.get("CUDA_VISIBLE_DEVICES"))
    fraction = _fraction(values.get("--mem-fraction-static"))
    problems = []
    for gpu in visible:
        holders = [a for a in apps if a.gpu == gpu.uuid]
        held = sum(a.used_mib for a in holders)
        if holders:
            who = ", ".join(f"pid {a.pid} {a.name} ({a.used_mib} MiB)" for a in holders)
            room = fraction is not None and held > (1 - fraction) * gpu.total_mib
            limit = f"; --mem-fraction-static {fraction:g} cannot fit" if room else ""
            message = f"GPU {gpu.index}: {held} of {gpu.total_mib} MiB held by {who}{limit}"
            processes = [
                {"gpu": gpu.index, "pid": a.pid, "name": a.name, "used_mib": a.used_mib}
                for a in holders
            ]
            flags = ["--mem-fraction-static"] if room else []
            problems.append(
                Problem("gpu", "oom", flags, message, room, title=_TITLE, processes=processes)
            )
        elif gpu.used_mib >= UNSEEN_MEMORY_MIB:
            message = (
                f"GPU {gpu.index}: {gpu.used_mib} of {gpu.total_mib} MiB in use by processes "
                "nvidia-smi cannot see (another container?)"
            )
            problems.append(Problem("gpu", "oom", [], message, False, title=_TITLE))
    return problems


_TITLE = "GPU memory is already held by other processes"


def _visible(gpus: list[Gpu], devices: str | None) -> list[Gpu]:
    """The GPUs CUDA_VISIBLE_DEVICES lets the server see (indices or uuids)."""
    if devices is None:
        return gpus
    wanted = [d.strip() for d in devices.split(",") if d.strip()]
    return [g for g in gpus if g.index in wanted or any(g.uuid.startswith(w) for w in wanted)]


def _fraction(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None
