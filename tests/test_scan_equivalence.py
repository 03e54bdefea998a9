"""The literal fast path gives byte-identical reports to the line-by-line reference."""

from __future__ import annotations

import gzip

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analyzer.core import read
from analyzer.formats.json_report import render_json
from analyzer.pipeline import Options, analyze
from tests.fixture_cases import fixture_cases

CASES = fixture_cases()


def both(paths, command=None):
    fast = render_json(analyze(paths, Options(command=command)))
    simple = render_json(analyze(paths, Options(command=command, simple_scan=True)))
    return fast, simple


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_fixture_reports_are_identical(case):
    fast, simple = both([str(case.input)], case.user_command)
    assert fast == simple


MULTI_BLOCK = [c for c in CASES if c.input.stat().st_size > 2048]


@pytest.mark.parametrize("case", MULTI_BLOCK, ids=[c.id for c in MULTI_BLOCK])
def test_fixture_reports_are_identical_when_read_in_many_blocks(case, monkeypatch):
    """An input of several blocks is searched by keys (literal_scan.KeyedFinder), not by the
    literals themselves: every fixture over 2 KiB, read in 1 KiB chunks, still gives the
    line-by-line report."""
    monkeypatch.setattr(read, "CHUNK_BYTES", 1024)
    fast, simple = both([str(case.input)], case.user_command)
    assert fast == simple


PIECES = [
    "[2026-02-23 18:05:01 TP0] Decode batch, #running-req: 3, token usage: 0.82, #queue-req: 0",
    "usage: sglang serve [-h] --model-path MODEL_PATH",
    "sglang serve: error: unrecognized arguments: --num-speculative-tokens 4",
    "[2026-02-23 18:05:01 TP1] Scheduler hit an exception: Traceback (most recent call last):",
    '  File "/x/sglang/srt/mem_cache/pool.py", line 96, in __post_init__',
    "    raise RuntimeError(msg)",
    "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
    "During handling of the above exception, another exception occurred:",
    "",
    "[2026-02-23 18:05:01] Load weight begin. avail mem=79.00 GB",
    "+ python -m sglang.launch_server --model-path /m --mem-fraction-static 0.8",
    "[2026-02-23 18:05:09] The server is fired up and ready to roll!",
    "\x1b[33m[2026-02-23 18:05:01] warning\x1b[0m",
    "Child process unexpectedly failed with an exit code 9",
    # CPython faulthandler's dump (Python/traceback.c): headers, thread blocks, frames
    "Fatal Python error: Aborted",
    "Timeout (0:10:00)!",
    "Current thread 0x00007f2a4e6e6480 (most recent call first):",
    "Thread 0x00007f21a9fff640 (most recent call first):",
    '  File "/x/sglang/srt/model_executor/cuda_graph_runner.py", line 829 in capture_one_batch_size',
    "  <no Python frame>",
    "  Garbage-collecting",
    "x" * 70000,
]


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(st.integers(0, len(PIECES) - 1), max_size=80), st.booleans(), st.booleans())
def test_random_logs_are_identical(tmp_path_factory, picks, crlf, final_newline):
    text = ("\r\n" if crlf else "\n").join(PIECES[i] for i in picks)
    if final_newline and text:
        text += "\n"
    path = tmp_path_factory.mktemp("eq") / "run.log"
    path.write_bytes(text.encode())
    fast, simple = both([str(path)])
    assert fast == simple


def test_small_chunks_and_lines_across_chunk_borders(tmp_path, monkeypatch):
    monkeypatch.setattr(read, "CHUNK_BYTES", 4096)
    lines = [PIECES[i % len(PIECES)] for i in range(400)]
    path = tmp_path / "run.log"
    path.write_text("\n".join(lines) + "\n")
    fast, simple = both([str(path)])
    assert fast == simple


def test_gzip_input_is_identical(tmp_path):
    path = tmp_path / "run.log.gz"
    path.write_bytes(gzip.compress(("\n".join(PIECES) + "\n").encode() * 50))
    fast, simple = both([str(path)])
    assert fast == simple
