"""The GitHub Action (action.yml) and the GitLab CI template, run the way their runners do.

The workflows and jobs come from docs/ci.md itself, so the documented YAML is what is tested:
the action's `run:` steps execute with tests/action_runner.py, the GitLab job's script with
tests/gitlab_runner.py, on a failing real fixture and on a healthy one. The launch step that
would write the log is replaced by copying the fixture to where the documented step reads it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests import gitlab_runner
from tests.action_runner import run_action
from tests.fixture_cases import ROOT, fixture_cases

ACTION = ROOT / "action.yml"
GITLAB_TEMPLATE = ROOT / "ci" / "gitlab" / "loganalyze.gitlab-ci.yml"
DOCS = ROOT / "docs" / "ci.md"
CASES = {c.id: c for c in fixture_cases()}
FAILING = CASES["real/unrecognized_num_speculative_tokens"]
HEALTHY = CASES["negative/healthy_speculative_eagle3"]
DEPRECATED = CASES["real/intent_deprecated_disable_cuda_graph"]  # its first lines: a warning
# The loganalyze of this test run comes first on PATH: the runner's `python3`.
RUNNER_ENV = {"PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]}


def doc_blocks(section: str) -> list[str]:
    """The ```yaml blocks of one `## section` of docs/ci.md."""
    text = DOCS.read_text("utf-8")
    body = text.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```yaml\n(.*?)```", body, re.S)


def action_step(workflow: str) -> tuple[dict, dict]:
    """The job env and the step using loganalyze's action, from a documented workflow."""
    jobs = yaml.safe_load(workflow)["jobs"]
    for job in jobs.values():
        for step in job["steps"]:
            if step.get("uses", "").startswith(("./", "owner/loganalyze@")):
                return job.get("env", {}), step
    raise AssertionError("no step uses the loganalyze action")


def workspace_with(tmp_path: Path, case, name: str = "logs/server.log") -> Path:
    workspace = tmp_path / "workspace"
    (workspace / name).parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(case.input, workspace / name)
    return workspace


# ---- the action, from the documented workflows ---------------------------------------------


def test_documented_workflow_reports_a_failed_launch(tmp_path):
    job_env, step = action_step(doc_blocks("GitHub Actions")[0])
    assert step["uses"] == "./" and step["if"] == "failure()"
    workspace = workspace_with(tmp_path, FAILING)
    run = run_action(ACTION, step["with"], workspace, RUNNER_ENV, job_env)

    assert run.exit_code == 1, run.stderr
    assert run.outputs["verdict"] == FAILING.expect["class"]
    assert run.outputs["incidents"] == "1"
    html = Path(run.outputs["report-html"])
    assert html.read_text("utf-8").startswith("<!DOCTYPE html>")
    assert FAILING.expect["class"] in run.summary
    assert f"::error file=logs/server.log,line={FAILING.expect['line']}," in run.stdout
    [(_, upload)] = [u for u in run.uses if u[0].startswith("actions/upload-artifact@")]
    assert upload["name"] == "loganalyze-report"
    assert sorted(p.name for p in Path(upload["path"]).iterdir()) == [
        "loganalyze-junit.xml", "loganalyze-report.html", "loganalyze.json", "loganalyze.md",
    ]  # fmt: skip
    assert html.parent == Path(upload["path"])
    assert run.ran[-1] == "Fail when loganalyze found a failure"


def test_documented_workflow_on_a_healthy_log(tmp_path):
    job_env, step = action_step(doc_blocks("GitHub Actions")[0])
    workspace = workspace_with(tmp_path, HEALTHY)
    run = run_action(ACTION, step["with"], workspace, RUNNER_ENV, job_env)

    assert run.exit_code == 0, run.stderr
    assert run.outputs["verdict"] == "no incident"
    assert run.outputs["incidents"] == "0"
    assert "no incident" in run.summary
    assert "::error" not in run.stdout
    assert Path(run.outputs["report-html"]).exists()
    assert "Fail when loganalyze found a failure" in run.skipped


