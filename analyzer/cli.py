"""The `loganalyze` command line.

`loganalyze FILE...` analyzes (a first argument that is no subcommand means
`analyze`); the other subcommands are in SUBCOMMANDS. Analysis exits 0 for no
incident, 1 for an incident, 2 for bad usage or unreadable input, 3 for an internal
error (with --debug, its traceback); `ci`, `run`, `verify` document their own codes.
"""

from __future__ import annotations

import os
import sys
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from analyzer.agents.mcp_command import mcp_command
from analyzer.cli_catalog import catalog_app
from analyzer.cli_usage import (
    EXIT_USAGE,
    HELP_OPTIONS,
    fail,
    one_line_errors,
    positive,
    run_app,
    top_help,
    version_text,
)
from analyzer.core.collector import before_exit, long_lived
from analyzer.core.output import write_output
from analyzer.core.read import InputError
from analyzer.formats.format_registry import REPORT_FORMATS
from analyzer.rulebook.vocabulary import RuleError
from analyzer.sglang.catalog import CatalogError

SUBCOMMANDS = (
    "analyze", "rules", "catalog", "ci", "metrics", "compare", "run", "status", "verify", "mcp",
)  # fmt: skip
MAX_WORKERS = 1024

app = typer.Typer(
    add_completion=False, no_args_is_help=True, rich_markup_mode=None, context_settings=HELP_OPTIONS
)
app.add_typer(catalog_app, name="catalog", help="Build or inspect SGLang flag catalogs.")


# --format's choices: the report formats of analyzer/formats/format_registry.py
Format = Enum("Format", [(name, name) for name in REPORT_FORMATS], type=str)


class FailOn(str, Enum):
    fatal = "fatal"
    error = "error"
    warning = "warning"
    info = "info"


class InputFormat(str, Enum):
    """A log, or a session transcript of one of these tools."""

    auto = "auto"
    log = "log"
    opencode = "opencode"
    claude = "claude"
    codex = "codex"
    text = "text"


DebugOption = Annotated[bool, typer.Option("--debug", help="Show tracebacks of internal errors.")]
NoRedactOption = Annotated[bool, typer.Option("--no-redact", help="Keep secrets in the output.")]
WorkersOption = Annotated[
    int | None,
    typer.Option(
        "--workers", min=1, max=MAX_WORKERS, help="Processes for big files (default: CPUs)."
    ),
]


# The options every analysis shares (analyze and ci), declared once.
RulesOption = Annotated[list[str] | None, typer.Option("--rules", help="Extra rule folder.")]
CommandOption = Annotated[str | None, typer.Option("--command", help="The launch command used.")]
CommandFileOption = Annotated[
    Path | None, typer.Option("--command-file", help="A file holding the launch command.")
]
SglangVersionOption = Annotated[
    str | None, typer.Option("--sglang-version", help="Judge with this release's catalog.")
]
HtmlOption = Annotated[Path | None, typer.Option("--html", help="Write an HTML report here.")]
MarkdownOption = Annotated[
    Path | None, typer.Option("--markdown", help="Write a Markdown report here.")
]
JunitOption = Annotated[Path | None, typer.Option("--junit", help="Write JUnit XML here.")]
InputFormatOption = Annotated[
    InputFormat,
    typer.Option("--input-format", help="What the inputs are (auto: judged by content)."),
]
VerifyOption = Annotated[
    bool, typer.Option("--verify", help="Check corrected commands with the installed SGLang.")
]
SessionOption = Annotated[
    str | None, typer.Option("--session", help="opencode storage/database: the session to read.")
]


def _options(
    rules: list[str] | None,
    command: str | None,
    command_file: Path | None,
    sglang_version: str | None,
    no_redact: bool,
    input_format: InputFormat,
    verify: bool,
    session: str | None = None,
):
    """The pipeline's Options from the shared analysis options."""
    from analyzer.pipeline import Options

    return Options(
        rules or [],
        _command_text(command, command_file),
        sglang_version,
        not no_redact,
        input_format=input_format.value,
        verify=verify,
        session=session,
    )


