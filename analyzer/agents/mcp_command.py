"""`loganalyze mcp`: serve the agent tools over stdio, or print the skill file.

Registered on the CLI's app by analyzer/cli.py. The server needs the `[mcp]` extra (the
`mcp` SDK, 2.x), imported only here and only to serve; without it, or with an SDK of another
major version, the command says which extra to install in one line.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from analyzer.core.package_files import package_files

EXTRA = "pip install 'loganalyze[mcp]'"
SKILL_PATH = ("skills", "loganalyze", "SKILL.md")
EXIT_USAGE = 2


def mcp_command(
    skill: Annotated[bool, typer.Option("--skill", help="Print the agent skill file.")] = False,
) -> None:
    """MCP server over stdio for coding agents (docs/agents.md); needs loganalyze[mcp]."""
    if skill:
        sys.stdout.write(skill_text())
        return
    try:
        from analyzer.agents.mcp_server import serve
    except ImportError as exc:
        message = f"loganalyze mcp needs the mcp extra (the mcp SDK 2.x): {EXTRA} ({exc})"
        typer.echo(f"loganalyze: error: {message}", err=True)
        raise typer.Exit(EXIT_USAGE) from None
    serve()


def skill_text() -> str:
    """The skill file shipped with the package (analyzer/agents/skills/loganalyze/SKILL.md)."""
    return package_files("analyzer.agents").joinpath(*SKILL_PATH).read_text("utf-8")
