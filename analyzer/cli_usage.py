"""How the command line talks to its user: the top-level help, `--version`, one-line
errors, and the range checks of numeric options. The commands themselves are in cli.py."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import typer

try:  # typer from 0.2x carries its own copy of click
    from typer._click import exceptions as click_errors
except ImportError:  # pragma: no cover - older typer uses click itself
    from click import exceptions as click_errors  # type: ignore[no-redef]

from analyzer.core.output import OutputError
from analyzer.core.read import InputError
from analyzer.rulebook.vocabulary import RuleError
from analyzer.sglang.catalog import CatalogError

EXIT_USAGE = 2
EXIT_INTERNAL = 3
HELP_OPTIONS = {"help_option_names": ["-h", "--help"]}
USER_ERRORS = (InputError, RuleError, CatalogError, OutputError)

EXAMPLES = (
    ("loganalyze server.log", "what failed, which flag, the corrected command"),
    ("loganalyze --format command server.log", "only the corrected command, for scripts"),
    ("loganalyze ci logs/ --junit report.xml", "a CI post-mortem with reports and annotations"),
)


def fail(message: str, code: int = EXIT_USAGE) -> typer.Exit:
    typer.echo(f"loganalyze: error: {message}", err=True)
    return typer.Exit(code)


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


def version_text() -> str:
    """`loganalyze --version`: the package and the SGLang releases it has catalogs of."""
    from analyzer import __version__
    from analyzer.sglang.catalog import shipped_versions

    return f"loganalyze {__version__} (SGLang flag catalogs: {', '.join(shipped_versions())})"


def top_help(app: typer.Typer) -> str:
    """`loganalyze --help`: the main form first, examples, then every command whole."""
    group = typer.main.get_command(app)
    commands = getattr(group, "commands", {})
    names = list(commands)
    width = max(len(n) for n in names) + 2
    lines = [
        "Usage: loganalyze FILE... [OPTIONS]",
        "       loganalyze COMMAND [ARGS]...",
        "",
        "Crash forensics for SGLang: what failed, which flag caused it, and a corrected launch",
        "command that SGLang accepts. FILE is a log, a session transcript, a folder, a .gz",
        "file, or - for stdin. Exit status: 0 no incident, 1 incident, 2 usage or input error.",
        "",
        "Examples:",
        *(f"  {example:<44}{what}" for example, what in EXAMPLES),
        "",
        "Commands:",
    ]
    for name in names:
        summary = (commands[name].help or "").strip().split("\n\n")[0]
        lines.append(f"  {name:<{width}}{' '.join(summary.split())}")
    lines += [
        "",
        "Options:",
        "  -h, --help  Show this message and exit ('loganalyze COMMAND -h' for a command's).",
        "  --version   Show the version and exit.",
        "",
        "The options of `loganalyze FILE...`: loganalyze analyze -h",
    ]
    return "\n".join(lines) + "\n"


def run_app(app: typer.Typer, argv: list[str], prog_name: str) -> int:
    """Run a typer app with click's usage errors as one line (exit 2), never its block."""
    try:
        code = app(args=argv, prog_name=prog_name, standalone_mode=False)
    except click_errors.NoArgsIsHelpError as exc:
        typer.echo(exc.ctx.get_help() if exc.ctx else "")
        return EXIT_USAGE
    except click_errors.ClickException as exc:
        message = " ".join(exc.format_message().split())
        where = exc.ctx.command_path if getattr(exc, "ctx", None) else prog_name
        typer.echo(f"loganalyze: error: {message} (see '{where} -h')", err=True)
        return EXIT_USAGE
    except typer.Abort:
        typer.echo("loganalyze: aborted", err=True)
        return 1
    return code if isinstance(code, int) else 0


def positive(value: float | None) -> float | None:
    """A duration in seconds: more than zero."""
    if value is not None and value <= 0:
        raise typer.BadParameter(f"{value:g} is not a positive number of seconds")
    return value
