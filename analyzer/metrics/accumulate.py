"""Running aggregates of the batch rows: exact, bounded, and mergeable.

Big plain files are cut into byte ranges scanned by worker processes, so what one scan
keeps must merge with the next one's as if the file had been read in one go: integer
sums (of 1e-4 units), histograms, the kept throughput values, and chart cells aligned
to multiples of their width. The aggregates are exact, so the cut never shows.
"""

from __future__ import annotations

import math

import numpy as np

from analyzer.metrics.batch_lines import DECODE, NAN, BatchKind
from analyzer.metrics.results import ChartPoint, Stat

CHART_CELLS = 512
MAX_HISTOGRAM_VALUE = 1 << 16
SUM_SCALE = 10_000


class Columns:
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

    def merge(self, other: Columns, line_offset: int) -> None:
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
