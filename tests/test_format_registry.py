"""The format registry (analyzer/formats/format_registry.py) is the one list of report
formats: every format `--format` accepts renders from it, and its share formats are the
files `loganalyze ci` writes."""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from analyzer.cli import app
from analyzer.formats.ci import write_reports
from analyzer.formats.format_registry import REPORT_FORMATS, report_format
from analyzer.pipeline import Options, analyze, charted
from tests.fixture_cases import fixture_cases

# The bundled example: an argparse failure, with its launch command to correct.
CASE = next(c for c in fixture_cases() if c.id == "real/unrecognized_num_speculative_tokens")
EXAMPLE, LAUNCH = CASE.input, CASE.user_command
SHARED = {name for name, entry in REPORT_FORMATS.items() if entry.share}


def _analyze(metrics: bool = False):
    return (charted if metrics else analyze)([str(EXAMPLE)], Options(command=LAUNCH))


def _params(command: str) -> list:
    return typer.main.get_command(app).commands[command].params


def _writes(command: str) -> set[str]:
    """The report files a subcommand writes: its `--NAME FILE` options that say "Write"."""
    return {p.name for p in _params(command) if (p.help or "").startswith("Write")} - {"output"}


def test_the_cli_accepts_exactly_the_registry_formats_in_its_order():
    choices = next(p for p in _params("analyze") if p.name == "format").type.choices
    assert list(choices) == list(REPORT_FORMATS)


@pytest.mark.parametrize("name", list(REPORT_FORMATS))
def test_every_format_renders_the_bundled_example(name, tmp_path):
    target = tmp_path / f"report.{report_format(name).extension or 'out'}"
    done = CliRunner().invoke(
        app, ["analyze", str(EXAMPLE), "--command", LAUNCH, "-f", name, "-o", str(target)]
    )
    assert done.exit_code == 1, done.output  # the example holds an incident
    text = target.read_text("utf-8")
    report = _analyze(report_format(name).reads_metrics)
    assert text == report_format(name).render(report, "info")
    corrected = report.incidents[0].corrected_command
    assert corrected and text
    if name == "command":
        assert text == corrected + "\n"
    elif name == "json":
        assert json.loads(text)["incidents"][0]["corrected_command"] == corrected
    else:
        assert report.incidents[0].rule_class in text


def test_the_terminal_format_has_a_colour_view(capsys):
    report = _analyze()
    report_format("terminal").show(report)
    assert report.incidents[0].corrected_command in capsys.readouterr().out


def test_the_share_formats_are_exactly_those_ci_writes(tmp_path):
    assert _writes("ci") == SHARED
    assert _writes("analyze") and _writes("analyze") <= SHARED
    files = {name: tmp_path / f"report.{report_format(name).extension}" for name in SHARED}
    args = [arg for name, path in files.items() for arg in (f"--{name}", str(path))]
    done = CliRunner().invoke(
        app,
        ["ci", str(EXAMPLE), "--command", LAUNCH, "--no-summary", *args],
        env={"GITHUB_ACTIONS": None},
    )
    assert done.exit_code == 1, done.output
    report = _analyze(metrics=True)
    for name, path in files.items():
        assert path.read_text("utf-8") == report_format(name).render(report, "error"), name


def test_only_a_share_format_is_written_as_a_file(tmp_path):
    report = _analyze()
    with pytest.raises(ValueError, match="not a report file format"):
        write_reports(report, {"github": tmp_path / "annotations.txt"}, [str(EXAMPLE)], "info")
    with pytest.raises(ValueError, match="unknown report format"):
        report_format("pdf")
