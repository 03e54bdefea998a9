"""The `loganalyze` command line.

`loganalyze FILE...` analyzes (a first argument that is no subcommand means
`analyze`); the other subcommands are in SUBCOMMANDS. Analysis exits 0 for no
incident, 1 for an incident, 2 for bad usage or unreadable input, 3 for an internal
error (with --debug, its traceback); `ci`, `run`, `verify` document their own codes.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from analyzer.core.collector import before_exit, long_lived
from analyzer.core.output import OutputError, write_output
from analyzer.core.read import InputError
from analyzer.rulebook.vocabulary import RuleError
from analyzer.sglang.catalog import CatalogError

SUBCOMMANDS = (
    "analyze", "rules", "catalog", "ci", "metrics", "compare", "run", "status", "verify",
)  # fmt: skip
EXIT_USAGE = 2
EXIT_INTERNAL = 3

app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None)
catalog_app = typer.Typer(add_completion=False, no_args_is_help=True)
app.add_typer(catalog_app, name="catalog", help="Build or inspect SGLang flag catalogs.")


class Format(str, Enum):
    terminal = "terminal"
    plain = "plain"
    json = "json"
    html = "html"
    markdown = "markdown"
    junit = "junit"
    github = "github"


class FailOn(str, Enum):
    fatal = "fatal"
    error = "error"
    warning = "warning"
    info = "info"


SHARE_FORMATS = (Format.html, Format.markdown, Format.junit, Format.github)


class InputFormat(str, Enum):
    """A log, or a session transcript of one of these tools."""

    auto = "auto"
    log = "log"
    opencode = "opencode"
    claude = "claude"
    codex = "codex"
    text = "text"


def fail(message: str, code: int = EXIT_USAGE) -> typer.Exit:
    typer.echo(f"loganalyze: error: {message}", err=True)
    return typer.Exit(code)


DebugOption = Annotated[bool, typer.Option("--debug", help="Show tracebacks of internal errors.")]
NoRedactOption = Annotated[bool, typer.Option("--no-redact", help="Keep secrets in the output.")]
USER_ERRORS = (InputError, RuleError, CatalogError, OutputError)


@contextmanager
def one_line_errors(debug: bool, *extra: type[Exception]) -> Iterator[None]:
    """Every command's promise: a one-line error, never a traceback (unless --debug)."""
    try:
        yield
    except (*USER_ERRORS, *extra) as exc:
        raise fail(str(exc)) from None
    except typer.Exit:
        raise
    except Exception as exc:  # noqa: BLE001 - the promise is: never a traceback
        if debug:
            raise
        raise fail(f"internal error: {exc!r} (rerun with --debug)", EXIT_INTERNAL) from None


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
    metrics: bool,
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
        metrics=metrics,
        session=session,
    )


