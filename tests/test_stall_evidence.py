"""What a log that stops without an error needs before it is called a stall.

A stall is a rank waiting inside a step: a phase begun and not ended, or lines of its own
after the last phase it finished. A log whose ranks all end on the line that finished a
step shows nothing waiting (a paste cut there, or a server about to print its next line).
"""

from __future__ import annotations

from pathlib import Path

from analyzer.pipeline import Options, analyze

LOADED = [
    "[2026-01-01 10:00:00 TP0] Load weight begin. avail mem=78.10 GB",
    "[2026-01-01 10:00:09 TP0] Load weight end. type=LlamaForCausalLM, avail mem=62.00 GB",
    "[2026-01-01 10:00:10 TP0] KV Cache is allocated. #tokens: 400000, K size: 24.00 GB",
    "[2026-01-01 10:00:10 TP0] Capture cuda graph begin. This can take up to several minutes.",
    "Capturing batches (avail_mem=3.10 GB): 100%|██████████| 4/4 [00:03<00:00,  1.07it/s]",
    "[2026-01-01 10:00:14 TP0] Capture cuda graph end. Time elapsed: 3.77 s. avail mem=3.00 GB.",
]
UVICORN = [
    "[2026-01-01 10:00:15] INFO:     Started server process [4242]",
    "[2026-01-01 10:00:15] INFO:     Application startup complete.",
    "[2026-01-01 10:00:15] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)",
]


def _incidents(tmp_path: Path, lines: list[str]):
    path = tmp_path / "run.log"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    report = analyze([str(path)], Options())
    return [i for i in report.incidents if i.severity in ("fatal", "error")]


def test_a_log_that_ends_on_a_finished_step_is_no_stall(tmp_path):
    assert _incidents(tmp_path, LOADED) == []
    assert _incidents(tmp_path, LOADED[:2]) == []


def test_a_rank_that_printed_after_its_last_step_is_waiting_in_the_next(tmp_path):
    lines = [
        *LOADED[:2],
        "[2026-01-01 10:00:12 TP0] Allocating 15.00 GB host memory for hierarchical KV cache.",
    ]
    (root,) = _incidents(tmp_path, lines)
    assert root.rule == "startup-stall"
    assert "after the weights loaded" in root.title


def test_a_phase_begun_and_not_ended_is_a_stall(tmp_path):
    (root,) = _incidents(tmp_path, LOADED[:4])
    assert root.rule == "startup-stall" and "during CUDA graph capture" in root.title


def test_a_server_stuck_in_its_warmup_request_says_so(tmp_path):
    (root,) = _incidents(tmp_path, [*LOADED, *UVICORN])
    assert root.rule == "startup-stall"
    assert "warmup request" in root.title
    assert any("no_proxy" in a for a in root.advice)


def test_uvicorn_alone_is_not_an_sglang_startup(tmp_path):
    assert _incidents(tmp_path, UVICORN) == []
