"""The scan stage's fast path: find the few lines that matter in large byte chunks.

A healthy SGLang log is millions of `Decode batch` lines that no rule cares about.
One multi-literal search (Aho-Corasick in Rust, via ahocorasick-rs) over 8 MiB chunks
finds the lines holding a rule trigger or a literal the Scanner reacts to; only those
lines, the context lines around them, the lines of any traceback or usage dump they
open, and the last lines of the input are decoded and fed to the same Scanner the
simple path uses. The result is identical to feeding every line (tested on every
fixture), at close to grep's speed.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Iterable, Iterator, Sequence
from itertools import chain
from typing import TYPE_CHECKING, Any

from analyzer.core.model import InputSummary, Line, ScannedLog
from analyzer.core.read import MAX_LINE_BYTES, TextInput
from analyzer.engine.normalize import NO_PREFIXES, SAMPLE_LINES, LinePrefixes
from analyzer.engine.paste import NO_REPAIRS, PasteReading, read_paste
from analyzer.engine.scan import (
    CONTEXT_LINES,
    SCANNER_LITERALS,
    TAIL_LINES,
    USAGE_START,
    Scanner,
    note_reading,
    scan_repaired,
    visible_lines,
)
from analyzer.sglang.log_format import split_prefix

if TYPE_CHECKING:
    from concurrent.futures import Future

try:
    from ahocorasick_rs import BytesAhoCorasick, Implementation, MatchKind
except ImportError:  # pragma: no cover - the dependency is declared; this is a safety net
    BytesAhoCorasick = Implementation = MatchKind = None

LONG_LINE_WINDOW = MAX_LINE_BYTES // 2
SMALL_BLOCK = 1 << 20
# A large input is searched by groups of keys: ahocorasick's SIMD prefilter (Teddy) runs only
# for leftmost matching of a few dozen patterns, and then searches ~20x faster than one
# automaton of every literal (benchmarks/triage_bench.py). Each key is the opening of a
# suffix of its literal whose first bytes are rare in the input's own sample, so the
# prefilter is not woken on every routine line (`cuda graph: True` of each Decode batch).
KEY_GROUP = 48
KEY_MIN_BYTES = 4
KEY_BYTES = 5  # a key's length at most: literals that share an opening share a key
KEY_SAMPLE_BYTES = 32 * 1024
KEY_COMMON = 8  # a 3-byte opening seen this often in the sample wakes the prefilter too often


class LiteralFinder:
    """Positions where any of the literals ends, over one bytes-like block."""

    def __init__(self, literals: Iterable[str]) -> None:
        self.literals_text = sorted({lit for lit in literals if lit})
        self.literals = [lit.encode() for lit in self.literals_text]
        self._automaton: Any = None  # built on first use (a large input uses KeyedFinder)

    def for_large_input(self, sample: bytes) -> LiteralFinder | KeyedFinder:
        """The finder for an input of many blocks, keyed on what `sample` (its first block)
        shows of it; itself without the Rust search."""
        if BytesAhoCorasick is None:
            return self
        return KeyedFinder(self.literals, sample)

    def ends(self, block: memoryview) -> list[int]:
        if self._automaton is None and BytesAhoCorasick is not None:
            # a small block: the automaton that builds fastest; its slower search costs less
            small = len(block) < SMALL_BLOCK
            kind = Implementation.NoncontiguousNFA if small else None
            self._automaton = BytesAhoCorasick(self.literals, implementation=kind)
        if self._automaton is not None:
            return [end for _, _, end in self._automaton.find_matches_as_indexes(block)]
        data = bytes(block)
        found = []
        for literal in self.literals:
            at = data.find(literal)
            while at >= 0:
                found.append(at + len(literal))
                at = data.find(literal, at + 1)
        return found


class KeyedFinder:
    """Where each literal's key ends: in the literal's line when the literal is there (a
    line holding a key but not its literal is fed too; the Scanner's own checks read the
    line). Groups of leftmost searchers, one prefilter each."""

    def __init__(self, literals: list[bytes], sample: bytes) -> None:
        seen = Counter(_openings(sample[:KEY_SAMPLE_BYTES]))
        seen.update(_openings(sample[-KEY_SAMPLE_BYTES:]))
        unique = {_key(lit, seen)[:KEY_BYTES] for lit in literals}
        # a key holding another is found wherever that one is
        keys = sorted(
            (k for k in unique if not _holds_another(k, unique)), key=lambda k: (-len(k), k)
        )
        self._groups = [
            BytesAhoCorasick(keys[i : i + KEY_GROUP], matchkind=MatchKind.LeftmostFirst)
            for i in range(0, len(keys), KEY_GROUP)
        ]

    def ends(self, block: memoryview) -> list[int]:
        return [end for group in self._groups for _, _, end in group.find_matches_as_indexes(block)]


def _holds_another(key: bytes, keys: set[bytes]) -> bool:
    return any(
        key[i:j] in keys
        for i in range(len(key))
        for j in range(i + 1, len(key) + 1)
        if j - i < len(key)
    )


def _openings(sample: bytes) -> Iterator[bytes]:
    return (sample[i : i + 3] for i in range(len(sample) - 2))


def _key(literal: bytes, seen: Counter[bytes]) -> bytes:
    """The longest suffix of the literal, of KEY_MIN_BYTES at least, that opens with bytes
    rare in the sample (the literal itself when none does)."""
    for start in range(len(literal) - KEY_MIN_BYTES + 1):
        if seen[literal[start : start + 3]] < KEY_COMMON:
            return literal[start:]
    return literal


def finder_for(triggers: Sequence[str]) -> LiteralFinder:
    return LiteralFinder([*SCANNER_LITERALS, *triggers, "\n" + USAGE_START])


class _Feeder:
    """Feeds chosen lines of consecutive blocks to the Scanner, in order, once each."""

    def __init__(self, scanner: Scanner, source: str, prefixes: LinePrefixes) -> None:
        self.scanner = scanner
        self.source = source
        self.strip = prefixes.body_span if prefixes is not NO_PREFIXES else None
        self.fed_through = 0
        self.recent: deque[tuple[int, bytes]] = deque(maxlen=max(CONTEXT_LINES, TAIL_LINES))

    def feed(self, number: int, raw: bytes) -> None:
        if number <= self.fed_through:
            return
        self.scanner.feed(self.line(number, raw))
        self.fed_through = number

    def line(self, number: int, raw: bytes) -> Line:
        if len(raw) >= MAX_LINE_BYTES:
            raw = raw[:MAX_LINE_BYTES]
        text = raw.rstrip(b"\r\n").decode("utf-8", errors="replace")
        return split_prefix(self.source, number, text, self.strip)


def _line_bounds(block: bytes, position: int) -> tuple[int, int]:
    start = block.rfind(b"\n", 0, position) + 1
    end = block.find(b"\n", position)
    return start, (len(block) if end < 0 else end)


def _count_long_lines(block: bytes) -> int:
    """Lines of at least MAX_LINE_BYTES: each holds a newline-free aligned window."""
    starts: set[int] = set()
    for at in range(0, len(block), LONG_LINE_WINDOW):
        if block.find(b"\n", at, at + LONG_LINE_WINDOW) >= 0:
            continue
        start, end = _line_bounds(block, at)
        if end - start >= MAX_LINE_BYTES:
            starts.add(start)
    return len(starts)


def _candidate_starts(block: bytes, ends: list[int]) -> list[int]:
    starts = set()
    for end in ends:
        start = block.rfind(b"\n", 0, end - 1) + 1
        if end - start <= MAX_LINE_BYTES:
            starts.add(start)
    if block.startswith(USAGE_START.encode()):
        starts.add(0)
    return sorted(starts)


def _feed_block(block: bytes, first_number: int, ends: list[int], feeder: _Feeder) -> int:
    """Feed the lines of one block that the Scanner needs; returns the next line number."""
    position, number = 0, first_number
    for start in _candidate_starts(block, ends):
        while feeder.scanner.wants_more and position < start:
            position, number = _feed_next(block, position, number, feeder)
        if position > start:
            continue
        skipped = block.count(b"\n", position, start)
        _feed_context_before(block, position, start, number + skipped, feeder)
        position, number = _feed_next(block, start, number + skipped, feeder)
    while feeder.scanner.wants_more and position < len(block):
        position, number = _feed_next(block, position, number, feeder)
    next_number = number + block.count(b"\n", position)
    _remember_last_lines(block, next_number, feeder)
    return next_number


def _feed_next(block: bytes, position: int, number: int, feeder: _Feeder) -> tuple[int, int]:
    end = block.find(b"\n", position)
    end = len(block) if end < 0 else end
    feeder.feed(number, block[position:end])
    return end + 1, number + 1


def _feed_context_before(
    block: bytes, floor: int, start: int, number: int, feeder: _Feeder
) -> None:
    """Feed the CONTEXT_LINES lines before the candidate that starts at `start`.

    Lines in this block before `floor` were already fed or are further away; when the
    candidate is among the block's first lines, the previous block's last lines are used.
    """
    before: list[tuple[int, bytes]] = []
    line_end = start - 1
    while len(before) < CONTEXT_LINES and line_end >= floor:
        line_start = block.rfind(b"\n", 0, line_end) + 1
        if line_start < floor:
            break
        before.append((number - len(before) - 1, block[line_start:line_end]))
        line_end = line_start - 1
    if len(before) < CONTEXT_LINES and line_end < 0:
        oldest = number - CONTEXT_LINES
        before.extend(item for item in reversed(feeder.recent) if item[0] >= oldest)
    for earlier, raw in sorted(before):
        feeder.feed(earlier, raw)


def _remember_last_lines(block: bytes, next_number: int, feeder: _Feeder) -> None:
    """Keep raw copies of the block's last lines: before-context and the input's tail."""
    line_end = len(block) - 1
    lines: list[tuple[int, bytes]] = []
    while line_end >= 0 and len(lines) < feeder.recent.maxlen:
        line_start = block.rfind(b"\n", 0, line_end) + 1
        lines.append((next_number - len(lines) - 1, block[line_start:line_end]))
        line_end = line_start - 1
    feeder.recent.extend(reversed(lines))


def scan_chunks(
    summary: InputSummary, text_input: TextInput, triggers: Sequence[str], finder: LiteralFinder
) -> ScannedLog:
    """Scan an input by byte chunks; the same ScannedLog as scan_lines over its lines."""
    scanner = Scanner(summary, triggers)
    blocks = _blocks(text_input.chunks(), text_input)
    # the prefixes are told by the first SAMPLE_LINES lines, as scan_lines reads them (an
    # input's last line, without its newline, comes in a block of its own)
    head: list[bytes] = []
    for block in blocks:
        head.append(block)
        if sum(b.count(b"\n") for b in head) >= SAMPLE_LINES:
            break
    first = b"".join(head) if head else None
    reading = _reading(first)
    note_reading(summary, reading)
    all_blocks = chain([first], blocks) if first is not None else blocks
    if reading.repairs:
        # a paste to repair (lines to rejoin, characters the literals would miss): every line
        return scan_repaired(scanner, summary.path, _decoded(all_blocks), reading)
    prefixes = reading.prefixes
    if prefixes is not NO_PREFIXES:
        # `usage: ` is found at a line start only; behind a prefix it is anywhere
        finder = LiteralFinder([*finder.literals_text, USAGE_START])
    feeder = _Feeder(scanner, summary.path, prefixes)
    next_number = 1
    for block, ends in _searched(all_blocks, finder):
        next_number = _feed_block(block, next_number, ends, feeder)
    tail = [feeder.line(number, raw) for number, raw in list(feeder.recent)[-TAIL_LINES:]]
    return scanner.finish(total_lines=next_number - 1, tail=tail)


def _reading(block: bytes | None) -> PasteReading:
    """The line prefixes and paste repairs of the input, from its first lines (as
    scan_lines reads them)."""
    if block is None:
        return PasteReading(NO_PREFIXES, NO_REPAIRS)
    head = block.split(b"\n", SAMPLE_LINES)[:SAMPLE_LINES]
    return read_paste(visible_lines(_decode(raw) for raw in head))


def _decode(raw: bytes) -> str:
    return raw[:MAX_LINE_BYTES].rstrip(b"\r").decode("utf-8", errors="replace")


def _decoded(blocks: Iterable[bytes]) -> Iterator[str]:
    """The lines of whole-line blocks, decoded as TextInput.lines decodes them."""
    for block in blocks:
        yield from (_decode(raw) for raw in block.split(b"\n")[:-1])


def _searched(blocks: Iterator[bytes], finder: LiteralFinder) -> Iterator[tuple[bytes, list[int]]]:
    """Each block with its literal hits; the next block is searched while this one is fed.

    The Rust search releases the GIL, so on two cores it overlaps with reading,
    decompressing and feeding the Scanner; results come back in order. An input of one
    block has nothing to overlap: it is searched here, with no thread (nor its imports).
    An input of several blocks is searched by keys (KeyedFinder), built from its first.
    """
    first, second = next(blocks, None), next(blocks, None)
    if second is None:
        if first is not None:
            yield first, finder.ends(memoryview(first))
        return
    from concurrent.futures import ThreadPoolExecutor

    keyed = finder.for_large_input(first)
    blocks = chain([first, second], blocks)
    with ThreadPoolExecutor(max_workers=1) as pool:
        pending: tuple[bytes, Future[list[int]]] | None = None
        for block in blocks:
            search = pool.submit(keyed.ends, memoryview(block))
            if pending is not None:
                yield pending[0], pending[1].result()
            pending = (block, search)
        if pending is not None:
            yield pending[0], pending[1].result()


def _blocks(chunks: Iterable[bytes], counter: TextInput) -> Iterator[bytes]:
    """Whole-line blocks; a line longer than MAX_LINE_BYTES is cut there, never buffered."""
    carry = b""
    in_long_line = False
    for chunk in chunks:
        if in_long_line:
            newline = chunk.find(b"\n")
            if newline < 0:
                continue
            chunk, in_long_line = chunk[newline + 1 :], False
        data = carry + chunk if carry else chunk
        last = data.rfind(b"\n")
        if last < 0:
            carry = data
            if len(carry) >= MAX_LINE_BYTES:
                carry, in_long_line = carry[:MAX_LINE_BYTES] + b"\n", True
                counter.cut_lines += 1
                yield carry
                carry = b""
            continue
        block, carry = data[: last + 1], data[last + 1 :]
        counter.cut_lines += _count_long_lines(block)
        yield block
    if carry:
        counter.cut_lines += _count_long_lines(carry)
        yield carry + b"\n"