@app.command()
def analyze(
    paths: Annotated[
        list[str],
        typer.Argument(metavar="FILE...", help="Log files, folders, .gz files, or - for stdin."),
    ],
    format: Annotated[
        Format,
        typer.Option(
            "--format", "-f", help="Report format ('command': only the corrected command)."
        ),
    ] = Format.terminal,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write the report here.")
    ] = None,
    rules: RulesOption = None,
    command: CommandOption = None,
    command_file: CommandFileOption = None,
    sglang_version: SglangVersionOption = None,
    no_redact: NoRedactOption = False,
    debug: DebugOption = False,
    html: HtmlOption = None,
    markdown: MarkdownOption = None,
    junit: JunitOption = None,
    input_format: InputFormatOption = InputFormat.auto,
    verify: VerifyOption = False,
    session: SessionOption = None,
) -> None:
    """Analyze SGLang logs: what failed, which flag, and the corrected command."""
    with long_lived():  # core/collector.py
        from analyzer.pipeline import analyze, charted

    with one_line_errors(debug):
        targets = {"html": html, "markdown": markdown, "junit": junit}
        options = _options(
            rules, command, command_file, sglang_version, no_redact, input_format, verify, session
        )
        # a format that charts each log's decode metrics needs them read (format_registry)
        run = charted if _reads_metrics(targets, format.value) else analyze
        report = run(paths, options)
        _emit(report, format, output, paths)
        if html or markdown or junit:
            from analyzer.formats.ci import write_reports

            write_reports(report, targets, paths, "info")
        if verify:
            _verify_corrections(report)
    raise typer.Exit(1 if any(i.severity != "info" for i in report.incidents) else 0)


def _verify_corrections(report) -> None:
    """One stderr line per corrected command: SGLang's verdict, also in the report itself."""
    for incident in report.incidents:
        if incident.verification is not None:
            line = f"corrected command {incident.verification.describe()}"
            typer.echo(f"{incident.source}:{incident.line}: {line}", err=True)


@app.command("verify")
def verify_launch(
    command: Annotated[str | None, typer.Argument(help="The launch command, quoted as one argument.")] = None,
    command_file: Annotated[Path | None, typer.Option("--command-file", help="Read the command from a file.")] = None,
    python: Annotated[str | None, typer.Option("--python", help="SGLang's Python (default: $LOGANALYZE_SGLANG_PYTHON).")] = None,
    timeout: Annotated[float, typer.Option("--timeout", callback=positive, help="Seconds to wait.")] = 120.0,
    sglang_version: Annotated[str | None, typer.Option("--sglang-version", help="The release whose catalogs to use.")] = None,
    format: Annotated[str, typer.Option("--format", help="text, or json (the report).")] = "text",
    cwd: Annotated[Path | None, typer.Option("--cwd", help="Where relative model paths start.")] = None,
    no_sglang: Annotated[bool, typer.Option("--no-sglang", help="Skip SGLang's own check.")] = False,
    debug: DebugOption = False,
) -> None:  # fmt: skip
    """The pre-flight of a launch command and its model folders (docs/preflight.md).

    Exits 1 when a problem would stop the launch, else 0."""
    from analyzer.preflight import preflight, render_report

    with one_line_errors(debug):
        text = _command_text(command, command_file)
        if format not in ("text", "json") or not (text or "").strip():
            raise InputError("usage: loganalyze verify [--format text|json] 'COMMAND'")
        report = preflight(text or "", cwd, not no_sglang, sglang_version=sglang_version, python=python, timeout=timeout)  # fmt: skip
    typer.echo(render_report(report, format), nl=False)
    raise typer.Exit(report.exit_code)


def _command_text(command: str | None, command_file: Path | None) -> str | None:
    if command_file is None:
        return command
    try:
        return command_file.read_text("utf-8", errors="replace")
    except OSError as exc:
        raise InputError(f"{command_file}: cannot read ({exc.strerror or exc})") from None


def _reads_metrics(targets: dict[str, Path | None], *names: str) -> bool:
    """True when a format asked for (a file target or --format) charts the decode metrics."""
    asked = [*names, *(name for name, path in targets.items() if path is not None)]
    return any(REPORT_FORMATS[name].reads_metrics for name in asked)


def _emit(report, format: Enum, output: Path | None, inputs: list[str]) -> None:
    entry = REPORT_FORMATS[format.value]
    if entry.console and output is None and _colour_wanted():
        entry.show(report)
        return
    _write(entry.render(report, "info"), output, inputs)


def _colour_wanted() -> bool:
    return sys.stdout.isatty() and "NO_COLOR" not in os.environ


def _write(text: str, output: Path | None, inputs: list[str]) -> None:
    if output is None:
        sys.stdout.write(text)
        return
    write_output(output, text, inputs)


