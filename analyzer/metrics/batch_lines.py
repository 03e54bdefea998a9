"""The batch-line vocabulary and its slow, obvious parser: the reference for the fast path.

SGLang logs a `Decode batch` / `Prefill batch` stats line per scheduler step; its keys
changed across releases (`#token` then `#full token`, `[iteration]`, `cuda graph`,
trailing commas), so `BatchKind` names each kind's keys and the columns they fill, and
`parse_batch` reads one line by key name, whatever the shape. It is the truth that
`analyzer.metrics.fast_table` must reproduce exactly, and the path taken when it cannot.
Timestamps are read here too (`epoch_ms`, `format_ms`), as every other part needs them.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import lru_cache

from analyzer.core.model import Line

NAN = float("nan")

TIMESTAMP = re.compile(r"(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:[.,](\d+))?")


# ---- the batch-line vocabulary ----------------------------------------------------------


@dataclass(frozen=True)
class BatchKind:
    """One kind of periodic stats line: its marker, its keys and the columns they fill."""

    name: str
    marker: str
    keys: dict[str, str]
    columns: tuple[str, ...]
    required: str

    @property
    def marker_bytes(self) -> bytes:
        return self.marker.encode()

    def index(self, column: str) -> int:
        return self.columns.index(column)


PREFIX_COLUMNS = ("line", "time", "dp_rank", "iteration")
DECODE = BatchKind(
    "decode",
    "Decode batch",
    {
        "#running-req": "running_req",
        "#token": "tokens",
        "#full token": "tokens",
        "token usage": "token_usage",
        "full token usage": "token_usage",
        "accept len": "accept_len",
        "accept rate": "accept_rate",
        "gen throughput (token/s)": "gen_throughput",
        "#queue-req": "queue_req",
    },
    (
        *PREFIX_COLUMNS,
        "running_req",
        "tokens",
        "token_usage",
        "accept_len",
        "accept_rate",
        "graph",
        "gen_throughput",
        "queue_req",
    ),
    "gen_throughput",
)
PREFILL = BatchKind(
    "prefill",
    "Prefill batch",
    {
        "#new-seq": "new_seq",
        "#new-token": "new_tokens",
        "#cached-token": "cached_tokens",
        "token usage": "token_usage",
        "full token usage": "token_usage",
        "#running-req": "running_req",
        "#queue-req": "queue_req",
        "input throughput (token/s)": "input_throughput",
    },
    (
        *PREFIX_COLUMNS,
        "new_seq",
        "new_tokens",
        "cached_tokens",
        "token_usage",
        "running_req",
        "queue_req",
        "graph",
        "input_throughput",
    ),
    "new_tokens",
)
KINDS = (DECODE, PREFILL)


# ---- slow, obvious parsing (the reference the fast path is checked against) -------------


def parse_batch(line: Line, kind: BatchKind) -> dict[str, float] | None:
    """Values of one `Decode batch`/`Prefill batch` line, any SGLang version's shape.

    Keys are read by name, so extra keys (`cap len`, `pre-allocated usage`, MFU
    estimates) and their order never matter; None when the line is not a stats line.
    """
    parsed = split_batch(line.body, kind)
    if parsed is None:
        return None
    iteration, items, _ = parsed
    row: dict[str, float] = {"line": float(line.number), "time": epoch_ms(line.timestamp)}
    dp = dict(line.ranks).get("DP")
    row["dp_rank"] = float(dp) if dp is not None else NAN
    row["iteration"] = float(iteration) if iteration is not None else NAN
    for key, value in items:
        column = column_for(kind, key)
        if column is None or column in row:
            continue
        number = _number(value, column)
        if number is not None:
            row[column] = number
    return row if kind.required in row else None


def split_batch(
    body: str, kind: BatchKind
) -> tuple[int | None, list[tuple[str, str]], bool] | None:
    """(iteration, [(key, value)], trailing comma) of the text after the marker."""
    at = body.find(kind.marker)
    if at < 0:
        return None
    rest = body[at + len(kind.marker) :]
    iteration = None
    if rest.startswith(" ["):
        close = rest.find("]")
        if close > 2 and rest[2:close].isdigit():
            iteration = int(rest[2:close])
            rest = rest[close + 1 :]
    if rest[:1] in (".", ","):
        rest = rest[1:]
    rest = rest.strip()
    trailing = rest.endswith(",")
    items = []
    for item in rest.rstrip(",").split(", "):
        key, sep, value = item.partition(": ")
        if sep:
            items.append((key.strip(), value.strip()))
    return iteration, items, trailing


def column_for(kind: BatchKind, key: str) -> str | None:
    if key.endswith(" graph"):
        return "graph"
    return kind.keys.get(key)


def _number(value: str, column: str) -> float | None:
    if column == "graph":
        return {"True": 1.0, "False": 0.0}.get(value)
    try:
        return float(value)
    except ValueError:
        return None


@lru_cache(maxsize=4096)
def epoch_ms(timestamp: str | None) -> float:
    """Milliseconds since the epoch of an SGLang timestamp, read as UTC; NaN without one.

    Cached: consecutive lines mostly share their second.
    """
    if not timestamp:
        return NAN
    found = TIMESTAMP.match(timestamp)
    if not found:
        return NAN
    y, mo, d, h, mi, s = (int(found[i]) for i in range(1, 7))
    try:
        moment = datetime(y, mo, d, h, mi, s, tzinfo=timezone.utc)
    except ValueError:
        return NAN
    fraction = found[7] or ""
    return moment.timestamp() * 1000 + (int(fraction[:3].ljust(3, "0")) if fraction else 0)


def format_ms(value: float | None) -> str | None:
    """`2026-01-01 00:00:40` (milliseconds only when there are some)."""
    if value is None or math.isnan(value):
        return None
    moment = datetime.fromtimestamp(value / 1000, tz=timezone.utc)
    text = moment.strftime("%Y-%m-%d %H:%M:%S")
    millis = int(round(value)) % 1000
    return f"{text}.{millis:03d}" if millis else text
