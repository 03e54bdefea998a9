"""The agent `preflight` tool's one call into the pre-flight checks (run/preflight.py) and the
command verification (sglang/verify.py): the seam to switch when the two become one module.

The agent sends the command as it would type it (`nohup ... > log 2>&1 &`, `ssh host "..."`),
so the checks get the launch's own words and their edits go back into the agent's text: the
corrected command keeps every wrapper, redirection and quote around SGLang's arguments.
Checks of this machine (paths, log folder, GPUs) apply only to a launch that runs here.
"""

from __future__ import annotations

import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

from analyzer.agents.tool_inputs import MAX_COMMAND_CHARS, ToolInputError, checked_text
from analyzer.core.shell_words import ShellLexer
from analyzer.run.preflight import PATH_FLAGS, render_preflight, run_preflight
from analyzer.sglang.catalog import load_catalog
from analyzer.sglang.launch_command import LaunchCommand, parse_launch_command
from analyzer.sglang.verify import catalog_check, verify_command

REMOTE_WRAPPERS = ("ssh",)
LOCAL_CHECKS = ("paths", "log", "gpu")
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
    remote = any(w in REMOTE_WRAPPERS for w in launch.wrappers)
    log = Path(launch.log_path or "sglang.log")
    result = run_preflight(
        _launch_argv(launch, None if remote else folder),
        log if folder is None or log.is_absolute() else folder / log,
        catalog,
        gpu_probe=(lambda _env: None) if remote else None,
    )
    if remote:
        result.problems = [p for p in result.problems if p.check not in LOCAL_CHECKS]
        result.notes.append("runs over ssh: paths, log folder and GPUs were not checked here")
    if result.corrected:
        result.corrected = _corrected_text(launch, result.edits, catalog) or result.corrected
    result.command = command_text  # the report shows the agent's text, not the launch's words
    checked = result.corrected or command_text
    return {
        "verdict": "refused" if result.refused else "passed",
        "sglang_catalog": catalog.version,
        "command": command_text,
        "problems": [asdict(p) for p in result.problems],
        "notes": result.notes,
        "edits": [e.as_json() for e in result.edits],
        "corrected_command": result.corrected,
        "catalog_check": catalog_check(checked, catalog.version),
        "sglang_check": _ask_sglang(checked, catalog.version) if ask_sglang else None,
        "report": render_preflight(result),
    }


def _refuse_unclosed_quote(text: str) -> None:
    where: list[int] = []
    ShellLexer(text, on_unterminated=where.append).run()
    if where:
        raise ToolInputError(
            f"malformed command: the quote at character {where[0] + 1} never closes"
        )


def _launch_argv(launch: LaunchCommand, here: Path | None) -> list[str]:
    """The launch's own words (environment, entry point, arguments); model paths relative to
    `here` (the folder it runs in) made absolute so they are checked where they are."""
    argv = [f"{name}={value}" for name, value in launch.env.items()]
    argv += [*launch.entry.split(" "), *launch.positionals]
    for argument in launch.arguments:
        value = argument.value
        if value is not None and here is not None and argument.flag in PATH_FLAGS:
            value = _from(here, value)
        if value is None:
            argv.append(argument.flag)
        elif argument.joined:
            argv.append(f"{argument.flag}={value}")
        else:
            argv += [argument.flag, value]
    return argv


def _from(here: Path, value: str) -> str:
    """A relative local path as seen from `here`; hub ids (`org/name`) and absolute paths kept."""
    if os.path.isabs(value) or value.startswith("~"):
        return value
    if value.startswith(("./", "../")) or (here / value).exists():
        return str(here / value)
    return value


def _corrected_text(launch: LaunchCommand, edits: list, catalog) -> str | None:
    """The pre-flight's edits applied to the command as the agent wrote it."""
    try:
        return launch.apply(edits, catalog.canonical).render()
    except ValueError:
        return None


def _ask_sglang(command_text: str, version: str) -> dict[str, Any]:
    """The installed SGLang's own parser on the command (a subprocess that parses and
    resolves the arguments; it loads no model and opens no port)."""
    verdict = verify_command(command_text, timeout=SGLANG_TIMEOUT, catalog_version=version)
    return {**verdict.as_json(), "summary": verdict.describe()}
