"""The update step of the sidecar cases (docs/testing.md#updating-expectations).

`LOGANALYZE_UPDATE_CASES=1 python -m pytest tests/test_fixtures.py` rewrites, in each sidecar
whose `[expect]` values differ from what the analyzer now reports, only the keys that differ;
every other byte of the file stays. A normal run never writes.
"""

from __future__ import annotations

import os
import re
import warnings
from pathlib import Path
from typing import Any

import tomllib

from analyzer.core.model import Report
from analyzer.core.toml_data import toml_value
from tests.fixture_cases import Case

UPDATE_VARIABLE = "LOGANALYZE_UPDATE_CASES"
SERIOUS = ("fatal", "error")
# Keys whose value is read off the root incident; the others (`not_classes`, `*_contains`,
# `client_error`, `no_correction`, `verified`) are claims a person writes, never rewritten.
ROOT_KEYS = ("rule", "line", "command_source", "corrected_command")
KEY_LINE = re.compile(r"\s*([A-Za-z0-9_-]+)\s*=\s*")


def updating() -> bool:
    return os.environ.get(UPDATE_VARIABLE, "") not in ("", "0")


def expectation(case: Case, report: Report) -> dict[str, Any]:
    """The case's `[expect]`; when updating, first rewritten to what `report` shows."""
    if not updating() or case.sidecar is None:
        return case.expect
    changes = differences(case.expect, report)
    if not changes:
        return case.expect
    rewrite_expect(case.sidecar, changes)
    warnings.warn(f"{case.sidecar}: [expect] rewritten: {', '.join(changes)}", stacklevel=1)
    return {**case.expect, **changes}


def differences(expect: dict[str, Any], report: Report) -> dict[str, Any]:
    """The `[expect]` keys whose value differs from the report's, with the report's value
    (a value TOML cannot hold, such as no corrected command, is left for a person)."""
    observed = _observed(expect, report)
    changes = {}
    for key in expect:
        value = observed.get(key)
        if value is None:
            continue
        if key == "flags" and sorted(value) == sorted(expect[key]):
            continue
        if value != expect[key]:
            changes[key] = value
    return changes


def _observed(expect: dict[str, Any], report: Report) -> dict[str, Any]:
    incidents = report.incidents
    if expect["class"] == "none":
        serious = any(i.severity in SERIOUS for i in incidents)
        return {"class": incidents[0].rule_class if serious else "none"}
    if not incidents:
        return {"class": "none"}
    root = incidents[0]
    values: dict[str, Any] = {key: getattr(root, key) for key in ROOT_KEYS}
    values["flags"] = list(root.offending_flags)
    values["ranks"] = list(root.ranks)
    values["class"] = root.rule_class
    values["incidents"] = len(incidents)
    values["catalog_version"] = report.catalog_version
    return values


def rewrite_expect(sidecar: Path, changes: dict[str, Any]) -> None:
    """Give the `[expect]` keys of `changes` their new values in place, keeping every other
    byte: comments, order, layout, the other tables."""
    text = sidecar.read_text("utf-8")
    lines = text.splitlines(keepends=True)
    spans = _expect_spans(lines)
    for key in sorted(changes, key=lambda k: spans[k][0], reverse=True):
        start, end = spans[key]
        lines[start:end] = [_replaced("".join(lines[start:end]), changes[key])]
    updated = "".join(lines)
    before = tomllib.loads(text)
    expected = {**before, "expect": {**before["expect"], **changes}}
    if tomllib.loads(updated) != expected:
        raise ValueError(f"{sidecar}: the rewrite would change more than {sorted(changes)}")
    sidecar.write_text(updated, encoding="utf-8")


def _expect_spans(lines: list[str]) -> dict[str, tuple[int, int]]:
    """Each key of the `[expect]` table with the lines its `key = value` takes."""
    start = next(i for i, ln in enumerate(lines) if ln.split("#")[0].strip() == "[expect]")
    spans, index = {}, start + 1
    while index < len(lines):
        stripped = lines[index].strip()
        if stripped.startswith("["):
            break
        match = KEY_LINE.match(lines[index])
        if not stripped or stripped.startswith("#") or not match:
            index += 1
            continue
        end = index + 1
        while not _parses("".join(lines[index:end])):
            if end == len(lines):
                raise ValueError(f"[expect] key {match.group(1)} has no value that parses")
            end += 1
        spans[match.group(1)] = (index, end)
        index = end
    return spans


def _replaced(entry: str, value: Any) -> str:
    """`key = old  # comment` with the new value, the spacing and the comment kept."""
    head = KEY_LINE.match(entry).end()  # type: ignore[union-attr]
    body = entry[head:]
    old = tomllib.loads(entry)
    cut = len(body.rstrip("\r\n"))
    for position in [m.start() for m in re.finditer("#", body)]:
        before = entry[:head] + body[:position]
        if _parses(before) and tomllib.loads(before) == old:
            cut = position
            break
    kept = body[:cut].rstrip()
    return entry[:head] + toml_value(value) + body[len(kept) :]


def _parses(text: str) -> bool:
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return False
    return True
