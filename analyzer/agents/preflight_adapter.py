"""The agent `preflight` tool's one call into the pre-flight (analyzer/preflight, the one
`loganalyze run`, `verify` and the Action use), plus the log folder as `run` checks it.

The agent sends the command as it would type it (`nohup ... > log 2>&1 &`, `ssh host "..."`),
so the checks get the launch's own words and their edits go back into the agent's text: the
corrected command keeps every wrapper, redirection and quote around SGLang's arguments.
Checks of this machine (paths, log folder, GPUs) apply only to a launch that runs here.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from analyzer.agents.tool_inputs import MAX_COMMAND_CHARS, ToolInputError, checked_text
from analyzer.core.shell_words import ShellLexer
from analyzer.preflight import preflight, render_text
from analyzer.preflight.check import runs_elsewhere
from analyzer.run.preflight import log_folder_problems
from analyzer.sglang.catalog import load_catalog
from analyzer.sglang.launch_command import parse_launch_command

SGLANG_TIMEOUT = 120.0


def preflight_command(
    command_text: str,
    folder: Path | None = None,
    sglang_version: str | None = None,
    ask_sglang: bool = False,
) -> dict[str, Any]:
    """The pre-flight report of a launch command and its corrected command, as JSON (its
    secrets are masked by the caller, agent_tools.py, as every tool result's)."""
    checked_text("command", command_text, MAX_COMMAND_CHARS)
    _refuse_unclosed_quote(command_text)
    catalog = load_catalog(sglang_version)
    launch = parse_launch_command(command_text, catalog.takes_value)
    if launch is None:
        raise ToolInputError(
            "no SGLang launch found in the command (expected e.g. `python -m "
            "sglang.launch_server --model-path ...` or `sglang serve ...`)"
        )
    report = preflight(
        command_text, folder, ask_sglang, sglang_version=catalog.version, timeout=SGLANG_TIMEOUT
    )
    if not runs_elsewhere(launch):
        log = Path(launch.log_path or "sglang.log")
        here = folder or Path(os.getcwd())
        report.problems[:0] = log_folder_problems(log if log.is_absolute() else here / log)
    return {**report.as_json(), "sglang_catalog": catalog.version, "report": render_text(report)}


def _refuse_unclosed_quote(text: str) -> None:
    where: list[int] = []
    ShellLexer(text, on_unterminated=where.append).run()
    if where:
        raise ToolInputError(
            f"malformed command: the quote at character {where[0] + 1} never closes"
        )
