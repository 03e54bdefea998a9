"""Run a composite action's steps the way a GitHub runner does, locally.

`run:` steps run in `bash --noprofile --norc -eo pipefail` (GitHub's `shell: bash`) in the
workspace, with GITHUB_OUTPUT (one file per step), GITHUB_STEP_SUMMARY, GITHUB_WORKSPACE,
RUNNER_TEMP and GITHUB_ACTIONS=true set. `${{ }}` expressions are substituted first, as GitHub
does. `uses:` steps cannot run here: they are skipped, their `with:` must resolve fully, and an
upload-artifact step's `path` must exist. Only the expressions this project uses are
understood (context paths, quoted strings, `==`, `!=`, `&&`); anything else is an error, so
a template using more fails its test instead of being half-understood.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
COMPARISON = re.compile(r"^(.+?)\s*(==|!=)\s*(.+)$")


@dataclass
class ActionRun:
    exit_code: int
    outputs: dict[str, str]
    stdout: str
    stderr: str
    summary: str
    ran: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    uses: list[tuple[str, dict[str, str]]] = field(default_factory=list)


class Context:
    """The expression contexts: github, runner, inputs, env, and the action's own steps."""

    def __init__(self, tree: dict[str, Any]):
        self.tree = tree

    def value(self, expr: str) -> str:
        expr = expr.strip()
        if "&&" in expr:
            return _flag(all(self.value(part) for part in expr.split("&&")))
        comparison = COMPARISON.match(expr)
        if comparison:
            left, operator, right = comparison.groups()
            same = self.value(left).lower() == self.value(right).lower()
            return _flag(same if operator == "==" else not same)
        if len(expr) >= 2 and expr[0] == expr[-1] == "'":
            return expr[1:-1].replace("''", "'")
        if not re.fullmatch(r"[A-Za-z_][\w-]*(\.[A-Za-z_][\w-]*)+", expr):
            raise ValueError(f"expression not understood by the test runner: {expr!r}")
        return self._lookup(expr.split("."))

    def _lookup(self, parts: list[str]) -> str:
        node: Any = self.tree
        for index, part in enumerate(parts):
            if not isinstance(node, dict):
                raise KeyError(".".join(parts))
            if part not in node:
                # GitHub gives '' for a step's missing output; any other unknown name is a typo.
                if parts[0] == "steps" and index >= 1:
                    return ""
                raise KeyError(f"unknown context value {'.'.join(parts)!r}")
            node = node[part]
        return "" if node is None else str(node)

    def substitute(self, text: str) -> str:
        return EXPRESSION.sub(lambda m: self.value(m.group(1)), text)

    def condition(self, text: str | None) -> bool:
        if text is None:
            return True
        inner = EXPRESSION.fullmatch(text.strip())
        value = self.value(inner.group(1) if inner else text)
        return value not in ("", "false", "0")


