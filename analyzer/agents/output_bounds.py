"""Tool results an agent can take in: secrets masked, size bounded, and a cut that says where.

A coding agent pays for every character a tool returns, and a report of a big log can run to
megabytes. A result over its limit is cut in a fixed order (the least useful parts first:
long log lines, then the lists each tool names), never inside a command, and its `cut` field
lists every cut made and where to get the whole. A result that cannot be cut small enough is
an error, not a silent fragment.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from analyzer.agents.tool_inputs import ToolInputError
from analyzer.engine.redact import redact_text

LONG_TEXT = 2_000  # characters kept of a longer string (a log line, a help text) when cutting
PROTECTED = frozenset({"command", "corrected_command"})  # commands are never cut
NOTES_ROOM = 1_000  # characters left for the cut notes when cutting


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

    The trims are applied in order until the result fits; then each but the last gets back
    as many items as still fit, the later (more useful) ones first. `hint` says where the
    whole result is to be had, in the last cut note.
    """
    result: dict[str, Any] = {**payload, "cut": []}
    if size(result) <= limit:
        return result
    shortened = [0]
    full = _short_texts(result, shortened)
    room = limit - NOTES_ROOM  # the cut notes take up to this much
    applied: list[_Applied] = []
    for trim in trims:
        if size(_apply(full, applied)) <= room:
            break
        lengths = _lengths(_apply(full, applied), trim.path)
        if max(lengths, default=0) > trim.keep:
            entry = _Applied(trim, trim.keep, max(lengths), len(lengths))
            applied.append(_most(full, [*applied, entry], len(applied), room))
    for index in reversed(range(len(applied) - 1)):  # give back what still fits
        applied[index] = _most(full, applied, index, room)
    result = _apply(full, applied)
    notes = [a.note() for a in applied if a.kept < a.longest]
    if shortened[0]:
        notes.insert(0, f"{shortened[0]} text(s) over {LONG_TEXT} characters cut short")
    result["cut"] = [*notes, hint]
    if size(result) > limit:
        raise ToolInputError(
            f"the result is {size(result):,} characters even cut down, over max_chars "
            f"({limit:,}): raise max_chars or pass fewer inputs"
        )
    return result


def _most(full: dict[str, Any], applied: list[_Applied], index: int, room: int) -> _Applied:
    """applied[index] keeping the most items (from what it keeps now) that still fit `room`."""
    entry = applied[index]
    low, high = entry.kept, entry.longest
    while low < high:
        middle = (low + high + 1) // 2
        trial = [*applied[:index], replace(entry, kept=middle), *applied[index + 1 :]]
        if size(_apply(full, trial)) <= room:
            low = middle
        else:
            high = middle - 1
    return replace(entry, kept=low)


@dataclass(frozen=True)
class _Applied:
    """A trim as applied: `kept` items of each list at its path, of `longest`, in `lists` lists."""

    trim: Trim
    kept: int
    longest: int
    lists: int

    def note(self) -> str:
        name = ".".join("[]" if s == "*" else s for s in self.trim.path).replace(".[]", "[]")
        if self.lists == 1:
            return f"{name}: the first {self.kept} of {self.longest} kept"
        return f"{name}: at most {self.kept} kept in each (the longest had {self.longest})"


def _apply(full: dict[str, Any], applied: list[_Applied]) -> dict[str, Any]:
    result = full
    for entry in applied:
        result = _truncated(result, entry.trim.path, entry.kept)
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
