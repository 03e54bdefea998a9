"""`loganalyze catalog ...`: build or inspect SGLang's flag and error catalogs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from analyzer.cli_usage import HELP_OPTIONS, fail
from analyzer.core.output import OutputError
from analyzer.sglang.catalog import CatalogError

catalog_app = typer.Typer(add_completion=False, no_args_is_help=True, context_settings=HELP_OPTIONS)


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