def _text(value: Any) -> str:
    """A `with:` value as the runner passes it: YAML booleans become `true` / `false`."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def _flag(value: bool) -> str:
    return "true" if value else ""


def read_outputs(path: Path) -> dict[str, str]:
    """Parse a GITHUB_OUTPUT file: `name=value` lines and `name<<DELIMITER` blocks."""
    outputs: dict[str, str] = {}
    lines = iter(path.read_text("utf-8").splitlines())
    for line in lines:
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            body = []
            for more in lines:
                if more == delimiter:
                    break
                body.append(more)
            outputs[name] = "\n".join(body)
        elif "=" in line:
            name, value = line.split("=", 1)
            outputs[name] = value
    return outputs


def resolve_inputs(action: dict[str, Any], given: dict[str, str]) -> dict[str, str]:
    declared = action.get("inputs") or {}
    unknown = set(given) - set(declared)
    if unknown:
        raise ValueError(f"inputs the action does not declare: {sorted(unknown)}")
    inputs = {}
    for name, spec in declared.items():
        if name in given:
            inputs[name] = given[name]
        elif spec.get("required") and "default" not in spec:
            raise ValueError(f"required input {name!r} not given")
        else:
            inputs[name] = str(spec.get("default", ""))
    return inputs


def run_action(
    action_file: Path,
    inputs: dict[str, str],
    workspace: Path,
    env: dict[str, str] | None = None,
    job_env: dict[str, str] | None = None,
) -> ActionRun:
    """Run the composite action in `action_file` as a step of a job in `workspace`."""
    action = yaml.safe_load(action_file.read_text("utf-8"))
    assert action["runs"]["using"] == "composite"
    temp = workspace.parent / f"{workspace.name}-runner-temp"
    temp.mkdir(exist_ok=True)
    summary = temp / "step_summary.md"
    summary.touch()
    base_env = {
        **os.environ,
        **(env or {}),
        **(job_env or {}),
        "GITHUB_ACTIONS": "true",
        "GITHUB_WORKSPACE": str(workspace),
        "GITHUB_ACTION_PATH": str(action_file.parent),
        "GITHUB_STEP_SUMMARY": str(summary),
        "RUNNER_TEMP": str(temp),
    }
    steps: dict[str, dict[str, Any]] = {}
    # The workflow evaluates the step's `with:` first, in its own contexts.
    workflow = Context({"env": dict(job_env or {}), "github": {"workspace": str(workspace)}})
    given = {name: workflow.substitute(_text(value)) for name, value in inputs.items()}
    context = Context(
        {
            "inputs": resolve_inputs(action, given),
            "github": {"action_path": str(action_file.parent), "workspace": str(workspace)},
            "runner": {"temp": str(temp)},
            "env": dict(job_env or {}),
            "steps": steps,
        }
    )
    result = ActionRun(0, {}, "", "", "")
    for number, step in enumerate(action["runs"]["steps"]):
        name = step.get("name") or step.get("id") or f"step {number}"
        if not context.condition(step.get("if")):
            result.skipped.append(name)
            continue
        if "uses" in step:
            result.uses.append((step["uses"], _check_uses(step, context)))
            result.skipped.append(name)
            continue
        code, outputs, out, err = _run_step(step, context, base_env, temp / f"output-{number}")
        result.ran.append(name)
        result.stdout += out
        result.stderr += err
        if "id" in step:
            steps[step["id"]] = {"outputs": outputs}
        if code != 0:
            result.exit_code = code
            break
    for name, spec in (action.get("outputs") or {}).items():
        result.outputs[name] = context.substitute(str(spec["value"]))
    result.summary = summary.read_text("utf-8")
    return result


def _check_uses(step: dict[str, Any], context: Context) -> dict[str, str]:
    """A skipped `uses:` step: every `with:` value resolves; an artifact path exists."""
    resolved = {
        key: context.substitute(str(value)) for key, value in (step.get("with") or {}).items()
    }
    if step["uses"].startswith("actions/upload-artifact@"):
        assert resolved.get("name"), "upload-artifact without a name"
        paths = [p.strip() for p in resolved.get("path", "").splitlines() if p.strip()]
        assert paths, "upload-artifact without a path"
        for path in paths:
            assert Path(path).exists(), f"upload-artifact path {path!r} does not exist"
    return resolved


def _run_step(
    step: dict[str, Any], context: Context, base_env: dict[str, str], output: Path
) -> tuple[int, dict[str, str], str, str]:
    assert step.get("shell") == "bash", "composite run steps must say `shell: bash`"
    output.write_text("", encoding="utf-8")
    step_env = {
        key: context.substitute(str(value)) for key, value in (step.get("env") or {}).items()
    }
    script = output.with_suffix(".sh")
    script.write_text(context.substitute(step["run"]), encoding="utf-8")
    done = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
        cwd=base_env["GITHUB_WORKSPACE"],
        env={**base_env, **step_env, "GITHUB_OUTPUT": str(output)},
        capture_output=True,
        text=True,
    )
    return done.returncode, read_outputs(output), done.stdout, done.stderr
