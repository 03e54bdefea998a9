"""Tool results an agent can take in: secrets masked, size bounded, and a cut that says where.

A coding agent pays for every character a tool returns, and a report of a big log can run to
megabytes. A result over its limit is cut in a fixed order (the least useful parts first:
long log lines, then the lists each tool names), never inside a command, and its `cut` field
lists every cut made. A result that cannot be cut small enough is an error, not a silent
fragment.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from analyzer.agents.tool_inputs import ToolInputError
from analyzer.engine.redact import redact_text

LONG_TEXT = 2_000  # characters kept of a longer string (a log line, a help text) when cutting
PROTECTED = frozenset({"command", "corrected_command"})  # commands are never cut


@dataclass(frozen=True)
class Trim:
    """A list the result may lose items of: its keys from the top, `*` for every item of a
    list on the way (`("incidents", "*", "evidence")`); `keep` items stay in any case."""

    path: tuple[str, ...]
    keep: int = 0


def size(payload: Any) -> int:
    """Characters of the result as the server sends it (indented JSON)."""
    return len(json.dumps(payload, indent=2, ensure_ascii=False))


def redacted(value: Any) -> Any:
    """Every string of a JSON-ready value with its secrets masked (engine/redact.py)."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, list):
        return [redacted(v) for v in value]
    if isinstance(value, dict):
        return {k: redacted(v) for k, v in value.items()}
    return value


def bounded(payload: dict[str, Any], limit: int, trims: Sequence[Trim], hint: str) -> dict:
    """The payload with a `cut` list, cut down to `limit` characters if it is longer.

    `hint` says where the whole result is to be had (a CLI command), in every cut note.
    """
    result: dict[str, Any] = {**payload, "cut": []}
    if size(result) <= limit:
        return result
    cuts: list[str] = []
    shortened = [0]
    result = _short_texts(result, shortened)
    if shortened[0]:
        cuts.append(
            f"{shortened[0]} text(s) longer than {LONG_TEXT} characters cut to {LONG_TEXT} "
            f"(each ends with `[cut N characters]`); {hint}"
        )
    for trim in trims:
        result["cut"] = cuts
        if size(result) <= limit:
            break
        result = _trimmed(result, trim, limit, cuts, hint)
    result["cut"] = cuts
    if size(result) > limit:
        raise ToolInputError(
            f"the result is {size(result):,} characters even cut down, over max_chars "
            f"({limit:,}): raise max_chars or pass fewer inputs"
        )
    return result


def _short_texts(value: Any, count: list[int], key: str | None = None) -> Any:
    if isinstance(value, str):
        if len(value) <= LONG_TEXT or key in PROTECTED:
            return value
        count[0] += 1
        return f"{value[:LONG_TEXT]} [cut {len(value) - LONG_TEXT} characters]"
    if isinstance(value, list):
        return [_short_texts(v, count, key) for v in value]
    if isinstance(value, dict):
        return {k: _short_texts(v, count, k) for k, v in value.items()}
    return value


def _trimmed(
    result: dict[str, Any], trim: Trim, limit: int, cuts: list[str], hint: str
) -> dict[str, Any]:
    """The result with every list at `trim.path` cut to the most items that fit (the same
    number for each), at least `trim.keep`."""
    lengths = _lengths(result, trim.path)
    longest = max(lengths, default=0)
    if longest <= trim.keep:
        return result
    low, high = trim.keep, longest  # the answer is in [low, high]; `low` always allowed
    while low < high:
        middle = (low + high + 1) // 2
        if size(_truncated(result, trim.path, middle)) <= limit:
            low = middle
        else:
            high = middle - 1
    name = ".".join("[]" if step == "*" else step for step in trim.path).replace(".[]", "[]")
    if len(lengths) == 1:
        cuts.append(f"{name}: the first {low} of {longest} kept; {hint}")
    else:
        cuts.append(f"{name}: at most {low} kept in each (the longest had {longest}); {hint}")
    return _truncated(result, trim.path, low)


def _lengths(value: Any, path: tuple[str, ...]) -> list[int]:
    if not path:
        return [len(value)] if isinstance(value, list) else []
    head, rest = path[0], path[1:]
    if head == "*":
        return [n for v in value for n in _lengths(v, rest)] if isinstance(value, list) else []
    if isinstance(value, dict) and head in value:
        return _lengths(value[head], rest)
    return []


def _truncated(value: Any, path: tuple[str, ...], keep: int) -> Any:
    if not path:
        return value[:keep] if isinstance(value, list) else value
    head, rest = path[0], path[1:]
    if head == "*":
        return [_truncated(v, rest, keep) for v in value] if isinstance(value, list) else value
    if isinstance(value, dict) and head in value:
        return {**value, head: _truncated(value[head], rest, keep)}
    return value