@pytest.mark.parametrize(("fail_on", "code"), [(None, 1), ("error", 0)])
def test_documented_gate_passes_every_input(tmp_path, fail_on, code):
    """The gate's `fail-on: warning` fails on a deprecation warning, `error` lets it pass."""
    job_env, step = action_step(doc_blocks("GitHub Actions")[1])
    assert step["uses"] == "owner/loganalyze@v1" and step["with"]["fail-on"] == "warning"
    workspace = workspace_with(tmp_path, HEALTHY, "logs/router.log")
    lines = DEPRECATED.input.read_text("utf-8").splitlines(keepends=True)[:4]
    (workspace / "logs" / "server.log").write_text("".join(lines), encoding="utf-8")
    job_env = {**job_env, "LAUNCH": DEPRECATED.fixture["command"]}
    inputs = {**step["with"], "artifact-name": "gate"}
    if fail_on:
        inputs["fail-on"] = fail_on
    run = run_action(ACTION, inputs, workspace, RUNNER_ENV, job_env)

    assert run.exit_code == code, run.stderr
    assert (run.outputs["verdict"], run.outputs["incidents"]) == ("deprecated_flag", "1")
    report_dir = Path(run.outputs["report-html"]).parent
    assert report_dir.name == "gate"
    report = json.loads((report_dir / "loganalyze.json").read_text("utf-8"))
    assert report["incidents"][0]["command"] == DEPRECATED.fixture["command"]
    assert [i["path"] for i in report["inputs"]] == ["logs/server.log", "logs/router.log"]


def test_html_false_uploads_nothing_and_command_file_is_read(tmp_path):
    workspace = workspace_with(tmp_path, FAILING)
    (workspace / "launch.txt").write_text(FAILING.fixture["command"] + "\n", encoding="utf-8")
    inputs = {"paths": "logs/", "html": False, "command-file": "launch.txt"}
    run = run_action(ACTION, inputs, workspace, RUNNER_ENV)
    assert run.exit_code == 1
    assert run.outputs["report-html"] == ""
    assert run.outputs["verdict"] == FAILING.expect["class"]
    assert not any(u.startswith("actions/upload-artifact@") for u, _ in run.uses)
    assert "Upload the report" in run.skipped
    assert FAILING.expect["corrected_command"] in run.stdout


@pytest.mark.parametrize(
    ("command", "verdict", "code"),
    [
        ("fixtures/preflight/models/qwen2-7b-target --tp-size 8", "refused", 1),
        ("fixtures/preflight/models/qwen2-7b-target --tp-size 4", "passed", 0),
    ],
)
def test_check_step_runs_the_preflight_before_the_post_mortem(tmp_path, command, verdict, code):
    workspace = workspace_with(tmp_path, HEALTHY)
    inputs = {
        "paths": "logs/",
        "html": False,
        "check-command": f"python -m sglang.launch_server --model-path {command}",
        "check-cwd": str(ROOT),
    }
    run = run_action(ACTION, inputs, workspace, {**RUNNER_ENV, "LOGANALYZE_SGLANG_PYTHON": ""})
    assert run.exit_code == code, run.stderr
    assert run.outputs["preflight-verdict"] == verdict
    assert run.ran.index("Pre-flight check") < run.ran.index("Post-mortem")
    assert f"loganalyze pre-flight: {verdict}" in run.summary
    if code:
        assert "runtime_crash" in run.summary and "--tp-size 4" in run.summary
        assert run.ran[-1] == "Fail when the pre-flight refused the command"
    else:
        assert "Fail when the pre-flight refused the command" in run.skipped


def test_without_a_check_command_the_check_step_is_skipped(tmp_path):
    run = run_action(ACTION, {"paths": "logs/"}, workspace_with(tmp_path, HEALTHY), RUNNER_ENV)
    assert run.exit_code == 0, run.stderr
    assert {"Pre-flight check", "Fail when the pre-flight refused the command"} <= set(run.skipped)
    assert run.outputs["preflight-verdict"] == ""


def test_unreadable_input_fails_with_exit_code_2(tmp_path):
    workspace = workspace_with(tmp_path, HEALTHY)
    run = run_action(ACTION, {"paths": "logs/missing.log"}, workspace, RUNNER_ENV)
    assert run.exit_code == 2
    assert run.outputs["verdict"] == "" and "missing.log" in run.stderr