@app.command()
def analyze(
    paths: Annotated[
        list[str], typer.Argument(help="Log files, folders, .gz files, or - for stdin.")
    ],
    format: Annotated[
        Format, typer.Option("--format", "-f", help="Report format.")
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
        from analyzer.pipeline import analyze as run

    with one_line_errors(debug):
        wants_charts = format is Format.html or html is not None
        options = _options(
            rules, command, command_file, sglang_version, no_redact, input_format, verify,
            wants_charts, session,
        )  # fmt: skip
        report = run(paths, options)
        _emit(report, format, output, paths)
        if html or markdown or junit:
            from analyzer.formats.ci import write_reports

            targets = {"html": html, "markdown": markdown, "junit": junit}
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
    command: Annotated[str, typer.Argument(help="The launch command, quoted as one argument.")],
    python: Annotated[
        str | None,
        typer.Option("--python", help="SGLang's Python (default: $LOGANALYZE_SGLANG_PYTHON)."),
    ] = None,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds to wait.")] = 120.0,
    sglang_version: Annotated[
        str | None, typer.Option("--sglang-version", help="Catalog for the fallback check.")
    ] = None,
) -> None:
    """Run a launch command through the installed SGLang's parser and checks (no GPU, no model).

    Exits 0 when SGLang accepts it, 1 when it (or, without SGLang, the flag catalog) rejects
    it, 2 when SGLang is missing or too slow and the catalog finds nothing wrong.
    """
    from analyzer.sglang.verify import verify_command

    result = verify_command(command, python, timeout, catalog_version=sglang_version)
    typer.echo(result.describe())
    caught = result.catalog_check is not None and not result.catalog_check.startswith("passes")
    raise typer.Exit({"pass": 0, "fail": 1}.get(result.status, 1 if caught else 2))


def _command_text(command: str | None, command_file: Path | None) -> str | None:
    if command_file is None:
        return command
    try:
        return command_file.read_text("utf-8", errors="replace")
    except OSError as exc:
        raise InputError(f"{command_file}: cannot read ({exc.strerror or exc})") from None


def _emit(report, format: Format, output: Path | None, inputs: list[str]) -> None:
    if format in SHARE_FORMATS:
        from analyzer.formats.ci import render_report

        _write(render_report(report, format.value, "info"), output, inputs)
        return
    if format is Format.json:
        from analyzer.formats.json_report import render_json

        _write(render_json(report), output, inputs)
        return
    from analyzer.formats.terminal import render_plain, render_rich

    if format is Format.terminal and output is None and _colour_wanted():
        from rich.console import Console

        render_rich(report, Console(highlight=False, soft_wrap=False))
        return
    _write(render_plain(report), output, inputs)


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
        list[str], typer.Argument(help="Logs, folders or transcripts of the failed launch.")
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
    from analyzer.pipeline import analyze as run

    with one_line_errors(debug):
        options = _options(
            rules, command, command_file, sglang_version, no_redact, input_format, verify,
            html is not None, session,
        )  # fmt: skip
        report = run(paths, options)
        reports = {"html": html, "markdown": markdown, "junit": junit, "json": json}
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
    paths: Annotated[list[str], typer.Argument(help="Server logs, folders, .gz, or - for stdin.")],
    series: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Also write the batch series (.csv or .parquet)."),
    ] = None,
    format: Annotated[
        MetricsFormat, typer.Option("--format", "-f", help="Summary format.")
    ] = MetricsFormat.terminal,
    workers: Annotated[
        int | None, typer.Option("--workers", help="Processes for big files (default: CPUs).")
    ] = None,
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
    paths: Annotated[list[str], typer.Argument(help="Server logs of the runs to compare.")],
    format: Annotated[
        CompareFormat, typer.Option("--format", "-f", help="Output format.")
    ] = CompareFormat.terminal,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write the comparison here.")
    ] = None,
    workers: Annotated[
        int | None, typer.Option("--workers", help="Processes for big files (default: CPUs).")
    ] = None,
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
    markdown: Annotated[bool, typer.Option("--markdown", help="As the README's table.")] = False,
    rules: Annotated[list[str] | None, typer.Option("--rules", help="Extra rule folder.")] = None,
) -> None:
    """List every rule: id, class, severity, and what it detects."""
    from analyzer.rulebook.docs import rules_markdown, rules_text
    from analyzer.rulebook.vocabulary import load_rules

    try:
        loaded = load_rules(rules or [])
    except RuleError as exc:
        raise fail(str(exc)) from None
    sys.stdout.write(rules_markdown(loaded) if markdown else rules_text(loaded))


@catalog_app.command("build")
def catalog_build(
    output: Annotated[Path, typer.Option("--output", "-o", help="Where to write the JSON.")],
) -> None:
    """Build a flag catalog from the installed SGLang's own argument parser."""
    try:
        from analyzer.sglang.catalog_build import write_catalog
    except ImportError as exc:
        raise fail(f"cannot build a catalog: {exc}") from None
    from importlib import import_module

    from analyzer.core.output import replaced_atomically

    # the catalogs mined from the same release's source, written beside the flag catalog
    names = ("error_catalog", "code_paths", "flag_lines", "guarded_code", "derived_fields")
    miners = [import_module(f"analyzer.sglang.{name}_build").MINER for name in names]
    try:
        write_catalog(str(output))
        typer.echo(f"wrote {output}")
        if not replaced_atomically(output):
            typer.echo(f"{output} is not a regular file: no error catalog written beside it")
            return
        written = [(m.write_beside(output), m.counted) for m in miners]
    except ImportError as exc:
        raise fail(f"sglang is not importable here ({exc}); install loganalyze[sglang]") from None
    except OutputError as exc:
        raise fail(str(exc)) from None
    for (path, count), what in written:
        typer.echo(f"wrote {path} ({count} {what})")


