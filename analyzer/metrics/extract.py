"""Per-run metrics from SGLang logs: the entry points, the summaries, the series file.

A server that does not crash can still miss its purpose (EAGLE-3 slower than no
speculation); the numbers to tell are already in the log. `extract` reads them in
one streaming pass over the bytes (`analyzer.metrics.scanner`) and returns plain
dataclasses (`RunMetrics`) for `analyzer.metrics.compare` and the renderers;
`extract_with_series` also writes every batch row to a CSV or Parquet file.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from analyzer.core.read import TextInput, open_inputs
from analyzer.metrics.accumulate import Columns
from analyzer.metrics.results import (
    BatchSeries,
    DecodeSummary,
    PrefillSummary,
    RunMetrics,
    SeriesSink,
    StartupSummary,
    series_frame,
)
from analyzer.metrics.scanner import Partial, scan, scan_stream, worker_count
from analyzer.metrics.startup import graph_limit_flag, run_config, startup

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
        partial, notes = scan_stream(text_input, keep_series, sink)
    else:
        partial, notes = scan(text_input, keep_series, workers or worker_count())
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


def _summarize(source: str, partial: Partial, notes: list[str], keep_series: bool) -> RunMetrics:
    summary, server_args, args_line = startup(partial.events, partial.first_time)
    decode, prefill = partial.decode, partial.prefill
    run = RunMetrics(
        source=source,
        lines=partial.lines,
        config=run_config(server_args, summary.limits),
        server_args_line=args_line,
        decode=_decode_summary(decode),
        prefill=_prefill_summary(prefill),
        startup=summary,
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


def _decode_summary(columns: Columns) -> DecodeSummary:
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


def _prefill_summary(columns: Columns) -> PrefillSummary:
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
    written as every output is (core/output.py), never over an input.
    """
    from analyzer.core.output import open_output

    csv = _series_suffix(path) == ".csv"
    if csv:
        with open_output(path, paths, newline="") as handle:
            sink = _CsvSink(handle)
            runs = []
            for text_input in open_inputs(paths):
                sink.source = text_input.path
                runs.append(extract(text_input, sink=sink))
        return runs, sink.rows
    import pandas as pd

    with open_output(path, paths, binary=True) as handle:
        runs = extract_paths(paths, keep_series=True, workers=workers)
        frame = pd.concat([r.series_frame() for r in runs], ignore_index=True)
        frame.to_parquet(handle, index=False)
    return runs, len(frame)


class _CsvSink:
    """Appends each block's rows to an open CSV file, the header once."""

    def __init__(self, handle) -> None:
        self.handle, self.source, self.rows = handle, "", 0

    def __call__(self, decode: np.ndarray | None, prefill: np.ndarray | None) -> None:
        frame = series_frame(self.source, decode, prefill)
        frame.to_csv(self.handle, header=self.rows == 0, index=False)
        self.rows += len(frame)


def _series_suffix(path: Path) -> str:
    from analyzer.core.output import OutputError

    suffix = path.suffix.lower()
    if suffix not in SERIES_SUFFIXES:
        raise OutputError(f"{path}: write the series as .csv or .parquet")
    if suffix == ".parquet" and not _has_module("pyarrow"):
        raise OutputError(
            "writing Parquet needs pyarrow (pip install pyarrow); or use -o series.csv"
        )
    return suffix


def _has_module(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None
