"""CPython faulthandler's dumps (issue 16): the crashing thread's frames place a fatal signal's
death; a timeout's dump or SGLang's watchdog's is no death."""

from __future__ import annotations

from pathlib import Path

from analyzer.core.model import InputSummary
from analyzer.engine.scan import scan_lines
from analyzer.pipeline import Options, analyze

SGL = "/opt/venv/lib/python3.12/site-packages/sglang/srt"
CAPTURE_DUMP = [
    "[2026-01-01 10:00:00 TP0] Capture cuda graph begin. This can take up to several minutes.",
    "Capturing batches (bs=8 avail_mem=5.10 GB):   0%|  | 0/4 [00:00<?, ?it/s]"
    "Fatal Python error: Floating point exception",
    "",
    "Thread 0x00007f0000000001 (most recent call first):",
    '  File "/usr/lib/python3.12/threading.py", line 359 in wait',
    f'  File "{SGL}/managers/scheduler.py", line 2109 in event_loop_overlap',
    "",
    "Current thread 0x00007f0000000002 (most recent call first):",
    "  Garbage-collecting",
    '  File "/opt/venv/lib/python3.12/site-packages/torch/cuda/graphs.py", line 186 in __exit__',
    f'  File "{SGL}/model_executor/runner/decode_cuda_graph_runner.py", line 1431 in capture_one_shape',
    f'  File "{SGL}/model_executor/model_runner_components/cuda_graph_setup.py", line 428 in capture_cuda_graphs',
    f'  File "{SGL}/managers/scheduler.py", line 6362 in run_scheduler_process',
    "",
    "Extension modules: numpy._core._multiarray_umath, torch._C (total: 2)",
]


def _write(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "server.log"
    path.write_text("\n".join(lines) + "\n", "utf-8")
    return path


def _causes(path: Path, simple: bool = False):
    report = analyze([str(path)], Options(simple_scan=simple))
    return [i for i in report.incidents if i.severity in ("fatal", "error")]


def test_the_scan_keeps_the_crashing_threads_frames_in_traceback_order():
    log = scan_lines(InputSummary(path="x.log"), CAPTURE_DUMP, [])
    (dump,) = log.fault_dumps
    assert dump.signal == "Floating point exception" and not dump.hang
    assert dump.header is not None and dump.header.number == 2
    assert dump.thread is not None and dump.thread.number == 8
    # only the current thread's, outermost first; the other thread's event loop is not there
    assert [f.function for f in dump.frames] == [
        "run_scheduler_process",
        "capture_cuda_graphs",
        "capture_one_shape",
        "__exit__",
    ]
    assert [line.number for line in dump.frame_lines] == [13, 12, 11, 10]
    assert log.tracebacks == []  # `line N in F` frames are no traceback's


def test_a_signal_in_capture_is_a_capture_failure_naming_the_signal(tmp_path):
    for simple in (False, True):
        (root,) = _causes(_write(tmp_path, CAPTURE_DUMP), simple)
        assert (root.rule_class, root.rule, root.line) == (
            "cuda_graph_capture",
            "frame-phase:cuda-graph-capture",
            2,
        )
        assert "SIGFPE" in root.title and "CUDA graph capture" in root.title


def test_another_thread_in_a_phase_does_not_place_the_death(tmp_path):
    # the crashing thread runs no Python frame; another sits in a capture frame
    lines = [
        "Fatal Python error: Segmentation fault",
        "",
        "Thread 0x00007f0000000001 (most recent call first):",
        f'  File "{SGL}/model_executor/model_runner.py", line 1192 in init_device_graphs',
        "",
        "Current thread 0x00007f0000000002 (most recent call first):",
        "  <no Python frame>",
    ]
    (root,) = _causes(_write(tmp_path, lines))
    assert (root.rule_class, root.rule) == ("silent_death", "silent-death")
    assert "SIGSEGV" in root.title and "no Python frame" in root.explanation


def test_a_dump_cut_above_its_header_is_a_death(tmp_path):
    (root,) = _causes(_write(tmp_path, CAPTURE_DUMP[7:]))
    assert (root.rule_class, root.line) == ("cuda_graph_capture", 1)
    assert "a fatal signal" in root.title


def test_a_timeout_dump_is_no_death(tmp_path):
    # dump_traceback_later's header: a hang's dump, whatever its blocks
    lines = ["Timeout (0:10:00)!", *CAPTURE_DUMP[3:]]
    assert _causes(_write(tmp_path, lines)) == []


def test_sglangs_watchdog_dumping_the_threads_is_no_death(tmp_path):
    # the watchdog's thread is the current one when it dumps the others (no header)
    lines = [
        "[2026-01-01 10:00:00 TP0] Decode batch. #running-req: 1, #token: 90, token usage: 0.00",
        "Current thread 0x00007f0000000003 (most recent call first):",
        f'  File "{SGL}/managers/scheduler.py", line 1419 in watchdog_thread',
        '  File "/usr/lib/python3.12/threading.py", line 1012 in run',
        "",
        "Thread 0x00007f0000000002 (most recent call first):",
        f'  File "{SGL}/managers/scheduler.py", line 2109 in event_loop_overlap',
    ]
    assert _causes(_write(tmp_path, lines)) == []


def test_a_traceback_after_the_dump_ends_it(tmp_path):
    lines = [
        *CAPTURE_DUMP[7:10],
        "Traceback (most recent call last):",
        f'  File "{SGL}/entrypoints/engine.py", line 1373, in _wait_for_scheduler_ready',
        "    raise _scheduler_died_error(j, scheduler_procs[j])",
        "RuntimeError: Rank 0 scheduler died during initialization (exit code: -8).",
    ]
    log = scan_lines(InputSummary(path="x.log"), lines, [])
    assert [len(d.frames) for d in log.fault_dumps] == [1]
    assert [t.exception_type for t in log.tracebacks] == ["RuntimeError"]
