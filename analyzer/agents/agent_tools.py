"""The agent tools as plain functions: checked inputs in, a bounded, redacted JSON dict out.

Each reuses what the command line runs, so an agent gets what `loganalyze` prints:
`analyze_logs` is the JSON report (formats/json_report.py over pipeline.analyze),
`log_metrics` is `loganalyze metrics --format json`, `flag_reading` is `catalog show` and
`catalog history` in one, `error_sites` is the error catalog's message lookup, and
`preflight` is the pre-flight of `loganalyze run` without the launch. Nothing here starts a
process but the optional SGLang argument check (preflight_adapter.py) and nvidia-smi.
Bad input raises ToolInputError; the server turns it into a tool error.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

from analyzer.agents.output_bounds import Trim, bounded, redacted
from analyzer.agents.preflight_adapter import preflight_command
from analyzer.agents.tool_inputs import (
    DEFAULT_MAX_CHARS,
    MAX_COMMAND_CHARS,
    MAX_MESSAGE_CHARS,
    PASTE_NAME,
    ToolInputError,
    checked_folder,
    checked_max_chars,
    checked_paths,
    checked_text,
    pasted_file,
)
from analyzer.sglang.catalog import FlagSpec, all_catalogs, load_catalog

MORE = "a higher max_chars (up to 2,000,000) gives more"
ANALYZE_HINT = f"{MORE}; `loganalyze PATH... --format json` in a shell gives it all"
METRICS_HINT = f"{MORE}; `loganalyze metrics PATH... --format json` in a shell gives it all"
ANALYZE_TRIMS = (
    Trim(("last_lines",)),
    Trim(("attempts",)),
    Trim(("incidents", "*", "alternatives")),
    Trim(("incidents", "*", "evidence"), keep=1),
    Trim(("warnings",)),
    Trim(("inputs", "*", "notes")),
    Trim(("inputs",), keep=1),
    Trim(("incidents",), keep=1),
)
METRICS_TRIMS = (
    Trim(("runs", "*", "chart")),
    Trim(("runs", "*", "startup", "phases")),
    Trim(("findings", "*", "evidence"), keep=1),
    Trim(("findings",)),
    Trim(("runs",), keep=1),
)
PREFLIGHT_TRIMS = (Trim(("notes",)), Trim(("problems",), keep=1))
SITES_TRIMS = (Trim(("sites",), keep=1),)
MAX_FLAG_CHARS = 200
# `ValueError: message` as a traceback's last line prints it; the type is optional
EXCEPTION_PREFIX = re.compile(
    r"\s*(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning))"
    r"(?::[ \t]*(?P<message>.*)|\s*)",
    re.S,
)


def analyze_logs(
    paths: list[str] | str | None = None,
    text: str | None = None,
    command: str | None = None,
    sglang_version: str | None = None,
    max_chars: int = DEFAULT_MAX_CHARS,
) -> dict[str, Any]:
    """The JSON report of logs or transcripts (paths) and/or a pasted log (`text`)."""
    from analyzer.formats.json_report import report_dict
    from analyzer.pipeline import Options, analyze

    checked_max_chars(max_chars)
    checked_text("command", command, MAX_COMMAND_CHARS, required=False)
    with _inputs(paths, text) as (named, pasted):
        options = Options(command=command, sglang_version=sglang_version, input_format="auto")
        payload = report_dict(analyze([*named, *pasted], options))
        for summary in payload["inputs"]:
            if summary["kind"] == "binary" and summary["path"] in named:
                raise ToolInputError(f"{summary['path']}: binary file, not a log or transcript")
        payload = _renamed(payload, pasted)
    return bounded(redacted(payload), max_chars, ANALYZE_TRIMS, ANALYZE_HINT)


def log_metrics(
    paths: list[str] | str | None = None,
    text: str | None = None,
    max_chars: int = DEFAULT_MAX_CHARS,
) -> dict[str, Any]:
    """Throughput, acceptance length and startup phases of each log, as `metrics --format json`."""
    from analyzer.core.read import open_inputs
    from analyzer.engine.redact import redact_incident, redact_run
    from analyzer.formats.metrics_table import metrics_dict
    from analyzer.metrics.compare import spec_findings
    from analyzer.metrics.extract import extract

    checked_max_chars(max_chars)
    with _inputs(paths, text) as (named, pasted):
        inputs = open_inputs([*named, *pasted])
        for text_input in inputs:
            if text_input.path in named and text_input.is_binary():
                raise ToolInputError(f"{text_input.path}: binary file, not a log")
        runs = [extract(i, workers=1) for i in inputs]  # no worker processes in the server
        findings = [redact_incident(f) for run in runs for f in spec_findings(run)]
        payload = metrics_dict([redact_run(r) for r in runs], findings)
        payload = _renamed(payload, pasted)
    return bounded(redacted(payload), max_chars, METRICS_TRIMS, METRICS_HINT)


def preflight(
    command: str,
    folder: str | None = None,
    sglang_version: str | None = None,
    ask_sglang: bool = False,
) -> dict[str, Any]:
    """The pre-flight report of a launch command, with the corrected command."""
    found = preflight_command(command, checked_folder(folder), sglang_version, ask_sglang)
    return bounded(redacted(found), DEFAULT_MAX_CHARS, PREFLIGHT_TRIMS, MORE)


def flag_reading(flag: str, sglang_version: str | None = None) -> dict[str, Any]:
    """How SGLang's parser reads a typed flag, and how every shipped release read it."""
    from analyzer.sglang.flag_history import shipped_history

    checked_text("flag", flag, MAX_FLAG_CHARS)
    typed = flag.strip()
    if not typed.startswith("-") or any(c.isspace() for c in typed):
        raise ToolInputError(
            f"{typed[:80]!r} is not a flag: give one as typed on the command line, e.g. --tp"
        )
    catalog = load_catalog(sglang_version)
    resolution = catalog.resolve(typed)
    history = shipped_history()
    found: dict[str, Any] = {
        "flag": typed,
        "sglang_catalog": catalog.version,
        "reading": resolution.kind,
        "option": _spec_dict(resolution.spec) if resolution.spec else None,
        "candidates": list(resolution.candidates),
        "change": None,
        "meant": [],
        "similar": [],
    }
    if resolution.spec is None:
        change = history.change(typed, catalog)
        found["change"] = change.explain(catalog.version) if change else None
        found["meant"] = history.meant(typed)
        found["similar"] = [{"option": o, "score": s} for o, s in catalog.similar(typed)]
    found["history"] = [_reading(c, typed) for c in all_catalogs()]
    return bounded(redacted(found), DEFAULT_MAX_CHARS, (Trim(("similar",)),), MORE)