def test_a_real_runner_installs_from_the_action_path(tmp_path):
    """Without a loganalyze from this checkout, the install step makes a venv and pip
    installs `github.action_path`. A stand-in python3 records the calls instead."""
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    calls = tmp_path / "calls"
    fake = fake_bin / "python3"
    fake.write_text(
        "#!/bin/sh\n"
        f'echo "$0 $*" >> {calls}\n'
        'case "$*" in -I\\ -c*) exit 1;; esac\n'  # the probe: loganalyze is not installed
        'if [ "$1 $2" = "-m venv" ]; then mkdir -p "$3/bin" && cp "$0" "$3/bin/python"; fi\n'
        'case "$*" in *analyzer\\ ci*) exit 0;; esac\n',
        encoding="utf-8",
    )
    fake.chmod(0o755)
    env = {"PATH": f"{fake_bin}{os.pathsep}{os.environ['PATH']}"}
    run = run_action(ACTION, {"paths": "logs/"}, workspace_with(tmp_path, HEALTHY), env)
    assert run.exit_code == 0, run.stderr
    venv_python = f"{tmp_path}/workspace-runner-temp/loganalyze-venv/bin/python"
    recorded = calls.read_text("utf-8").splitlines()
    assert f"{fake} -m venv {tmp_path}/workspace-runner-temp/loganalyze-venv" in recorded
    assert f"{venv_python} -m pip install --quiet --disable-pip-version-check {ROOT}" in recorded
    assert any(line.startswith(f"{venv_python} -I -m analyzer ci ") for line in recorded)


# ---- the GitLab template, from the documented jobs -----------------------------------------


def gitlab_config(block: str) -> dict:
    """A documented pipeline with the template included (as `include:` does)."""
    config = yaml.safe_load(block)
    assert config.pop("include")[0]["file"] == "ci/gitlab/loganalyze.gitlab-ci.yml"
    return {**gitlab_runner.load(GITLAB_TEMPLATE), **config}


# The image has loganalyze installed: this test run's.
PREINSTALLED = {"LOGANALYZE_PACKAGE": "", "LOGANALYZE_PYTHON": sys.executable}


def junit_of(project: Path, job: dict):
    etree = pytest.importorskip("lxml.etree")
    path = project / job["artifacts"]["reports"]["junit"]
    return etree.parse(str(path)).getroot()


def test_gitlab_post_mortem_job_lists_the_incident_as_a_failed_test(tmp_path):
    config = gitlab_config(doc_blocks("GitLab CI")[0])
    job = gitlab_runner.resolve(config, "loganalyze")
    assert job["when"] == "on_failure" and job["stage"] == ".post"
    project = workspace_with(tmp_path, FAILING)
    run = gitlab_runner.run_job(job, project, PREINSTALLED)

    assert run.exit_code == 1, run.output
    failures = junit_of(project, job).findall(".//testcase/failure")
    assert [f.get("type") for f in failures] == [FAILING.expect["class"]]
    for path in job["artifacts"]["paths"]:
        assert (project / path).is_dir()
    assert (project / "loganalyze-report" / "loganalyze-report.html").exists()
    assert (project / "loganalyze-report" / "loganalyze.md").exists()


def test_gitlab_post_mortem_job_on_a_healthy_log(tmp_path):
    config = gitlab_config(doc_blocks("GitLab CI")[0])
    job = gitlab_runner.resolve(config, "loganalyze")
    project = workspace_with(tmp_path, HEALTHY)
    run = gitlab_runner.run_job(job, project, PREINSTALLED)

    assert run.exit_code == 0, run.output
    root = junit_of(project, job)
    assert root.findall(".//failure") == [] and len(root.findall(".//testcase")) == 1


def test_gitlab_after_script_reports_only_a_failed_job(tmp_path):
    config = gitlab_config(doc_blocks("GitLab CI")[1])
    job = gitlab_runner.resolve(config, "serve-smoke-test")
    assert job["variables"]["LOGANALYZE_COMMAND"] == "$LAUNCH"
    # The launch that wrote the fixture; its `script` stands in: it leaves the log and fails.
    job = {**job, "variables": {**job["variables"], "LAUNCH": FAILING.fixture["command"]}}
    failed = {**job, "script": [f"mkdir -p logs && cp {FAILING.input} logs/server.log", "exit 1"]}
    variables = PREINSTALLED
    project = tmp_path / "failed"
    project.mkdir()
    run = gitlab_runner.run_job(failed, project, variables)
    assert run.status == "failed"
    failures = junit_of(project, job).findall(".//testcase/failure")
    assert [f.get("type") for f in failures] == [FAILING.expect["class"]]
    assert FAILING.expect["corrected_command"] in failures[0].text

    passed = {**job, "script": [f"mkdir -p logs && cp {FAILING.input} logs/server.log"]}
    project = tmp_path / "passed"
    project.mkdir()
    run = gitlab_runner.run_job(passed, project, variables)
    assert run.status == "success" and "no post-mortem" in run.after_output
    assert not (project / "loganalyze-report").exists()