@catalog_app.command("show", context_settings={"ignore_unknown_options": True})
def catalog_show(
    flag: Annotated[str, typer.Argument(help="A flag as typed, e.g. --tp")],
    sglang_version: Annotated[str | None, typer.Option("--sglang-version")] = None,
) -> None:
    """How SGLang reads a flag: exact, alias, expanded prefix, ambiguous or unknown."""
    from analyzer.sglang.catalog import load_catalog

    try:
        catalog = load_catalog(sglang_version)
    except CatalogError as exc:
        raise fail(str(exc)) from None
    from analyzer.sglang.flag_history import shipped_history

    resolution = catalog.resolve(flag)
    if resolution.spec is None:
        extra = f": {', '.join(resolution.candidates)}" if resolution.candidates else ""
        typer.echo(f"{flag}: {resolution.kind} in sglang {catalog.version}{extra}")
        change = shipped_history().change(flag, catalog)
        if change is not None:
            typer.echo(f"  {change.explain(catalog.version)}")
        raise typer.Exit(1)
    spec = resolution.spec
    typer.echo(f"{flag}: {resolution.kind} -> {spec.long} (dest {spec.dest}, {spec.action})")
    if spec.help:
        typer.echo(f"  {spec.help}")


@catalog_app.command("errors")
def catalog_errors(
    grep: Annotated[
        str | None, typer.Option("--grep", help="Only entries containing TEXT.")
    ] = None,
    sglang_version: Annotated[str | None, typer.Option("--sglang-version")] = None,
) -> None:
    """SGLang's raise/assert sites (error catalog): message, guarding condition, flags."""
    from analyzer.sglang.error_catalog import ErrorCatalogError, load_error_catalog

    try:
        catalog = load_error_catalog(sglang_version)
    except ErrorCatalogError as exc:
        raise fail(str(exc)) from None
    found = catalog.grep(grep)
    for site in found:
        typer.echo(f"{site.where} {site.function} [{site.kind} {site.exception}] {site.message}")
        if site.condition:
            typer.echo(f"  if: {site.condition}")
        if site.flags:
            typer.echo(f"  flags: {' '.join(site.flags)}")
    typer.echo(f"{len(found)} of {len(catalog.entries)} entries (sglang {catalog.version})")
    if not found:
        raise typer.Exit(1)


@catalog_app.command("history", context_settings={"ignore_unknown_options": True})
def catalog_history(
    flag: Annotated[str, typer.Argument(help="A flag as typed, e.g. --cuda-graph-max-bs")],
) -> None:
    """How each shipped SGLang release reads a flag, oldest first."""
    from analyzer.sglang.catalog import all_catalogs

    for catalog in all_catalogs():
        resolution = catalog.resolve(flag)
        if resolution.spec is not None:
            spec = resolution.spec
            what = f"{resolution.kind} -> {spec.long} (dest {spec.dest})"
        else:
            extra = f": {', '.join(resolution.candidates)}" if resolution.candidates else ""
            what = f"{resolution.kind}{extra}"
        typer.echo(f"{catalog.version:<14}{what}")


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
        float | None, typer.Option("--ready-timeout", help="Seconds to become ready.")
    ] = None,
    stop_timeout: Annotated[
        float, typer.Option("--stop-timeout", help="Seconds between SIGTERM and SIGKILL.")
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


def main() -> None:
    """Entry point: a first argument that is not a subcommand means `analyze`."""
    try:
        _dispatch(sys.argv[1:])
    finally:
        before_exit()  # core/collector.py


def _dispatch(argv: list[str]) -> None:
    if argv and argv[0] not in SUBCOMMANDS and argv[0] not in ("--help", "-h"):
        argv = ["analyze", *argv]
    if argv and argv[0] == "analyze":
        # typer builds the parser of every registered command before running one, and
        # that cost as much as analysing a small log: build only the one asked for
        analyze_app = typer.Typer(add_completion=False, rich_markup_mode=None)
        analyze_app.command()(analyze)
        analyze_app(args=argv[1:], prog_name="loganalyze analyze")
        return
    app(args=argv, prog_name="loganalyze")
