"""The fix of a JSON-valued flag given a Python dict: the same value as JSON.

Its own module because it shares nothing with the flag fixes beyond FixContext/FixPlan.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Callable

from analyzer.core.lazy_pattern import LazyPattern
from analyzer.core.model import Edit, Finding
from analyzer.repair.fixes import FixContext, FixPlan

BARE_KEY = LazyPattern(r"([{,]\s*)([A-Za-z_][\w.-]*)\s*:")
TRAILING_COMMA = LazyPattern(r",\s*([}\]])")


def repair_json_argument(finding: Finding, ctx: FixContext) -> FixPlan:
    """A JSON-valued flag given a Python dict (single quotes, bare keys, a trailing comma):
    the same value as JSON, where its meaning is unambiguous."""
    plan = FixPlan()
    for argument in ctx.command.arguments:
        value = (argument.value or "").strip()
        if not value.startswith(("{", "[")) or _is_json(value):
            continue
        flag = ctx.catalog.canonical(argument.flag) or argument.flag
        plan.flags.append(flag)
        fixed = _as_json(value)
        if fixed is None:
            plan.notes.append(f"{flag} is not valid JSON: {value}")
            continue
        plan.edits.append(Edit("set", argument.flag, value=fixed))
        plan.notes.append(f"{flag} takes JSON: {value} is {fixed}")
    return plan


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _as_json(text: str) -> str | None:
    """A Python literal, or JSON with bare keys or trailing commas, rewritten as JSON."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, RecursionError, MemoryError):
        quoted = TRAILING_COMMA.sub(r"\1", BARE_KEY.sub(r'\1"\2":', text))
        try:
            value = json.loads(quoted)
        except ValueError:
            return None
    if not isinstance(value, (dict, list)):
        return None
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return None


JSON_FIXES: dict[str, Callable[[Finding, FixContext], FixPlan]] = {
    "repair_json_argument": repair_json_argument,
}