def test_gitlab_without_loganalyze_says_how_to_install_it(tmp_path):
    job = gitlab_runner.resolve(gitlab_runner.load(GITLAB_TEMPLATE), ".loganalyze-post-mortem")
    # A python that cannot import loganalyze (`false` fails every command).
    missing = {"LOGANALYZE_PACKAGE": "", "LOGANALYZE_PYTHON": shutil.which("false") or "false"}
    run = gitlab_runner.run_job(job, workspace_with(tmp_path, HEALTHY), missing)
    assert run.exit_code == 2 and "set LOGANALYZE_PACKAGE" in run.output


# ---- structure and schemas -------------------------------------------------------------------


def _action() -> dict:
    return yaml.safe_load(ACTION.read_text("utf-8"))


def test_action_declares_the_inputs_and_outputs():
    action = _action()
    assert action["runs"]["using"] == "composite"
    assert {"paths", "fail-on", "command", "command-file", "html", "sglang-version",
            "python-version"} <= set(action["inputs"])  # fmt: skip
    assert [n for n, spec in action["inputs"].items() if spec.get("required")] == ["paths"]
    assert set(action["outputs"]) == {"verdict", "incidents", "report-html", "preflight-verdict"}
    text = ACTION.read_text("utf-8")
    for name in action["inputs"]:
        assert re.search(rf"inputs\.{re.escape(name)}(?![\w-])", text), f"{name} is never used"


def test_action_scripts_never_interpolate_expressions():
    """Inputs and outputs reach the shell through `env:`; a `${{ }}` in `run:` would splice
    a log's or a user's text into the script."""
    for step in _action()["runs"]["steps"]:
        if "run" in step:
            assert "${{" not in step["run"], step["name"]
            assert step["shell"] == "bash"


def test_gitlab_template_structure():
    template = gitlab_runner.load(GITLAB_TEMPLATE)
    for name in (".loganalyze-post-mortem", ".loganalyze"):
        job = template[name]
        junit = job["artifacts"]["reports"]["junit"]
        assert any(junit.startswith(p) for p in job["artifacts"]["paths"])
        assert set(job["variables"]) >= {"LOGANALYZE_PATHS", "LOGANALYZE_PACKAGE"}
    assert template[".loganalyze-post-mortem"]["when"] == "on_failure"
    assert "analyzer" in "".join(gitlab_runner._lines(template[".loganalyze"]["after_script"]))


def _schema_errors(schema: str, *texts: str, tmp_path: Path) -> str:
    pytest.importorskip("check_jsonschema", reason="check-jsonschema bundles the CI schemas")
    files = []
    for number, text in enumerate(texts):
        files.append(tmp_path / f"{number}.yml")
        files[-1].write_text(text, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", f"vendor.{schema}",
         *map(str, files)],
        capture_output=True, text=True,
    )  # fmt: skip
    return "" if done.returncode == 0 else done.stdout + done.stderr


def test_action_and_documented_workflows_match_the_github_schemas(tmp_path):
    assert _schema_errors("github-actions", ACTION.read_text("utf-8"), tmp_path=tmp_path) == ""
    workflows = doc_blocks("GitHub Actions")
    assert _schema_errors("github-workflows", *workflows, tmp_path=tmp_path) == ""


def as_concrete_jobs(template_text: str) -> str:
    """The template's hidden jobs as the jobs a pipeline gets from them: the schema skips
    hidden (`.`) keys, so they are validated resolved, under a visible name."""
    template = yaml.safe_load(template_text)
    jobs = {}
    for name in (".loganalyze-post-mortem", ".loganalyze"):
        job = gitlab_runner.resolve(template, name)
        jobs[name.lstrip(".")] = {"script": ["./launch.sh"], **job}
    return yaml.safe_dump(jobs)


def test_gitlab_template_and_documented_jobs_match_the_gitlab_schema(tmp_path):
    template = GITLAB_TEMPLATE.read_text("utf-8")
    texts = [template, as_concrete_jobs(template), *doc_blocks("GitLab CI")]
    assert _schema_errors("gitlab-ci", *texts, tmp_path=tmp_path) == ""
    broken = as_concrete_jobs(
        template.replace("stage: .post\n  when: on_failure", "stage: .post\n  when: on_faliure")
    )
    assert "on_faliure" in _schema_errors("gitlab-ci", broken, tmp_path=tmp_path)
