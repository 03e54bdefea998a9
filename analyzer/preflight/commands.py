"""Checks from the command alone: the flag catalog (argparse's errors, in argparse's words),
the speculative trio, and the error catalog's startup conditions the command's values
decide, from analyzer/repair/predict.py as the repair search asks it. Each problem gets
the lines SGLang prints when it stops there."""

from __future__ import annotations

import json
import re
from typing import Any

from analyzer.preflight.report import Problem
from analyzer.repair.conditions import CommandValues, Unknown, evaluate, failing_sites
from analyzer.repair.predict import Predicted, flag_problems, speculative_problems, typed_values
from analyzer.repair.search import error_catalog
from analyzer.sglang.catalog import FlagCatalog
from analyzer.sglang.error_catalog import ErrorSite
from analyzer.sglang.launch_command import LaunchCommand

SITE = "/usr/lib/python3/site-packages"
PROG = "launch_server.py"
_FIELD = re.compile(r"\{([^{}]+)\}")
# speculative_hook.py _handle_eagle_family: a bare assert without steps, `None > 1` with them
TRIO_FRAME = ("srt/arg_groups/speculative_hook.py", "_handle_eagle_family")
TRIO_LINES = {
    "AssertionError": "AssertionError",
    "TypeError": "TypeError: '>' not supported between instances of 'NoneType' and 'int'",
}
TRIO_CODE = {
    "AssertionError": "and cfg.speculative_num_draft_tokens is None",
    "TypeError": "cfg.speculative_eagle_topk > 1",
}
UNKNOWN_ALGORITHM = ("srt/speculative/spec_info.py", "from_string")
# argparse types SGLang gives JSON-valued flags (json.loads, its json_list_type)
JSON_TYPES = ("loads", "json_list_type")

__all__ = ["command_problems", "typed_values"]


def command_problems(command: LaunchCommand, catalog: FlagCatalog) -> list[Problem]:
    """Parser problems first: with one, argparse stops and nothing later runs."""
    found = flag_problems(command, catalog)
    if found:
        return [_parser(p) for p in found]
    problems = _json_values(command, catalog)
    problems += [_speculative(p, catalog) for p in speculative_problems(command, catalog)]
    errors = error_catalog(catalog)
    if errors is not None:
        values = CommandValues(command, catalog)
        for site in failing_sites(command, catalog, errors, min_reads=1):
            problems.append(_condition(site, values))
    return problems


def _json_values(command: LaunchCommand, catalog: FlagCatalog) -> list[Problem]:
    """A JSON-valued flag (its help says JSON) given a value that opens like JSON but is
    not: argparse's `loads` type refuses it, resolution's json.loads raises otherwise."""
    problems = []
    for argument in command.arguments:
        spec = catalog.spec(argument.flag)
        value = (argument.value or "").strip()
        if spec is None or "json" not in (spec.help or "").lower():
            continue
        if not value.startswith(("{", "[")):
            continue
        try:
            json.loads(value)
            continue
        except ValueError as exc:
            said = str(exc)
        name = "/".join(spec.option_strings)
        if spec.type in JSON_TYPES:
            message = f"argument {name}: invalid {spec.type} value: {argument.value!r}"
            problems.append(_parser(Predicted("flags", message, [spec.long])))
            continue
        line = f"json.decoder.JSONDecodeError: {said}"
        frames = [("srt/server_args.py", "resolve_once", "run_resolution_pipeline(self)")]
        message = f"{spec.long} is not valid JSON ({said}): {argument.value}"
        problems.append(
            Problem(
                "json",
                "config_validation",
                [spec.long],
                message,
                True,
                log=traceback_text(frames, line),
            )
        )
    return problems


def _parser(predicted: Predicted) -> Problem:
    message = predicted.message
    kind = "argparse_unrecognized" if message.startswith("unrecognized") else "argparse_invalid"
    log = f"usage: {PROG} [-h] --model-path MODEL_PATH\n{PROG}: error: {message}\n"
    return Problem(
        "flags", kind, list(predicted.flags), message, True, log=log, edits=predicted.plan.edits
    )


def _speculative(predicted: Predicted, catalog: FlagCatalog) -> Problem:
    if predicted.raises in TRIO_LINES:
        frames = [(*TRIO_FRAME, TRIO_CODE[predicted.raises])]
        line = TRIO_LINES[predicted.raises]
    else:
        value = predicted.message.split("'")[1] if "'" in predicted.message else ""
        frames = [(*UNKNOWN_ALGORITHM, 'raise ValueError(f"Unknown speculative algorithm name')]
        line = f"ValueError: Unknown speculative algorithm name: {value}"
    return Problem(
        "speculative",
        "spec_assertion",
        list(predicted.flags),
        predicted.message,
        True,
        log=traceback_text(frames, line),
        edits=predicted.plan.edits,
    )


def _condition(site: ErrorSite, values: CommandValues) -> Problem:
    said = _rendered(site.message, values)
    line = f"{site.exception}: {said}" if said else site.exception
    code = f"assert {site.condition}" if site.kind == "assert" else f"if {site.condition}:"
    frames = [(site.file, site.function.rsplit(".", 1)[-1], code, site.line)]
    message = f"{line} ({site.file} {site.function}: {site.condition})"
    flags = list(dict.fromkeys([*site.condition_flags, *site.flags]))
    return Problem(
        "condition", "config_validation", flags, message, True, log=traceback_text(frames, line)
    )


def _rendered(template: str, values: CommandValues) -> str:
    """The message with its `{expr}` fields filled from the command where they can be."""

    def field(found: re.Match[str]) -> str:
        try:
            value: Any = evaluate(found.group(1), values)
        except Unknown:
            return found.group(0)
        return str(value)

    return _FIELD.sub(field, template).replace("{{", "{").replace("}}", "}")


def traceback_text(frames: list[tuple[Any, ...]], exception_line: str) -> str:
    """A Python traceback through SGLang's files (file, function, code[, line])."""
    lines = ["Traceback (most recent call last):"]
    for number, frame in enumerate(frames, 1):
        file, function, code = frame[:3]
        line = frame[3] if len(frame) > 3 else number
        lines.append(f'  File "{SITE}/sglang/{file}", line {line}, in {function}')
        lines.append(f"    {code}")
    lines.append(exception_line)
    return "\n".join(lines) + "\n"
