"""Scanning a log: blocks of whole lines, the fast path or the slow one per block, workers.

One streaming pass over the bytes, in 4 MiB blocks: decode and prefill lines go to
`analyzer.metrics.fast_table` (or line by line to `parse_batch` when a block does not
fit), startup markers are kept as Lines for `analyzer.metrics.startup`. Big plain
files are cut into byte ranges on line boundaries, scanned by worker processes
(`_scan_range`, module-level so the pool can pickle it) and merged in order; gzip and
stdin are read as one stream.
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
from dataclasses import dataclass, replace
from itertools import compress, islice, repeat
from operator import contains, not_
from pathlib import Path

import numpy as np

from analyzer.core.model import Line
from analyzer.core.read import GZIP_MAGIC, TextInput
from analyzer.metrics.accumulate import Columns
from analyzer.metrics.batch_lines import DECODE, NAN, PREFILL, BatchKind, epoch_ms, parse_batch
from analyzer.metrics.fast_table import fast_table, layout, same_row
from analyzer.metrics.results import SeriesSink
from analyzer.sglang.log_format import split_prefix

BLOCK_BYTES = 4 << 20  # measured: 4 MiB beats 8 (cache) and keeps RSS down
MAX_CARRY_BYTES = 64 << 20
PARALLEL_MIN_BYTES = 64 << 20
MAX_WORKERS = 4

# Markers follow SGLang's `[time ranks] message` prefix, hence the literal "] " anchor,
# which lets `re` skip from line to line instead of trying every position.
MARKER = re.compile(
    rb"\] (?:Load weight |KV Cache is allocated|Capture |max_total_num_tokens=|server_args="
    rb"|The server is fired up)"
)


@dataclass
class Partial:
    """What one scan of (part of) a log produced; line numbers relative to its start."""

    lines: int
    decode: Columns
    prefill: Columns
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
            DECODE.name: Columns(DECODE, keep_series),
            PREFILL.name: Columns(PREFILL, keep_series),
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
        block_layout = layout(lines[0], sample, kind, self.full_rows) if first else None
        joined = b"\n".join(lines)
        table = fast_table(joined, len(lines), block_layout, kind) if block_layout else None
        if table is not None:
            last = parse_batch(self._line(lines[-1], numbers.last()), kind)
            if last is None or not (
                same_row(table[0], first, kind, block_layout)
                and same_row(table[-1], last, kind, block_layout)
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
        if not block_layout.has_graph_values:
            true = joined.count(b"graph: True") if block_layout.has_graph_field else 0
            counts = (true, len(lines) - true if block_layout.has_graph_field else 0)
        self.columns[kind.name].add(table, counts)
        self.pending[kind.name] = table

    def _slow_table(self, kind: BatchKind, lines: list[bytes], numbers: list[int]) -> np.ndarray:
        rows = (
            parse_batch(self._line(raw, n), kind) for raw, n in zip(lines, numbers, strict=True)
        )
        table = [[row.get(c, NAN) for c in kind.columns] for row in rows if row is not None]
        return np.array(table, dtype=np.float64).reshape(-1, len(kind.columns))

    def finish(self) -> Partial:
        return Partial(
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


def _scan_range(path: str, source: str, start: int, end: int, keep_series: bool) -> Partial:
    """Worker: scan bytes [start, end) of a plain file (both on line boundaries)."""
    scanner = _Scanner(source, keep_series, find_first_time=start == 0)
    with open(path, "rb") as handle:
        handle.seek(start)
        for block in _blocks(handle, end - start):
            scanner.feed(block)
    return scanner.finish()


def scan_stream(
    text_input: TextInput, keep_series: bool, sink: SeriesSink | None = None
) -> tuple[Partial, list[str]]:
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


def scan(text_input: TextInput, keep_series: bool, workers: int) -> tuple[Partial, list[str]]:
    ranges = _parallel_ranges(text_input, workers)
    if ranges is None:
        return scan_stream(text_input, keep_series)
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


def _merge(partials: list[Partial]) -> Partial:
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
