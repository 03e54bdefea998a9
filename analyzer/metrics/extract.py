"""Per-run metrics from SGLang logs: configuration, decode/prefill series, startup phases.

A server that does not crash can still miss its purpose (EAGLE-3 slower than no
speculation); the numbers to tell are already in the log. This module reads them in
one streaming pass over the bytes, in 4 MiB blocks, and returns plain dataclasses
(`RunMetrics`) for `analyzer.metrics.compare` and the renderers.

Why it looks the way it does: a busy server writes millions of `Decode batch` lines,
and a regex with a dozen groups costs more per line than the whole budget. So a block's
decode lines are picked out with C-level list operations, turned into plain numeric CSV
by one `bytes.translate`, and parsed by numpy's C `loadtxt`. The field layout is
derived per block from one line parsed the slow, obvious way (`parse_batch`) and must
reproduce it exactly; the block's first and last rows are then checked against
`parse_batch` too. A block that does not fit (mixed shapes, unknown keys, colour codes)
is parsed line by line with `parse_batch`, so the fast path is faster, never different.
Big plain files are cut into byte ranges scanned by worker processes; aggregates are
exact (integer sums, histograms, kept throughput values) so the cut never shows.

pandas is imported only when a series is turned into a DataFrame.
"""

from __future__ import annotations

import gzip
import io
import math
import os
import re
import sys
import zlib
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from functools import lru_cache
from itertools import compress, islice, repeat
from operator import contains, not_
from pathlib import Path
from typing import Any

import numpy as np

from analyzer.core.model import Line
from analyzer.core.read import GZIP_MAGIC, TextInput, open_inputs
from analyzer.engine.scan import parse_server_args, split_prefix

BLOCK_BYTES = 4 << 20  # measured: 4 MiB beats 8 (cache) and keeps RSS down
MAX_CARRY_BYTES = 64 << 20
PARALLEL_MIN_BYTES = 64 << 20
MAX_WORKERS = 4
CHART_CELLS = 512
MAX_HISTOGRAM_VALUE = 1 << 16
SUM_SCALE = 10_000
NAN = float("nan")

KEPT_BYTES = b"0123456789.,\n"
# "P" becomes a comma: it ends every rank tag (TP0, DP1, EP2) and occurs nowhere else in
# a batch line, so ranks become fields of their own without a replace pass.
SEPARATOR_TABLE = bytes.maketrans(b"P", b",")
DELETE_BYTES = bytes(c for c in range(256) if c not in KEPT_BYTES and c != ord("P"))

# Markers follow SGLang's `[time ranks] message` prefix, hence the literal "] " anchor,
# which lets `re` skip from line to line instead of trying every position.
MARKER = re.compile(
    rb"\] (?:Load weight |KV Cache is allocated|Capture |max_total_num_tokens=|server_args="
    rb"|The server is fired up)"
)
TIMESTAMP = re.compile(r"(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:[.,](\d+))?")
ELAPSED = re.compile(r"(?:elapsed=|Time elapsed: )(\d+(?:\.\d+)?) ?s")
MEM_USAGE = re.compile(r"mem usage=(\d+(?:\.\d+)?) GB")
MODEL_TYPE = re.compile(r"\btype=(\w+)")
KV_TOKENS = re.compile(r"#tokens: (\d+)")
KV_SIZE = re.compile(r"\b(?:KV|K|V) size: (\d+(?:\.\d+)?) GB")
KV_DTYPE = re.compile(r"dtype: ([\w.]+)")
CAPTURE = re.compile(r"Capture (.+?) (begin|end)\b")
SCHEDULER_LIMIT = re.compile(
    r"\b(max_total_num_tokens|chunked_prefill_size|max_prefill_tokens|max_running_requests"
    r"|context_len)=(-?\d+)"
)
READY_MARKER = "The server is fired up and ready to roll"


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


# ---- the results ----------------------------------------------------------------------


@dataclass(frozen=True)
class Stat:
    """Distribution of one quantity; quantiles are numpy's linear ones (None: not kept)."""

    count: int
    mean: float | None
    minimum: float | None
    maximum: float | None
    median: float | None = None
    p10: float | None = None
    p90: float | None = None


@dataclass
class DecodeSummary:
    lines: int = 0
    gen_throughput: Stat | None = None
    accept_len: Stat | None = None
    accept_rate: Stat | None = None
    running_req: Stat | None = None
    token_usage: Stat | None = None
    queue_req: Stat | None = None
    graph_share: float | None = None
    first_time_ms: float | None = None
    last_time_ms: float | None = None
    dp_ranks: list[int] = field(default_factory=list)


@dataclass
class PrefillSummary:
    lines: int = 0
    new_tokens: int = 0
    cached_tokens: int = 0
    new_seq: int = 0
    input_throughput: Stat | None = None
    queue_req: Stat | None = None

    @property
    def cache_hit_share(self) -> float | None:
        total = self.new_tokens + self.cached_tokens
        return self.cached_tokens / total if total else None


@dataclass(frozen=True)
class StartupPhase:
    """One startup step: weight load, KV cache allocation, or a graph capture."""

    name: str
    label: str
    line: int
    seconds: float | None = None
    mem_gb: float | None = None
    tokens: int | None = None
    size_gb: float | None = None


