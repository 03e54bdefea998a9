"""The byte-level fast path: one block's batch lines to a float64 table without a regex.

A busy server writes millions of `Decode batch` lines, and a regex with a dozen groups
costs more per line than the whole budget. So a block's decode lines (picked out by
`analyzer.metrics.scanner` with C-level list operations) are turned into plain numeric
CSV by one `bytes.translate`, and parsed by numpy's C `loadtxt`. The field layout is
derived per block from one line parsed the slow, obvious way (`parse_batch`) and must
reproduce it exactly; the block's first and last rows are then checked against
`parse_batch` too. A block that does not fit (mixed shapes, unknown keys, colour codes)
is parsed line by line with `parse_batch`, so the fast path is faster, never different.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass

import numpy as np

from analyzer.core.model import Line
from analyzer.metrics.batch_lines import NAN, BatchKind, column_for, split_batch

KEPT_BYTES = b"0123456789.,\n"
# "P" becomes a comma: it ends every rank tag (TP0, DP1, EP2) and occurs nowhere else in
# a batch line, so ranks become fields of their own without a replace pass.
SEPARATOR_TABLE = bytes.maketrans(b"P", b",")
DELETE_BYTES = bytes(c for c in range(256) if c not in KEPT_BYTES and c != ord("P"))


@dataclass(frozen=True)
class _Layout:
    """How one block's lines become numeric CSV, and which CSV field is which column."""

    replaces: tuple[tuple[bytes, bytes], ...]
    usecols: tuple[int, ...]
    columns: tuple[str, ...]
    has_graph_values: bool
    has_graph_field: bool


SUMMARY_SKIPS = frozenset({"tokens", "iteration"})


def layout(raw: bytes, line: Line, kind: BatchKind, graph_values: bool) -> _Layout | None:
    """Derive the CSV layout from one line, or None when the line does not fit one.

    The layout is simulated from the slow parse and must reproduce the transformed
    line exactly, so a key with digits, a value with letters or an unknown prefix
    falls back to the slow path instead of shifting columns.
    """
    parsed = split_batch(line.body, kind)
    if parsed is None or line.actor or b"\x1b" in raw or not line.body.startswith(kind.marker):
        return None
    iteration, items, trailing = parsed
    marker = kind.marker_bytes
    replaces: list[tuple[bytes, bytes]] = []
    after = line.body[len(kind.marker) :]
    if after.startswith("."):
        replaces.append((marker + b".", marker + b","))
    if iteration is not None:
        replaces.append((marker + b" [", marker + b",["))
    if graph_values:
        replaces += [(b"True", b"1rue"), (b"False", b"0alse")]
    fields: list[tuple[bytes, str | None]] = []
    if line.timestamp:
        parts = _kept(line.timestamp.encode()).split(b",")
        if len(parts) > 2 or (len(parts) == 2 and len(parts[1]) != 3):
            return None
        fields += list(zip(parts, ("time", "time_ms"), strict=False))
    else:
        fields.append((b"", None))
    fields += [
        (str(number).encode(), "dp_rank" if tag == "DP" else None) for tag, number in line.ranks
    ]
    fields += [(b"", None)] * _kept(marker).count(b",")  # the P of "Prefill batch"
    if iteration is not None:
        fields.append((str(iteration).encode(), "iteration"))
    for key, value in items:
        if _kept(key.encode()):
            return None
        column = column_for(kind, key)
        text = value.encode()
        if column == "graph":
            text = {b"True": b"1", b"False": b"0"}.get(text, text) if graph_values else b""
            kept = _kept(text)
        else:
            kept = _kept(text)
        wanted = column if kept and column and (column != "graph" or graph_values) else None
        fields.append((kept, wanted))
    if trailing:
        fields.append((b"", None))
    transformed = _transform(raw, tuple(replaces))
    if transformed != b",".join(text for text, _ in fields):
        return None
    named = [(i, name) for i, (_, name) in enumerate(fields) if name]
    if len({name for _, name in named}) != len(named):
        return None
    if not graph_values:  # a summary only: skip what it does not use, parsing is the cost
        named = [(i, name) for i, name in named if name not in SUMMARY_SKIPS]
    has_graph = any(column_for(kind, key) == "graph" for key, _ in items)
    return _Layout(
        tuple(replaces),
        tuple(i for i, _ in named),
        tuple(n for _, n in named),
        graph_values,
        has_graph,
    )


def _kept(text: bytes) -> bytes:
    return text.translate(SEPARATOR_TABLE, DELETE_BYTES)


def _transform(text: bytes, replaces: tuple[tuple[bytes, bytes], ...]) -> bytes:
    # Equal-length replacements: CPython does them in place, without counting first.
    for old, new in replaces:
        text = text.replace(old, new)
    return text.translate(SEPARATOR_TABLE, DELETE_BYTES)


def fast_table(joined: bytes, rows: int, layout: _Layout, kind: BatchKind) -> np.ndarray | None:
    """The block's rows as a float64 table, or None when numpy cannot read them all."""
    text = _transform(joined, layout.replaces)
    try:
        values = np.loadtxt(
            io.BytesIO(text), delimiter=",", usecols=layout.usecols, ndmin=2, comments=None
        )
    except ValueError:
        return None
    if values.shape != (rows, len(layout.columns)):
        return None
    table = np.full((rows, len(kind.columns)), NAN)
    for source, column in enumerate(layout.columns):
        if column not in ("time", "time_ms"):
            table[:, kind.index(column)] = values[:, source]
    if "time" in layout.columns:
        millis = values[:, layout.columns.index("time_ms")] if "time_ms" in layout.columns else None
        table[:, kind.index("time")] = _digits_to_ms(
            values[:, layout.columns.index("time")], millis
        )
    return table


def _digits_to_ms(stamp: np.ndarray, millis: np.ndarray | None) -> np.ndarray:
    """YYYYMMDDhhmmss numbers (as the translate leaves them) to epoch milliseconds."""
    whole = np.floor(stamp)
    rest = whole.astype(np.int64)
    seconds, rest = rest % 100, rest // 100
    minutes, rest = rest % 100, rest // 100
    hours, rest = rest % 100, rest // 100
    days, rest = rest % 100, rest // 100
    months, years = rest % 100, rest // 100
    month_index = (years - 1970) * 12 + (months - 1)
    day_index = month_index.astype("datetime64[M]").astype("datetime64[D]").astype(np.int64)
    out = (day_index + days - 1) * 86_400_000.0 + hours * 3_600_000.0
    out += minutes * 60_000.0 + seconds * 1000.0 + np.round((stamp - whole) * 1000)
    if millis is not None:
        out += millis
    return out


def same_row(fast: np.ndarray, slow: dict[str, float], kind: BatchKind, layout: _Layout) -> bool:
    """The fast row agrees with the reference on every column the layout reads."""
    for index, column in enumerate(kind.columns):
        if column not in layout.columns:
            continue
        a, b = fast[index], slow.get(column, NAN)
        if math.isnan(a) and math.isnan(b):
            continue
        if math.isnan(a) or math.isnan(b) or abs(a - b) > 1e-9 * max(1.0, abs(b)):
            return False
    return True
