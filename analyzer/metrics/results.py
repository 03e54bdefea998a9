"""What the metrics of one log are: plain dataclasses, and the batch series as a table.

`RunMetrics` is all that `metrics`, `compare` and the renderers read; the summaries
are small and exact, the optional `BatchSeries` keeps every parsed row as a float64
table. pandas is imported only when a series is turned into a DataFrame.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from analyzer.core.model import Line
from analyzer.metrics.batch_lines import DECODE, PREFILL, BatchKind


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