@dataclass
class StartupSummary:
    phases: list[StartupPhase] = field(default_factory=list)
    started_ms: float | None = None
    ready_ms: float | None = None
    ready_line: int | None = None
    limits: dict[str, int] = field(default_factory=dict)
    startups: int = 0

    @property
    def time_to_ready_s(self) -> float | None:
        if self.started_ms is None or self.ready_ms is None:
            return None
        return (self.ready_ms - self.started_ms) / 1000


@dataclass(frozen=True)
class ChartPoint:
    """Mean decode throughput and accept length over one time cell (for the HTML charts)."""

    time_ms: float
    gen_throughput: float
    accept_len: float | None
    lines: int


@dataclass
class BatchSeries:
    """Every parsed batch line of one kind, as a float64 table (NaN: not in the line)."""

    kind: BatchKind
    table: np.ndarray

    def frame(self, source: str):
        """A pandas DataFrame; `time` becomes datetime64, counts become nullable ints."""
        import pandas as pd

        data: dict[str, Any] = {"source": source, "kind": self.kind.name}
        for index, column in enumerate(self.kind.columns):
            values = self.table[:, index]
            if column == "time":
                data[column] = pd.to_datetime(values, unit="ms")
            elif column in FLOAT_COLUMNS:
                data[column] = values
            else:
                data[column] = pd.array(
                    np.where(np.isnan(values), 0, values).astype(np.int64), dtype="Int64"
                )
                data[column][np.isnan(values)] = pd.NA
        return pd.DataFrame(data)


FLOAT_COLUMNS = frozenset(
    {"token_usage", "accept_len", "accept_rate", "gen_throughput", "input_throughput"}
)


@dataclass
class RunMetrics:
    """Everything `metrics` and `compare` report about one log."""

    source: str
    lines: int
    config: dict[str, Any]
    server_args_line: int | None
    decode: DecodeSummary
    prefill: PrefillSummary
    startup: StartupSummary
    chart: list[ChartPoint] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    first_decode: Line | None = None
    slow_lines: int = 0
    series: dict[str, BatchSeries] | None = None
    # the flag that sets the largest CUDA-graph decode batch, in this run's SGLang
    graph_limit_flag: str = "--cuda-graph-max-bs-decode"

    @property
    def speculative(self) -> bool:
        algorithm = self.config.get("algorithm")
        if algorithm not in (None, "NONE"):
            return True
        return bool(self.decode.accept_len and self.decode.accept_len.count)

    def series_frame(self):
        """Decode and prefill rows in log order, one DataFrame (needs keep_series)."""
        if self.series is None:
            raise ValueError("metrics were extracted without keep_series")
        return series_frame(self.source, self.series["decode"].table, self.series["prefill"].table)


SeriesSink = Any  # a callable(decode_table | None, prefill_table | None)
SERIES_COLUMNS = ("source", "kind", *dict.fromkeys(DECODE.columns + PREFILL.columns))


def series_frame(source: str, decode: np.ndarray | None, prefill: np.ndarray | None):
    """Rows of both kinds as one DataFrame in log order, with a fixed set of columns."""
    import pandas as pd

    frames = [
        BatchSeries(kind, table).frame(source)
        for kind, table in ((DECODE, decode), (PREFILL, prefill))
        if table is not None and len(table)
    ]
    if not frames:
        return pd.DataFrame(columns=list(SERIES_COLUMNS))
    merged = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    merged = merged.sort_values("line", kind="stable", ignore_index=True)
    return merged.reindex(columns=list(SERIES_COLUMNS))


# ---- slow, obvious parsing (the reference the fast path is checked against) -------------


def parse_batch(line: Line, kind: BatchKind) -> dict[str, float] | None:
    """Values of one `Decode batch`/`Prefill batch` line, any SGLang version's shape.

    Keys are read by name, so extra keys (`cap len`, `pre-allocated usage`, MFU
    estimates) and their order never matter; None when the line is not a stats line.
    """
    parsed = _split_batch(line.body, kind)
    if parsed is None:
        return None
    iteration, items, _ = parsed
    row: dict[str, float] = {"line": float(line.number), "time": epoch_ms(line.timestamp)}
    dp = dict(line.ranks).get("DP")
    row["dp_rank"] = float(dp) if dp is not None else NAN
    row["iteration"] = float(iteration) if iteration is not None else NAN
    for key, value in items:
        column = _column_for(kind, key)
        if column is None or column in row:
            continue
        number = _number(value, column)
        if number is not None:
            row[column] = number
    return row if kind.required in row else None


