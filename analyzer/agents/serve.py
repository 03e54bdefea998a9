"""The `loganalyze mcp` command's two entries: serve the tools, or print the skill file.

The server needs the `[mcp]` extra (the `mcp` SDK, 2.x); without it, or with an SDK of
another major version, `loganalyze mcp` says which extra to install in one line.
"""

from __future__ import annotations

from analyzer.core.package_files import package_files

EXTRA = "pip install 'loganalyze[mcp]'"
SKILL_PATH = ("skills", "loganalyze", "SKILL.md")


class MissingExtra(Exception):
    """The `mcp` SDK is not importable here."""


def serve_stdio() -> None:
    """Answer MCP requests on stdin/stdout until the client closes stdin."""
    try:
        from analyzer.agents.mcp_server import serve
    except ImportError as exc:
        raise MissingExtra(
            f"loganalyze mcp needs the mcp extra (the mcp SDK 2.x): {EXTRA} ({exc})"
        ) from None
    serve()


def skill_text() -> str:
    """The skill file shipped with the package (analyzer/agents/skills/loganalyze/SKILL.md)."""
    return package_files("analyzer.agents").joinpath(*SKILL_PATH).read_text("utf-8")
