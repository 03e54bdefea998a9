"""Run a GitLab CI job locally the way a shell runner does.

`extends:` is merged as GitLab merges it (hashes deeply, anything else replaced), variables
are expanded (`$NAME`, `${NAME}`) and exported, `before_script` + `script` run as one POSIX
`sh -e` script in the project folder, and `after_script` runs after it in a shell of its own
with CI_JOB_STATUS set, its exit code ignored (as GitLab ignores it).
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

VARIABLE = re.compile(r"\$(?:\{(\w+)\}|(\w+))")


@dataclass
class JobRun:
    status: str  # "success" or "failed", as CI_JOB_STATUS says it
    exit_code: int
    output: str
    after_output: str


def load(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text("utf-8"))


def merge(base: Any, override: Any) -> Any:
    if isinstance(base, dict) and isinstance(override, dict):
        merged = dict(base)
        for key, value in override.items():
            merged[key] = merge(base[key], value) if key in base else value
        return merged
    return override


def resolve(config: dict[str, Any], name: str) -> dict[str, Any]:
    """The job `name` with its `extends:` chain merged in, as GitLab resolves it."""
    job = config[name]
    parents = job.get("extends", [])
    parents = [parents] if isinstance(parents, str) else parents
    merged: dict[str, Any] = {}
    for parent in parents:
        merged = merge(merged, resolve(config, parent))
    merged = merge(merged, {k: v for k, v in job.items() if k != "extends"})
    return merged


def _lines(commands: Any) -> list[str]:
    """A script list, nested lists flattened (what YAML anchors of lists produce)."""
    if commands is None:
        return []
    if isinstance(commands, str):
        return [commands]
    return [line for item in commands for line in _lines(item)]


def expand(variables: dict[str, Any], base: dict[str, str]) -> dict[str, str]:
    """Variable values with `$NAME` references expanded, in any order (as GitLab does)."""
    values = {n: str(v["value"] if isinstance(v, dict) else v) for n, v in variables.items()}
    for _ in range(10):  # references to references, a few levels deep
        known = {**base, **values}
        values = {
            n: VARIABLE.sub(lambda m, k=known: k.get(m.group(1) or m.group(2), ""), v)
            for n, v in values.items()
        }
    return values


def run_job(
    job: dict[str, Any],
    project_dir: Path,
    variables: dict[str, str] | None = None,
    global_variables: dict[str, Any] | None = None,
) -> JobRun:
    """Run a resolved job in `project_dir`; `variables` are set last (a pipeline's own)."""
    base = {**os.environ, "CI": "true", "CI_PROJECT_DIR": str(project_dir)}
    env = {**base, **expand(global_variables or {}, base)}
    env.update(expand(job.get("variables") or {}, env))
    env.update(variables or {})
    main = _lines(job.get("before_script")) + _lines(job.get("script"))
    code, output = _sh(main, project_dir, env)
    status = "success" if code == 0 else "failed"
    after_output = ""
    if job.get("after_script"):
        after_env = {**env, "CI_JOB_STATUS": status}
        _, after_output = _sh(_lines(job["after_script"]), project_dir, after_env)
    return JobRun(status, code, output, after_output)


def _sh(lines: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, str]:
    if not lines:
        return 0, ""
    done = subprocess.run(
        ["sh", "-e", "-c", "\n".join(lines)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
    )
    return done.returncode, done.stdout + done.stderr