def _split_batch(
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


def _column_for(kind: BatchKind, key: str) -> str | None:
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


# ---- the fast path ----------------------------------------------------------------------


@dataclass(frozen=True)
class _Layout:
    """How one block's lines become numeric CSV, and which CSV field is which column."""

    replaces: tuple[tuple[bytes, bytes], ...]
    usecols: tuple[int, ...]
    columns: tuple[str, ...]
    has_graph_values: bool
    has_graph_field: bool


SUMMARY_SKIPS = frozenset({"tokens", "iteration"})


def _layout(raw: bytes, line: Line, kind: BatchKind, graph_values: bool) -> _Layout | None:
    """Derive the CSV layout from one line, or None when the line does not fit one.

    The layout is simulated from the slow parse and must reproduce the transformed
    line exactly, so a key with digits, a value with letters or an unknown prefix
    falls back to the slow path instead of shifting columns.
    """
    parsed = _split_batch(line.body, kind)
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
        column = _column_for(kind, key)
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
    has_graph = any(_column_for(kind, key) == "graph" for key, _ in items)
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


def _fast_table(joined: bytes, rows: int, layout: _Layout, kind: BatchKind) -> np.ndarray | None:
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


def _same_row(fast: np.ndarray, slow: dict[str, float], kind: BatchKind, layout: _Layout) -> bool:
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


# ---- accumulation (mergeable, so worker processes can each scan a range) ---------------


class _Columns:
    """Running aggregates of one batch kind: exact, bounded, mergeable."""

    SUMMED = (
        "accept_len",
        "accept_rate",
        "token_usage",
        "queue_req",
        "running_req",
        "gen_throughput",
        "input_throughput",
    )
    KEPT = {"decode": ("gen_throughput",), "prefill": ("input_throughput",)}

    def __init__(self, kind: BatchKind, keep_series: bool) -> None:
        self.kind = kind
        self.rows = 0
        self.sums: dict[str, list[float]] = {}
        self.kept: dict[str, list[np.ndarray]] = {c: [] for c in self.KEPT[kind.name]}
        self.running_hist = np.zeros(0, dtype=np.int64)
        self.graph = [0, 0]
        self.totals: dict[str, float] = {}
        self.first_time = NAN
        self.last_time = NAN
        self.dp_ranks: set[int] = set()
        self.chart = _TimeCells() if kind is DECODE else None
        self.series: list[np.ndarray] | None = [] if keep_series else None

    def add(self, table: np.ndarray, graph_counts: tuple[int, int] | None = None) -> None:
        if not len(table):
            return
        self.rows += len(table)
        column = {name: table[:, i] for i, name in enumerate(self.kind.columns)}
        for name in self.SUMMED:
            if name in column:
                self._sum(name, column[name])
        for name in self.kept:
            values = column[name]
            self.kept[name].append(values[~np.isnan(values)].copy())
        for name in ("new_tokens", "cached_tokens", "new_seq"):
            if name in column:
                self.totals[name] = self.totals.get(name, 0.0) + float(np.nansum(column[name]))
        self._histogram(column["running_req"])
        if graph_counts is None:
            graph = column["graph"]
            graph_counts = (int(np.sum(graph == 1)), int(np.sum(graph == 0)))
        self.graph = [self.graph[0] + graph_counts[0], self.graph[1] + graph_counts[1]]
        self._times(column["time"])
        dp = column["dp_rank"]
        if not np.isnan(dp).all():
            self.dp_ranks |= {int(v) for v in np.unique(dp[~np.isnan(dp)])}
        if self.chart is not None:
            self.chart.add(column["time"], column["gen_throughput"], column["accept_len"])
        if self.series is not None:
            self.series.append(table)

    def _sum(self, name: str, values: np.ndarray) -> None:
        present = values[~np.isnan(values)]
        if not len(present):
            return
        count, total, low, high = self.sums.get(name, [0, 0, math.inf, -math.inf])
        # Summed as integers of 1e-4 units: exact, so the mean does not depend on how the
        # log was cut into blocks and ranges (SGLang prints two decimals).
        scaled = int(np.round(present * SUM_SCALE).astype(np.int64).sum())
        self.sums[name] = [
            count + len(present),
            total + scaled,
            min(low, float(present.min())),
            max(high, float(present.max())),
        ]

    def _histogram(self, running: np.ndarray) -> None:
        values = running[~np.isnan(running)]
        values = values[(values >= 0) & (values < MAX_HISTOGRAM_VALUE)].astype(np.int64)
        if len(values):
            self.running_hist = _add_padded(self.running_hist, np.bincount(values))

    def _times(self, times: np.ndarray) -> None:
        present = times[~np.isnan(times)]
        if len(present):
            if math.isnan(self.first_time):
                self.first_time = float(present[0])
            self.last_time = float(present[-1])

    def merge(self, other: _Columns, line_offset: int) -> None:
        """Append `other`, which covers the text right after this one's."""
        self.rows += other.rows
        for name, (count, total, low, high) in other.sums.items():
            mine = self.sums.get(name, [0, 0, math.inf, -math.inf])
            self.sums[name] = [
                mine[0] + count,
                mine[1] + total,
                min(mine[2], low),
                max(mine[3], high),
            ]
        for name, chunks in other.kept.items():
            self.kept[name].extend(chunks)
        for name, total in other.totals.items():
            self.totals[name] = self.totals.get(name, 0.0) + total
        self.running_hist = _add_padded(self.running_hist, other.running_hist)
        self.graph = [self.graph[0] + other.graph[0], self.graph[1] + other.graph[1]]
        if math.isnan(self.first_time):
            self.first_time = other.first_time
        if not math.isnan(other.last_time):
            self.last_time = other.last_time
        self.dp_ranks |= other.dp_ranks
        if self.chart is not None and other.chart is not None:
            self.chart.merge(other.chart)
        if self.series is not None and other.series is not None:
            for table in other.series:
                shifted = table.copy()
                shifted[:, 0] += line_offset
                self.series.append(shifted)

    def stat(self, name: str, quantiles: bool = False) -> Stat | None:
        if name not in self.sums:
            return None
        count, total, low, high = self.sums[name]
        if not quantiles:
            return Stat(count, total / SUM_SCALE / count, low, high)
        if name == "running_req":
            median, p10, p90 = (_histogram_quantile(self.running_hist, q) for q in (0.5, 0.1, 0.9))
        else:
            values = np.concatenate(self.kept[name])
            self.kept[name] = [values]
            median, p10, p90 = _quantiles(values, (0.5, 0.1, 0.9))
        return Stat(count, total / SUM_SCALE / count, low, high, median, p10, p90)


def _quantiles(values: np.ndarray, qs: tuple[float, ...]) -> list[float]:
    """numpy's linear quantiles, by partitioning in place (no sorted copy of a big array)."""
    positions = [(len(values) - 1) * q for q in qs]
    wanted = sorted({i for p in positions for i in (math.floor(p), math.ceil(p))})
    values.partition(wanted)
    out = []
    for position in positions:
        low, high = values[math.floor(position)], values[math.ceil(position)]
        out.append(float(low + (high - low) * (position - math.floor(position))))
    return out


def _add_padded(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if len(a) < len(b):
        a, b = b, a
    out = a.copy()
    out[: len(b)] += b
    return out


def _histogram_quantile(counts: np.ndarray, q: float) -> float | None:
    """numpy's linear quantile of the values a bincount histogram describes."""
    total = int(counts.sum())
    if not total:
        return None
    position = (total - 1) * q
    below, above = math.floor(position), math.ceil(position)
    cumulative = np.cumsum(counts)
    low = float(np.searchsorted(cumulative, below, side="right"))
    high = float(np.searchsorted(cumulative, above, side="right"))
    return low + (high - low) * (position - below)


class _TimeCells:
    """Throughput and accept length summed per time cell, for charts.

    Cells are aligned to multiples of their width (1 s doubled as needed), so cells of
    different workers nest and the result does not depend on how the file was cut.
    """

    def __init__(self) -> None:
        self.width = 1000
        self.cells: dict[int, list[float]] = {}

    def add(self, times: np.ndarray, throughput: np.ndarray, accept: np.ndarray) -> None:
        keep = ~np.isnan(times) & ~np.isnan(throughput)
        if not keep.any():
            return
        times, throughput, accept = times[keep], throughput[keep], accept[keep]
        while True:
            index = np.floor_divide(times, self.width).astype(np.int64)
            starts = np.flatnonzero(np.r_[True, index[1:] != index[:-1]])
            if len(starts) <= CHART_CELLS:
                break
            self._coarsen()
        has_accept = ~np.isnan(accept)
        sums = (
            np.diff(np.r_[starts, len(index)]),
            np.add.reduceat(throughput, starts),
            np.add.reduceat(has_accept.astype(np.int64), starts),
            np.add.reduceat(np.where(has_accept, accept, 0.0), starts),
        )
        for cell, *values in zip(index[starts].tolist(), *(s.tolist() for s in sums), strict=True):
            self._put(cell, values)
        while len(self.cells) > CHART_CELLS:
            self._coarsen()

    def _put(self, cell: int, values: list[float]) -> None:
        mine = self.cells.setdefault(cell, [0, 0.0, 0, 0.0])
        for i, value in enumerate(values):
            mine[i] += value

    def _coarsen(self) -> None:
        self.width *= 2
        old, self.cells = self.cells, {}
        for cell, values in old.items():
            self._put(cell // 2, values)

    def merge(self, other: _TimeCells) -> None:
        while self.width < other.width:
            self._coarsen()
        factor = self.width // other.width
        for cell, values in other.cells.items():
            self._put(cell // factor, values)
        while len(self.cells) > CHART_CELLS:
            self._coarsen()

    def points(self) -> list[ChartPoint]:
        return [
            ChartPoint(
                float(cell * self.width),
                round(v[1] / v[0], 4),
                round(v[3] / v[2], 4) if v[2] else None,
                int(v[0]),
            )
            for cell, v in sorted(self.cells.items())
        ]


# ---- scanning -------------------------------------------------------------------------


@dataclass
class _Partial:
    """What one scan of (part of) a log produced; line numbers relative to its start."""

    lines: int
    decode: _Columns
    prefill: _Columns
    events: list[Line]
    first_time: float
    first_decode: Line | None
    slow_lines: int


class _Numbers:
    """Line numbers of the lines that successive flag lists select, built only on demand.

    A summary needs just the first and last number of a block's selection; only a
    series needs them all.
    """

    def __init__(self, base: int, *levels: list[bool]) -> None:
        self.base, self.levels = base, levels

    def _chain(self) -> Iterator[int]:
        numbers: Iterator[int] = iter(range(self.base + 1, self.base + 1 + len(self.levels[0])))
        for flags in self.levels:
            numbers = compress(numbers, flags)
        return numbers

    def first(self) -> int:
        return next(self._chain())

    def last(self) -> int:
        if len(self.levels) == 1:
            flags = self.levels[0]
            return self.base + len(flags) - flags[::-1].index(True)
        count = self.levels[-1].count(True)
        return next(islice(self._chain(), count - 1, None))

    def all(self) -> list[int]:
        return list(self._chain())


class _LineFinder:
    """The whole lines (and their numbers) around regex matches in one block."""

    def __init__(self, block: bytes, base: int) -> None:
        self.block, self.base = block, base
        self.position, self.newlines = 0, 0

    def lines(self, matches: Iterator[re.Match[bytes]]) -> list[tuple[int, bytes]]:
        found: list[tuple[int, bytes]] = []
        for match in matches:
            start = self.block.rfind(b"\n", 0, match.start()) + 1
            if found and start <= self.position:
                continue  # a second match on the same line
            self.newlines += self.block.count(b"\n", self.position, start)
            self.position = start
            end = self.block.find(b"\n", start)
            found.append(
                (self.base + self.newlines + 1, self.block[start : end if end >= 0 else None])
            )
        return found


class _Scanner:
    """Feeds blocks of whole lines; the fast path per block, the slow one when needed."""

    def __init__(
        self, source: str, keep_series: bool, find_first_time: bool, sink: SeriesSink | None = None
    ) -> None:
        self.source = source
        self.keep_series = keep_series
        self.full_rows = keep_series or sink is not None
        self.sink = sink
        self.pending: dict[str, np.ndarray] = {}
        self.columns = {
            DECODE.name: _Columns(DECODE, keep_series),
            PREFILL.name: _Columns(PREFILL, keep_series),
        }
        self.events: list[Line] = []
        self.lines = 0
        self.first_time = NAN if find_first_time else -1.0
        self.first_decode: Line | None = None
        self.slow_lines = 0

    def feed(self, block: bytes) -> None:
        lines = block.split(b"\n")
        if lines[-1] == b"":
            lines.pop()
        base = self.lines
        self.lines += len(lines)
        if math.isnan(self.first_time):
            self._first_time(lines, base)
        # Decode lines are most of a busy log: picked out with C-level list operations.
        flags = list(map(contains, lines, repeat(DECODE.marker_bytes)))
        if True in flags:
            self._batches(DECODE, list(compress(lines, flags)), _Numbers(base, flags))
        if all(flags):
            self._flush()
            return
        # The other lines are few: prefill lines by list operations again, startup markers
        # by a regex over their joined text, with Python work only on a hit.
        rest = list(map(not_, flags))
        others = list(compress(lines, rest))
        prefill = list(map(contains, others, repeat(PREFILL.marker_bytes)))
        if True in prefill:
            selected = list(compress(others, prefill))
            self._batches(PREFILL, selected, _Numbers(base, rest, prefill))
        joined = b"\n".join(others)
        hits = _LineFinder(joined, 0).lines(MARKER.finditer(joined))
        if hits:
            numbers = _Numbers(base, rest).all()
            self.events += [self._line(raw, numbers[index - 1]) for index, raw in hits]
        self._flush()

    def _flush(self) -> None:
        if self.sink is not None and self.pending:
            self.sink(self.pending.get(DECODE.name), self.pending.get(PREFILL.name))
        self.pending = {}

    def _first_time(self, lines: list[bytes], base: int) -> None:
        for offset, raw in enumerate(lines[:5000]):
            if raw.startswith(b"[") or b"] " in raw[:120]:
                line = self._line(raw, base + offset + 1)
                if line.timestamp:
                    self.first_time = epoch_ms(line.timestamp)
                    return

    def _line(self, raw: bytes, number: int) -> Line:
        return split_prefix(self.source, number, raw.decode("utf-8", "replace").rstrip("\r"))

    def _batches(self, kind: BatchKind, lines: list[bytes], numbers: _Numbers) -> None:
        sample = self._line(lines[0], numbers.first())
        if kind is DECODE and self.first_decode is None:
            self.first_decode = sample
        first = parse_batch(sample, kind)
        layout = _layout(lines[0], sample, kind, self.full_rows) if first else None
        joined = b"\n".join(lines)
        table = _fast_table(joined, len(lines), layout, kind) if layout else None
        if table is not None:
            last = parse_batch(self._line(lines[-1], numbers.last()), kind)
            if last is None or not (
                _same_row(table[0], first, kind, layout)
                and _same_row(table[-1], last, kind, layout)
            ):
                table = None
        if table is None:
            self.slow_lines += len(lines)
            table = self._slow_table(kind, lines, numbers.all())
            self.columns[kind.name].add(table)
            self.pending[kind.name] = table
            return
        counts = None
        if self.full_rows:
            table[:, 0] = numbers.all()
        if not layout.has_graph_values:
            true = joined.count(b"graph: True") if layout.has_graph_field else 0
            counts = (true, len(lines) - true if layout.has_graph_field else 0)
        self.columns[kind.name].add(table, counts)
        self.pending[kind.name] = table

    def _slow_table(self, kind: BatchKind, lines: list[bytes], numbers: list[int]) -> np.ndarray:
        rows = (
            parse_batch(self._line(raw, n), kind) for raw, n in zip(lines, numbers, strict=True)
        )
        table = [[row.get(c, NAN) for c in kind.columns] for row in rows if row is not None]
        return np.array(table, dtype=np.float64).reshape(-1, len(kind.columns))

    def finish(self) -> _Partial:
        return _Partial(
            self.lines,
            self.columns[DECODE.name],
            self.columns[PREFILL.name],
            self.events,
            self.first_time,
            self.first_decode,
            self.slow_lines,
        )


def _blocks(stream: io.BufferedIOBase, limit: int | None = None) -> Iterator[bytes]:
    """Blocks of whole lines (the last one may lack its newline)."""
    carry = b""
    remaining = limit
    while True:
        size = BLOCK_BYTES if remaining is None else min(BLOCK_BYTES, remaining)
        chunk = stream.read(size) if size > 0 else b""
        if remaining is not None:
            remaining -= len(chunk)
        if not chunk:
            if carry:
                yield carry
            return
        cut = chunk.rfind(b"\n") + 1
        if not cut:
            carry += chunk
            if len(carry) >= MAX_CARRY_BYTES:
                yield carry
                carry = b""
            continue
        # One copy per block: join takes the memoryview without slicing it first.
        yield b"".join((carry, memoryview(chunk)[:cut])) if carry else chunk[:cut]
        carry = chunk[cut:]


def _scan_range(path: str, source: str, start: int, end: int, keep_series: bool) -> _Partial:
    """Worker: scan bytes [start, end) of a plain file (both on line boundaries)."""
    scanner = _Scanner(source, keep_series, find_first_time=start == 0)
    with open(path, "rb") as handle:
        handle.seek(start)
        for block in _blocks(handle, end - start):
            scanner.feed(block)
    return scanner.finish()


def _scan_stream(
    text_input: TextInput, keep_series: bool, sink: SeriesSink | None = None
) -> tuple[_Partial, list[str]]:
    notes: list[str] = []
    scanner = _Scanner(text_input.path, keep_series, find_first_time=True, sink=sink)
    raw = sys.stdin.buffer if text_input.file is None else text_input.open_raw()
    try:
        stream = raw
        if hasattr(raw, "peek") and raw.peek(2)[:2] == GZIP_MAGIC:
            stream = gzip.GzipFile(fileobj=raw)
        for block in _blocks(stream):
            scanner.feed(block)
    except (EOFError, OSError, zlib.error) as exc:
        notes.append(f"input ends early ({exc or type(exc).__name__}); measured what was readable")
    finally:
        if text_input.file is not None:
            raw.close()
    return scanner.finish(), notes


def _ranges(path: Path, parts: int) -> list[tuple[int, int]]:
    size = path.stat().st_size
    bounds = [0]
    with open(path, "rb") as handle:
        for i in range(1, parts):
            handle.seek(size * i // parts)
            handle.readline()
            position = handle.tell()
            if bounds[-1] < position < size:
                bounds.append(position)
    bounds.append(size)
    return list(zip(bounds, bounds[1:], strict=False))


def worker_count() -> int:
    """LOGANALYZE_WORKERS, else the CPU count (at most MAX_WORKERS)."""
    wanted = os.environ.get("LOGANALYZE_WORKERS", "")
    if wanted.isdigit() and int(wanted) > 0:
        return int(wanted)
    return max(1, min(os.cpu_count() or 1, MAX_WORKERS))


def _parallel_ranges(text_input: TextInput, workers: int) -> list[tuple[int, int]] | None:
    path = text_input.file
    if workers < 2 or path is None or not path.is_file():
        return None
    if path.stat().st_size < PARALLEL_MIN_BYTES:
        return None
    with open(path, "rb") as handle:
        if handle.read(2) == GZIP_MAGIC:
            return None
    ranges = _ranges(path, workers)
    return ranges if len(ranges) > 1 else None


def _scan(text_input: TextInput, keep_series: bool, workers: int) -> tuple[_Partial, list[str]]:
    ranges = _parallel_ranges(text_input, workers)
    if ranges is None:
        return _scan_stream(text_input, keep_series)
    import multiprocessing

    method = "fork" if sys.platform.startswith("linux") else "spawn"
    context = multiprocessing.get_context(method)
    path = str(text_input.file)
    with ProcessPoolExecutor(len(ranges), mp_context=context) as pool:
        futures = [
            pool.submit(_scan_range, path, text_input.path, start, end, keep_series)
            for start, end in ranges
        ]
        partials = [f.result() for f in futures]
    return _merge(partials), []


def _merge(partials: list[_Partial]) -> _Partial:
    merged = partials[0]
    for part in partials[1:]:
        offset = merged.lines
        merged.decode.merge(part.decode, offset)
        merged.prefill.merge(part.prefill, offset)
        merged.events += [replace(e, number=e.number + offset) for e in part.events]
        if merged.first_decode is None and part.first_decode is not None:
            merged.first_decode = replace(
                part.first_decode, number=part.first_decode.number + offset
            )
        merged.slow_lines += part.slow_lines
        merged.lines += part.lines
    return merged


# ---- startup and configuration --------------------------------------------------------


def _startup(
    events: list[Line], first_time: float
) -> tuple[StartupSummary, dict[str, Any] | None, int | None]:
    """Startup phases of the last startup in the log, its server_args and their line."""
    summary = StartupSummary()
    server_args, args_line = None, None
    reference: str | None = None
    begins: dict[str, float] = {}
    for event in events:
        body = event.body
        if "server_args=" in body:
            parsed = parse_server_args(body)
            if parsed is not None:
                server_args, args_line = parsed, event.number
                summary.startups += 1
                if summary.startups > 1:
                    summary.phases, summary.ready_ms, summary.ready_line = [], None, None
                    summary.started_ms = epoch_ms(event.timestamp)
                    begins.clear()
            continue
        label = event.rank_label
        if label is not None:
            reference = reference or label
            if label != reference:
                continue
        _startup_event(summary, event, begins)
    if summary.started_ms is None or math.isnan(summary.started_ms):
        summary.started_ms = None if math.isnan(first_time) or first_time < 0 else first_time
    return summary, server_args, args_line


def _startup_event(summary: StartupSummary, event: Line, begins: dict[str, float]) -> None:
    body, when = event.body, epoch_ms(event.timestamp)
    if body.startswith("Load weight begin"):
        begins["weight"] = when
    elif body.startswith("Load weight end"):
        label = MODEL_TYPE.search(body)
        seconds = _elapsed(body, begins.pop("weight", NAN), when)
        summary.phases.append(
            StartupPhase(
                "weight_load", label[1] if label else "weights", event.number, seconds, _mem(body)
            )
        )
    elif body.startswith("KV Cache is allocated"):
        tokens = KV_TOKENS.search(body)
        sizes = [float(s) for s in KV_SIZE.findall(body)]
        dtype = KV_DTYPE.search(body)
        summary.phases.append(
            StartupPhase(
                "kv_cache",
                dtype[1] if dtype else "",
                event.number,
                tokens=int(tokens[1]) if tokens else None,
                size_gb=round(sum(sizes), 2) if sizes else None,
            )
        )
    elif body.startswith("Capture "):
        capture = CAPTURE.match(body)
        if capture is None:
            return
        name, edge = capture[1], capture[2]
        if edge == "begin":
            begins[name] = when
            return
        seconds = _elapsed(body, begins.pop(name, NAN), when)
        summary.phases.append(
            StartupPhase("graph_capture", name, event.number, seconds, _mem(body))
        )
    elif body.startswith("max_total_num_tokens="):
        summary.limits.update({k: int(v) for k, v in SCHEDULER_LIMIT.findall(body)})
    elif body.startswith(READY_MARKER) and summary.ready_ms is None:
        summary.ready_ms = None if math.isnan(when) else when
        summary.ready_line = event.number


def _elapsed(body: str, began: float, ended: float) -> float | None:
    """The logged elapsed time, else the difference of the two lines' timestamps."""
    found = ELAPSED.search(body)
    if found:
        return float(found[1])
    if math.isnan(began) or math.isnan(ended):
        return None
    return round((ended - began) / 1000, 3)


def _mem(body: str) -> float | None:
    found = MEM_USAGE.search(body)
    return float(found[1]) if found else None


CONFIG_KEYS = (
    "model",
    "algorithm",
    "draft",
    "num_steps",
    "eagle_topk",
    "num_draft_tokens",
    "cuda_graph",
    "tp",
    "dp",
    "max_running_requests",
)


GRAPH_LIMIT_DESTS = ("cuda_graph_max_bs_decode", "cuda_graph_max_bs")


def graph_limit_flag(server_args: dict[str, Any] | None) -> str:
    """The flag capping CUDA-graph decode batches, as the SGLang that wrote the log spells it.

    server_args names its fields by dest, so the log itself says which release it came
    from (0.5.23 split `--cuda-graph-max-bs` into -decode and -prefill); without that
    record, the newest shipped catalog's spelling.
    """
    from analyzer.sglang.catalog import load_catalog

    for dest in GRAPH_LIMIT_DESTS:
        if server_args and dest in server_args:
            return "--" + dest.replace("_", "-")
    catalog = load_catalog()
    spec = next(filter(None, (catalog.by_dest(d) for d in GRAPH_LIMIT_DESTS)))
    return spec.long


def run_config(server_args: dict[str, Any] | None, limits: dict[str, int]) -> dict[str, Any]:
    """The settings that decide speculative speed, from server_args and the scheduler line.

    `max_running_requests` falls back to the scheduler's effective value when the
    flag was left unset.
    """
    args = server_args or {}
    algorithm = args.get("speculative_algorithm")
    if algorithm is not None:
        algorithm = str(algorithm).rsplit(".", 1)[-1].upper()
    cuda_graph = None
    if "disable_cuda_graph" in args:
        cuda_graph = not (args.get("disable_cuda_graph") or args.get("disable_decode_cuda_graph"))
    max_running = args.get("max_running_requests")
    if max_running is None:
        max_running = limits.get("max_running_requests")
    return {
        "model": args.get("model_path"),
        "algorithm": algorithm,
        "draft": args.get("speculative_draft_model_path"),
        "num_steps": args.get("speculative_num_steps"),
        "eagle_topk": args.get("speculative_eagle_topk"),
        "num_draft_tokens": args.get("speculative_num_draft_tokens"),
        "cuda_graph": cuda_graph,
        "tp": args.get("tp_size"),
        "dp": args.get("dp_size"),
        "max_running_requests": max_running,
    }


# ---- the entry points -----------------------------------------------------------------


def extract(
    text_input: TextInput,
    keep_series: bool = False,
    workers: int | None = None,
    sink: SeriesSink | None = None,
) -> RunMetrics:
    """Metrics of one input (raises nothing for odd content; empty sections stay empty).

    `keep_series` keeps every row in memory (RunMetrics.series); `sink` instead receives
    each block's rows as they are read (one process, memory bounded).
    """
    if text_input.is_binary():
        return _empty(text_input.path, ["binary file: skipped"])
    if sink is not None:
        partial, notes = _scan_stream(text_input, keep_series, sink)
    else:
        partial, notes = _scan(text_input, keep_series, workers or worker_count())
    return _summarize(text_input.path, partial, notes + list(text_input.notes), keep_series)


def extract_paths(
    paths: list[str], keep_series: bool = False, workers: int | None = None
) -> list[RunMetrics]:
    """One RunMetrics per input file (folders expand to their logs; raises InputError)."""
    return [extract(i, keep_series, workers) for i in open_inputs(paths)]


def _empty(source: str, notes: list[str]) -> RunMetrics:
    return RunMetrics(
        source,
        0,
        run_config(None, {}),
        None,
        DecodeSummary(),
        PrefillSummary(),
        StartupSummary(),
        notes=notes,
    )


def _summarize(source: str, partial: _Partial, notes: list[str], keep_series: bool) -> RunMetrics:
    startup, server_args, args_line = _startup(partial.events, partial.first_time)
    decode, prefill = partial.decode, partial.prefill
    run = RunMetrics(
        source=source,
        lines=partial.lines,
        config=run_config(server_args, startup.limits),
        server_args_line=args_line,
        decode=_decode_summary(decode),
        prefill=_prefill_summary(prefill),
        startup=startup,
        chart=decode.chart.points() if decode.chart else [],
        notes=notes,
        first_decode=partial.first_decode,
        slow_lines=partial.slow_lines,
        graph_limit_flag=graph_limit_flag(server_args),
    )
    if keep_series:
        run.series = {
            c.kind.name: BatchSeries(
                c.kind, np.concatenate(c.series) if c.series else np.zeros((0, len(c.kind.columns)))
            )
            for c in (decode, prefill)
        }
    run.notes += _notes(run)
    return run


def _decode_summary(columns: _Columns) -> DecodeSummary:
    true, false = columns.graph
    return DecodeSummary(
        lines=columns.rows,
        gen_throughput=columns.stat("gen_throughput", quantiles=True),
        accept_len=columns.stat("accept_len"),
        accept_rate=columns.stat("accept_rate"),
        running_req=columns.stat("running_req", quantiles=True),
        token_usage=columns.stat("token_usage"),
        queue_req=columns.stat("queue_req"),
        graph_share=true / (true + false) if true + false else None,
        first_time_ms=None if math.isnan(columns.first_time) else columns.first_time,
        last_time_ms=None if math.isnan(columns.last_time) else columns.last_time,
        dp_ranks=sorted(columns.dp_ranks),
    )


def _prefill_summary(columns: _Columns) -> PrefillSummary:
    totals = columns.totals
    return PrefillSummary(
        lines=columns.rows,
        new_tokens=int(totals.get("new_tokens", 0)),
        cached_tokens=int(totals.get("cached_tokens", 0)),
        new_seq=int(totals.get("new_seq", 0)),
        input_throughput=columns.stat("input_throughput", quantiles=True),
        queue_req=columns.stat("queue_req"),
    )


def _notes(run: RunMetrics) -> list[str]:
    notes = []
    if run.startup.startups > 1:
        notes.append(
            f"{run.startup.startups} startups in this log: configuration and startup phases are "
            "the last one's, decode and prefill figures cover the whole log"
        )
    if len(run.decode.dp_ranks) > 1:
        notes.append(
            f"decode lines come from {len(run.decode.dp_ranks)} DP ranks, each logging its own "
            "batch: throughput figures are per rank"
        )
    if run.lines and not run.decode.lines:
        notes.append("no `Decode batch` lines: the server logged no decode statistics")
    return notes


# ---- writing the series -----------------------------------------------------------------

SERIES_SUFFIXES = (".csv", ".parquet")


def extract_with_series(
    paths: list[str], path: Path, workers: int | None = None
) -> tuple[list[RunMetrics], int]:
    """Metrics of every input, writing all batch rows to `path` (.csv or .parquet).

    CSV is streamed block by block, so memory stays bounded however long the log;
    Parquet (pyarrow, optional) is written from one in-memory DataFrame. The file is
    written beside the target and renamed over it, never over an input.
    """
    from analyzer.formats.output import OutputError

    target = _series_target(path, paths)
    temp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        if target.suffix.lower() == ".csv":
            with open(temp, "w", encoding="utf-8", newline="") as handle:
                sink = _CsvSink(handle)
                runs = []
                for text_input in open_inputs(paths):
                    sink.source = text_input.path
                    runs.append(extract(text_input, sink=sink))
            rows = sink.rows
        else:
            import pandas as pd

            runs = extract_paths(paths, keep_series=True, workers=workers)
            frame = pd.concat([r.series_frame() for r in runs], ignore_index=True)
            frame.to_parquet(temp, index=False)
            rows = len(frame)
        os.replace(temp, target)
    except OSError as exc:
        temp.unlink(missing_ok=True)
        raise OutputError(f"{path}: cannot write ({exc.strerror or exc})") from None
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    return runs, rows


class _CsvSink:
    """Appends each block's rows to an open CSV file, the header once."""

    def __init__(self, handle) -> None:
        self.handle, self.source, self.rows = handle, "", 0

    def __call__(self, decode: np.ndarray | None, prefill: np.ndarray | None) -> None:
        frame = series_frame(self.source, decode, prefill)
        frame.to_csv(self.handle, header=self.rows == 0, index=False)
        self.rows += len(frame)


def _series_target(path: Path, inputs: list[str]) -> Path:
    from analyzer.formats.output import OutputError

    suffix = path.suffix.lower()
    if suffix not in SERIES_SUFFIXES:
        raise OutputError(f"{path}: write the series as .csv or .parquet")
    if suffix == ".parquet" and not _has_module("pyarrow"):
        raise OutputError(
            "writing Parquet needs pyarrow (pip install pyarrow); or use -o series.csv"
        )
    target = path.resolve()
    for name in inputs:
        if name != "-" and Path(name).exists() and Path(name).resolve() == target:
            raise OutputError(f"{path}: refusing to write the series over an input file")
    if not target.parent.is_dir():
        raise OutputError(f"{path}: folder {target.parent} does not exist")
    return target


def _has_module(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None