@app.command("ci")
def ci(
    paths: Annotated[
        list[str],
        typer.Argument(
            metavar="FILE...", help="Logs, folders or transcripts of the failed launch."
        ),
    ],
    html: HtmlOption = None,
    markdown: MarkdownOption = None,
    junit: JunitOption = None,
    json: Annotated[Path | None, typer.Option("--json", help="Write the JSON report.")] = None,
    fail_on: Annotated[
        FailOn, typer.Option("--fail-on", help="Exit 1 from this severity up.")
    ] = FailOn.error,
    summary: Annotated[
        bool, typer.Option("--summary/--no-summary", help="Append to $GITHUB_STEP_SUMMARY.")
    ] = True,
    rules: RulesOption = None,
    command: CommandOption = None,
    command_file: CommandFileOption = None,
    sglang_version: SglangVersionOption = None,
    no_redact: NoRedactOption = False,
    debug: DebugOption = False,
    input_format: InputFormatOption = InputFormat.auto,
    verify: VerifyOption = False,
    session: SessionOption = None,
) -> None:
    """CI post-mortem: write reports, the step summary and annotations; exit 1 on failure."""
    from analyzer.formats.ci import CiRun, post_mortem
    from analyzer.pipeline import analyze, charted

    with one_line_errors(debug):
        reports = {"html": html, "markdown": markdown, "junit": junit, "json": json}
        options = _options(
            rules, command, command_file, sglang_version, no_redact, input_format, verify, session
        )
        report = (charted if _reads_metrics(reports) else analyze)(paths, options)
        code = post_mortem(report, CiRun(paths, reports, fail_on.value, summary))
    raise typer.Exit(code)


class MetricsFormat(str, Enum):
    terminal = "terminal"
    plain = "plain"
    json = "json"


class CompareFormat(str, Enum):
    terminal = "terminal"
    plain = "plain"
    json = "json"
    html = "html"


@app.command("metrics")
def metrics(
    paths: Annotated[
        list[str],
        typer.Argument(metavar="FILE...", help="Server logs, folders, .gz, or - for stdin."),
    ],
    series: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Also write the batch series (.csv or .parquet)."),
    ] = None,
    format: Annotated[
        MetricsFormat, typer.Option("--format", "-f", help="Summary format.")
    ] = MetricsFormat.terminal,
    workers: WorkersOption = None,
    no_redact: NoRedactOption = False,
    debug: DebugOption = False,
) -> None:
    """Throughput, speculative acceptance and startup phases of each run."""
    from analyzer.engine.redact import redact_incident, redact_run
    from analyzer.formats import metrics_table
    from analyzer.metrics.compare import spec_findings
    from analyzer.metrics.extract import extract_paths, extract_with_series

    with one_line_errors(debug):
        if series is None:
            runs = extract_paths(paths, workers=workers)
        else:
            runs, rows = extract_with_series(paths, series, workers)
            typer.echo(f"wrote {rows} rows to {series}", err=True)
        findings = [f for run in runs for f in spec_findings(run)]
        if not no_redact:
            runs, findings = [redact_run(r) for r in runs], [redact_incident(f) for f in findings]
        if format is MetricsFormat.json:
            text = metrics_table.render_json(metrics_table.metrics_dict(runs, findings))
        else:
            text = metrics_table.render_metrics_plain(runs, findings)
        sys.stdout.write(text)


@app.command("compare")
def compare_runs(
    paths: Annotated[
        list[str], typer.Argument(metavar="FILE...", help="Server logs of the runs to compare.")
    ],
    format: Annotated[
        CompareFormat, typer.Option("--format", "-f", help="Output format.")
    ] = CompareFormat.terminal,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write the comparison here.")
    ] = None,
    workers: WorkersOption = None,
    no_redact: NoRedactOption = False,
    debug: DebugOption = False,
) -> None:
    """Runs side by side: differing settings, metrics, the best run, speculation's speed-up."""
    from analyzer.engine.redact import redact_comparison
    from analyzer.formats import metrics_table
    from analyzer.metrics.compare import compare
    from analyzer.metrics.extract import extract_paths

    with one_line_errors(debug):
        comparison = compare(extract_paths(paths, workers=workers))
        if not no_redact:
            comparison = redact_comparison(comparison)
        if format is CompareFormat.json:
            text = metrics_table.render_json(metrics_table.compare_dict(comparison))
        elif format is CompareFormat.html:
            from analyzer.formats.compare_html import render_compare_html

            text = render_compare_html(comparison)
        else:
            text = metrics_table.render_compare_plain(comparison)
        _write(text, output, paths)