def error_sites(
    message: str,
    exception_type: str | None = None,
    sglang_version: str | None = None,
    max_chars: int = DEFAULT_MAX_CHARS,
) -> dict[str, Any]:
    """SGLang's raise/assert sites that print `message`, with their conditions and flags."""
    from analyzer.sglang.error_catalog import load_error_catalog

    checked_max_chars(max_chars)
    checked_text("message", message, MAX_MESSAGE_CHARS)
    checked_text("exception_type", exception_type, MAX_FLAG_CHARS, required=False)
    typed = exception_type.strip() if exception_type and exception_type.strip() else None
    if typed is None and (prefix := EXCEPTION_PREFIX.fullmatch(message)):
        typed, message = prefix["type"], prefix["message"] or ""
    if not message.strip():
        raise ToolInputError(
            f"no message to look up after {typed}: a bare exception is placed by its traceback "
            "frame, so pass the whole traceback (or the log) to analyze"
        )
    catalog = load_error_catalog(sglang_version)
    sites, matched_by = catalog.place(typed, message), "message"
    if not sites:
        sites, matched_by = catalog.grep(message.strip()), "text"
    found = {
        "sglang_catalog": catalog.version,
        "exception_type": typed,
        "matched_by": matched_by if sites else "none",
        "count": len(sites),
        "sites": [_site_dict(s) for s in sites],
    }
    return bounded(redacted(found), max_chars, SITES_TRIMS, MORE)


@contextmanager
def _inputs(
    paths: list[str] | str | None, text: str | None
) -> Iterator[tuple[list[str], list[str]]]:
    """The checked paths (one path may come as a string), and the pasted text's file (deleted
    on leaving)."""
    named = checked_paths([paths] if isinstance(paths, str) else paths or [])
    if not named and text is None:
        raise ToolInputError("nothing to read: give paths, or the log text itself as text")
    with ExitStack() as stack:
        pasted = [stack.enter_context(pasted_file(text))] if text is not None else []
        yield named, pasted


def _renamed(value: Any, pasted: list[str]) -> Any:
    """The paste's temporary file named `<paste>` wherever the result shows it."""
    if not pasted:
        return value
    if isinstance(value, str):
        return value.replace(pasted[0], PASTE_NAME)
    if isinstance(value, list):
        return [_renamed(v, pasted) for v in value]
    if isinstance(value, dict):
        return {k: _renamed(v, pasted) for k, v in value.items()}
    return value


def _spec_dict(spec: FlagSpec) -> dict[str, Any]:
    return {
        "long": spec.long,
        "option_strings": list(spec.option_strings),
        "dest": spec.dest,
        "type": spec.type,
        "choices": list(spec.choices) if spec.choices is not None else None,
        "default": spec.default,
        "nargs": spec.nargs,
        "action": spec.action,
        "takes_value": spec.takes_value,
        "required": spec.required,
        "help": spec.help,
    }


def _reading(catalog, typed: str) -> dict[str, Any]:
    resolution = catalog.resolve(typed)
    spec = resolution.spec
    return {
        "sglang": catalog.version,
        "reading": resolution.kind,
        "option": spec.long if spec else None,
        "dest": spec.dest if spec else None,
        "candidates": list(resolution.candidates) if spec is None else [],
    }


def _site_dict(site) -> dict[str, Any]:
    return {
        "where": site.where,
        "function": site.function,
        "kind": site.kind,
        "exception": site.exception,
        "message": site.message,
        "condition": site.condition,
        "flags": list(site.flags),
        "condition_flags": list(site.condition_flags),
        "context": list(site.context),
        "context_flags": list(site.context_flags),
        "startup": site.startup,
    }