@app.command("rules")
def list_rules(
    markdown: Annotated[
        bool, typer.Option("--markdown", help="As the table in docs/rules.md.")
    ] = False,
    rules: Annotated[list[str] | None, typer.Option("--rules", help="Extra rule folder.")] = None,
) -> None:
    """List everything the tool can report: each rule's id, class, severity and doc, then
    the command checks, fallbacks, raise-site families, frame phases and session findings."""
    from analyzer.incidents.finding_registry import listing
    from analyzer.rulebook.vocabulary import load_rules

    try:
        sys.stdout.write(listing(load_rules(rules or []), markdown))
    except RuleError as exc:
        raise fail(str(exc)) from None


@app.command("run", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def run_server(
    ctx: typer.Context,
    log: Annotated[
        Path | None, typer.Option("--log", help="The log file (default ./sglang-TIME.log).")
    ] = None,
    health_url: Annotated[
        str | None, typer.Option("--health-url", help="Also ready when this URL answers 2xx.")
    ] = None,
    ready_timeout: Annotated[
        float | None,
        typer.Option("--ready-timeout", callback=positive, help="Seconds to become ready."),
    ] = None,
    stop_timeout: Annotated[
        float,
        typer.Option("--stop-timeout", min=0, help="Seconds between SIGTERM and SIGKILL."),
    ] = 10.0,
    detach: Annotated[bool, typer.Option("--detach", help="Supervise in the background.")] = False,
    force: Annotated[bool, typer.Option("--force", help="Replace an earlier run's log.")] = False,
    no_preflight: Annotated[
        bool, typer.Option("--no-preflight", help="Launch without checking first.")
    ] = False,
    sglang_version: Annotated[str | None, typer.Option("--sglang-version")] = None,
    debug: DebugOption = False,
) -> None:
    """Launch SGLang under watch: loganalyze run [OPTIONS] -- COMMAND...

    Exits with the server's code (128+N for signal N), 124 when not ready within
    --ready-timeout, 2 when pre-flight refuses the command or the log is taken.
    """
    from analyzer.run.launch import launch
    from analyzer.run.state import RunError, RunRequest, default_log_path

    request = RunRequest(
        list(ctx.args), log or default_log_path(), health_url, ready_timeout, stop_timeout,
        sglang_version, detach,
    )  # fmt: skip
    with one_line_errors(debug, RunError):
        code = launch(request, force, not no_preflight, _colour_wanted())
    raise typer.Exit(code)


@app.command("status")
def run_status(
    target: Annotated[
        str | None, typer.Argument(help="A run's log or state file (default: the newest here).")
    ] = None,
    json: Annotated[bool, typer.Option("--json", help="As JSON.")] = False,
    sglang_version: Annotated[str | None, typer.Option("--sglang-version")] = None,
) -> None:
    """State of a `loganalyze run`: alive, ready, last lines, the verdict if it died.

    Exits 0 while the server runs, 1 when it is not running, 2 when there is no state.
    """
    import json as json_module

    from analyzer.run.state import RunError
    from analyzer.run.status import read_status, render_status, status_json

    try:
        view = read_status(target, sglang_version)
    except (RunError, InputError, RuleError, CatalogError) as exc:
        raise fail(str(exc)) from None
    if json:
        sys.stdout.write(json_module.dumps(status_json(view), indent=2, sort_keys=True) + "\n")
    else:
        sys.stdout.write(render_status(view))
    raise typer.Exit(0 if view.alive else 1)


app.command("mcp")(mcp_command)  # analyzer/agents/: the MCP server for coding agents


def main() -> None:
    """Entry point: a first argument that is not a subcommand means `analyze`."""
    try:
        code = _dispatch(sys.argv[1:])
    finally:
        before_exit()  # core/collector.py
    raise SystemExit(code)


def _dispatch(argv: list[str]) -> int:
    if not argv or argv[0] in ("--help", "-h"):
        sys.stdout.write(top_help(app))
        return 0 if argv else EXIT_USAGE
    if argv[0] == "--version":
        typer.echo(version_text())
        return 0
    if argv[0] not in SUBCOMMANDS:
        argv = ["analyze", *argv]
    if argv[0] == "analyze":
        # typer builds the parser of every registered command before running one, and
        # that cost as much as analysing a small log: build only the one asked for
        analyze_app = typer.Typer(
            add_completion=False, rich_markup_mode=None, context_settings=HELP_OPTIONS
        )
        analyze_app.command()(analyze)
        return run_app(analyze_app, argv[1:], "loganalyze analyze")
    return run_app(app, argv, "loganalyze")
