"""Speculative-decoding metrics and run comparison (issue 7).

Values are checked exactly against what the fixture lines say; the fast block parser is
checked against the line-by-line reference on every fixture; rendered compare tables
are pinned by syrupy snapshots (update with `pytest --snapshot-update`).
"""

from __future__ import annotations

import gzip
import json
import math
import re
import sys
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import analyzer.metrics.extract as metrics
from analyzer.cli import main
from analyzer.engine.redact import redact_comparison
from analyzer.formats.compare_html import render_compare_html
from analyzer.formats.metrics_table import (
    compare_dict,
    metrics_dict,
    render_compare_plain,
    render_json,
    render_metrics_plain,
)
from analyzer.formats.svg_chart import comparison_charts, line_chart, metrics_charts
from analyzer.metrics import accumulate, scanner, startup
from analyzer.metrics.batch_lines import DECODE, PREFILL, parse_batch
from analyzer.metrics.compare import compare, spec_findings
from analyzer.metrics.extract import extract_paths
from analyzer.sglang.log_format import split_prefix
from tests.fixture_cases import ROOT

FIXTURES = Path("fixtures/metrics")
EAGLE3 = str(FIXTURES / "sglang-0.5.23-eagle3.log")
NO_SPEC = str(FIXTURES / "sglang-0.5.23-no-spec.log")
FIXTURES_056 = str(FIXTURES / "sglang-0.5.6-eagle3-iterations.log")
ALL = sorted(str(p.relative_to(ROOT)) for p in (ROOT / FIXTURES).glob("*.log"))


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch):
    monkeypatch.chdir(ROOT)


def ms(text: str) -> float:
    moment = datetime.strptime(text, "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc)
    return moment.timestamp() * 1000


def run_of(path: str, **kwargs):
    return extract_paths([path], **kwargs)[0]


# ---- parsed values, exactly as the fixture lines print them ---------------------------

EXPECTED = {
    "sglang-0.5.23-eagle3": {
        "config": {
            "model": "/models/Meta-Llama-3.1-8B-Instruct",
            "algorithm": "EAGLE3",
            "draft": "/models/sglang-EAGLE3-LLaMA3.1-Instruct-8B",
            "num_steps": 3,
            "eagle_topk": 1,
            "num_draft_tokens": 4,
            "cuda_graph": True,
            "tp": 1,
            "dp": 1,
            "max_running_requests": 48,
        },
        "decode": 12,
        "prefill": 5,
        "median": 82.30,
        "accept_len": 2.10,
        "graph_share": 1.0,
        "first": (
            37,
            "2026-04-02 10:00:49",
            {
                "running_req": 1,
                "tokens": 265,
                "token_usage": 0.0,
                "accept_len": 2.05,
                "accept_rate": 0.35,
                "gen_throughput": 81.95,
                "queue_req": 0,
            },
        ),
        "phases": [
            ("weight_load", "LlamaForCausalLM", 4.31, 15.17),
            ("weight_load", "LlamaForCausalLMEagle3", 0.62, 0.98),
            ("kv_cache", "torch.bfloat16", None, None),
            ("graph_capture", "target verify CUDA graph", 9.52, 0.61),
            ("graph_capture", "draft decode CUDA graph", 5.87, 0.30),
            ("graph_capture", "draft extend CUDA graph", 3.10, 0.22),
        ],
        "kv": (401520, 49.02),
        "ready": 42.0,
        "new_tokens": 7 + 183 + 176 + 191 + 168,
    },
    "sglang-0.5.23-no-spec": {
        "config": {
            "algorithm": None,
            "draft": None,
            "cuda_graph": True,
            "tp": 1,
            "max_running_requests": 48,
        },
        "decode": 12,
        "prefill": 5,
        "median": 90.00,
        "accept_len": None,
        "graph_share": 1.0,
        "first": (
            31,
            "2026-04-02 10:00:37",
            {
                "running_req": 1,
                "tokens": 223,
                "token_usage": 0.0,
                "gen_throughput": 89.62,
                "queue_req": 0,
            },
        ),
        "phases": [
            ("weight_load", "LlamaForCausalLM", 4.31, 15.17),
            ("kv_cache", "torch.bfloat16", None, None),
            ("graph_capture", "target decode CUDA graph", 7.64, 0.48),
        ],
        "kv": (412880, 50.40),
        "ready": 31.0,
        "new_tokens": 7 + 183 + 176 + 191 + 168,
    },
    "sglang-0.5.6-eagle3-iterations": {
        "config": {
            "algorithm": "EAGLE3",
            "num_steps": 5,
            "eagle_topk": 8,
            "num_draft_tokens": 32,
            "tp": 2,
            "max_running_requests": 32,
            "cuda_graph": True,
        },
        "decode": 8,
        "prefill": 3,
        "median": (412.40 + 417.25) / 2,
        "accept_len": 3.21,
        "graph_share": 1.0,
        "first": (
            42,
            "2026-01-15 14:21:03",
            {
                "iteration": 43,
                "running_req": 4,
                "tokens": 1326,
                "accept_len": 3.21,
                "accept_rate": 0.10,
                "gen_throughput": 412.40,
                "queue_req": 0,
            },
        ),
        "phases": [
            ("weight_load", "LlamaForCausalLM", 3.0, 7.63),
            ("weight_load", "LlamaForCausalLMEagle3", 1.0, 0.97),
            ("kv_cache", "", None, None),
            ("graph_capture", "cuda graph", 13.86, 1.24),
            ("graph_capture", "draft cuda graph", 8.92, 0.66),
            ("graph_capture", "draft extend cuda graph", 3.75, 0.41),
        ],
        "kv": (860112, 52.50),
        "ready": 49.0,
        "new_tokens": 7 + 812 + 849,
    },
    "sglang-0.5.2-dp-attention": {
        "config": {
            "model": "deepseek-ai/DeepSeek-V2-Lite-Chat",
            "algorithm": None,
            "tp": 2,
            "dp": 2,
            "max_running_requests": 2048,
        },
        "decode": 12,
        "prefill": 7,
        "median": (1190.35 + 1244.80 + 3.5) / 2,
        "accept_len": None,
        "graph_share": 1.0,
        "first": (
            25,
            "2025-09-20 08:06:38",
            {
                "dp_rank": 0,
                "running_req": 8,
                "tokens": 2400,
                "token_usage": 0.01,
                "gen_throughput": 612.44,
                "queue_req": 0,
            },
        ),
        "phases": [
            ("weight_load", "DeepseekV2ForCausalLM", 9.0, 15.57),
            ("kv_cache", "", None, None),
            ("graph_capture", "cuda graph", 30.57, 1.86),
        ],
        "kv": (1164930, 41.59),
        "ready": 55.0,
        "dp_ranks": [0, 1],
    },
    "sglang-0.4.6-eagle": {
        "config": {
            "model": "meta-llama/Llama-2-7b-chat-hf",
            "algorithm": "EAGLE",
            "num_draft_tokens": 64,
        },
        "decode": 6,
        "prefill": 3,
        "median": (154.73 + 157.41) / 2,
        "accept_len": (3.62 + 3.41 + 3.88 + 3.55 + 3.70 + 3.49) / 6,
        "graph_share": 1.0,
        "first": (
            21,
            "2025-05-12 21:13:39",
            {
                "running_req": 1,
                "tokens": 216,
                "token_usage": 0.0,
                "accept_len": 3.62,
                "gen_throughput": 157.41,
                "queue_req": 0,
            },
        ),
        "phases": [
            ("weight_load", "LlamaForCausalLM", 6.0, 12.68),
            ("kv_cache", "", None, None),
            ("graph_capture", "cuda graph", 11.62, 0.36),
            ("weight_load", "LlamaEagleForCausalLM", 1.0, 1.02),
            ("kv_cache", "", None, None),
            ("graph_capture", "draft cuda graph", 4.71, 0.55),
        ],
        "kv": (83962, 41.00),
        "ready": 35.0,
        "new_tokens": 7 + 71 + 64,
    },
    "sglang-0.4.1-no-spec": {
        "config": {
            "model": "meta-llama/Llama-3.1-8B-Instruct",
            "algorithm": None,
            "max_running_requests": 4097,
        },
        "decode": 4,
        "prefill": 3,
        "median": (95.18 + 95.40) / 2,
        "accept_len": None,
        "graph_share": None,
        "first": (
            18,
            "2024-12-30 16:42:03",
            {
                "running_req": 1,
                "tokens": 252,
                "token_usage": 0.0,
                "gen_throughput": 95.62,
                "queue_req": 0,
            },
        ),
        "phases": [
            ("weight_load", "LlamaForCausalLM", 7.0, None),
            ("graph_capture", "cuda graph", 18.47, None),
        ],
        "kv": None,
        "ready": 35.0,
        "new_tokens": 7 + 212 + 230,
    },
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_values(name):
    want = EXPECTED[name]
    run = run_of(str(FIXTURES / f"{name}.log"), keep_series=True)
    for key, value in want["config"].items():
        assert run.config[key] == value, key
    assert run.decode.lines == want["decode"]
    assert run.prefill.lines == want["prefill"]
    assert run.decode.gen_throughput.median == pytest.approx(want["median"], abs=1e-9)
    if want["accept_len"] is None:
        assert run.decode.accept_len is None and not run.speculative
    else:
        assert run.decode.accept_len.mean == pytest.approx(want["accept_len"], abs=1e-9)
        assert run.speculative
    assert run.decode.graph_share == want["graph_share"]
    assert run.decode.dp_ranks == want.get("dp_ranks", [])
    assert [(p.name, p.label, p.seconds, p.mem_gb) for p in run.startup.phases] == want["phases"]
    kv = [(p.tokens, p.size_gb) for p in run.startup.phases if p.name == "kv_cache"]
    assert (kv[0] if kv else None) == want["kv"]
    assert run.startup.time_to_ready_s == want["ready"]
    if "new_tokens" in want:
        assert run.prefill.new_tokens == want["new_tokens"]
    line, stamp, values = want["first"]
    row = dict(zip(DECODE.columns, run.series["decode"].table[0], strict=True))
    assert row["line"] == line and row["time"] == ms(stamp)
    for column, value in values.items():
        assert row[column] == value, column
    assert run.first_decode.number == line
    assert run.slow_lines == 0, "every fixture shape is read by the fast path"


@pytest.mark.parametrize("path", ALL)
def test_fast_path_equals_line_by_line_reference(path, monkeypatch):
    fast = run_of(path, keep_series=True, workers=1)
    monkeypatch.setattr(scanner, "layout", lambda *args: None)
    slow = run_of(path, keep_series=True, workers=1)
    assert slow.slow_lines == fast.decode.lines + fast.prefill.lines
    for kind in ("decode", "prefill"):
        assert np.array_equal(fast.series[kind].table, slow.series[kind].table, equal_nan=True)
    assert (fast.decode, fast.prefill, fast.chart) == (slow.decode, slow.prefill, slow.chart)


@pytest.mark.parametrize("path", ALL)
def test_blocks_and_workers_do_not_change_results(path, monkeypatch):
    whole = run_of(path, keep_series=True, workers=1)
    monkeypatch.setattr(scanner, "BLOCK_BYTES", 512)
    monkeypatch.setattr(scanner, "PARALLEL_MIN_BYTES", 0)
    split = run_of(path, keep_series=True, workers=3)
    assert split.lines == whole.lines
    assert (split.decode, split.prefill, split.startup) == (
        whole.decode,
        whole.prefill,
        whole.startup,
    )
    assert split.chart == whole.chart
    assert split.first_decode == whole.first_decode
    for kind in ("decode", "prefill"):
        assert np.array_equal(split.series[kind].table, whole.series[kind].table, equal_nan=True)


def test_gzip_input_reads_the_same(tmp_path):
    packed = tmp_path / "run.log.gz"
    packed.write_bytes(gzip.compress((ROOT / EAGLE3).read_bytes()))
    plain, zipped = run_of(EAGLE3), run_of(str(packed))
    assert (zipped.decode, zipped.prefill, zipped.config) == (
        plain.decode,
        plain.prefill,
        plain.config,
    )


# ---- single lines of every shape, read by the reference parser -------------------------


def parsed(text: str, kind=DECODE) -> dict[str, float]:
    row = parse_batch(split_prefix("x", 7, text), kind)
    assert row is not None
    return {k: v for k, v in row.items() if not (isinstance(v, float) and math.isnan(v))}


def test_decode_shapes_of_each_version():
    v041 = "[2024-12-30 16:42:03 TP0] Decode batch. #running-req: 1, #token: 252, token usage: 0.00, gen throughput (token/s): 95.62, #queue-req: 0"
    assert parsed(v041) == {
        "line": 7,
        "time": ms("2024-12-30 16:42:03"),
        "running_req": 1,
        "tokens": 252,
        "token_usage": 0.0,
        "gen_throughput": 95.62,
        "queue_req": 0,
    }
    v046 = "[2025-05-12 21:13:39] Decode batch. #running-req: 1, #token: 216, token usage: 0.00, accept len: 3.62, cuda graph: True, gen throughput (token/s): 157.41, #queue-req: 0"
    assert parsed(v046)["accept_len"] == 3.62 and parsed(v046)["graph"] == 1.0
    v052 = "[2025-09-20 08:06:38 DP1 TP1] Decode batch. #running-req: 8, #token: 2400, token usage: 0.01, cpu graph: False, gen throughput (token/s): 615.94, #queue-req: 3, "
    assert parsed(v052) | {} == {
        "line": 7,
        "time": ms("2025-09-20 08:06:38"),
        "dp_rank": 1,
        "running_req": 8,
        "tokens": 2400,
        "token_usage": 0.01,
        "graph": 0.0,
        "gen_throughput": 615.94,
        "queue_req": 3,
    }
    v056 = "[2026-01-15 14:21:03 TP0] Decode batch [43], #running-req: 4, #token: 1326, token usage: 0.00, accept len: 3.21, accept rate: 0.10, cuda graph: True, gen throughput (token/s): 412.40, #queue-req: 0, "
    assert parsed(v056)["iteration"] == 43 and parsed(v056)["accept_rate"] == 0.10
    hybrid = "[2026-04-02 10:00:49] Decode batch, #running-req: 2, #full token: 900, full token usage: 0.02, #swa token: 300, swa token usage: 0.05, accept len: 1.80, accept rate: 0.27, cap len: 3.00, cuda graph: True, gen throughput (token/s): 55.10, #queue-req: 0, est. decode TFLOPS/s (per GPU): 12.34"
    assert parsed(hybrid) == {
        "line": 7,
        "time": ms("2026-04-02 10:00:49"),
        "running_req": 2,
        "tokens": 900,
        "token_usage": 0.02,
        "accept_len": 1.80,
        "accept_rate": 0.27,
        "graph": 1.0,
        "gen_throughput": 55.10,
        "queue_req": 0,
    }


def test_prefill_shapes():
    v041 = "[2024-12-30 16:42:00 TP0] Prefill batch. #new-seq: 1, #new-token: 230, #cached-token: 6, cache hit rate: 2.61%, token usage: 0.00, #running-req: 0, #queue-req: 0"
    assert parsed(v041, PREFILL) == {
        "line": 7,
        "time": ms("2024-12-30 16:42:00"),
        "new_seq": 1,
        "new_tokens": 230,
        "cached_tokens": 6,
        "token_usage": 0.0,
        "running_req": 0,
        "queue_req": 0,
    }
    v0523 = "[2026-04-02 10:00:48] Prefill batch, #new-seq: 1, #new-token: 183, #cached-token: 0, token usage: 0.00, #running-req: 0, #queue-req: 0, #pending-token: 0, cuda graph: False, input throughput (token/s): 2210.84"
    assert parsed(v0523, PREFILL)["input_throughput"] == 2210.84


def test_lines_that_are_not_stats_are_not_rows():
    assert (
        parse_batch(split_prefix("x", 1, "[2026-01-01 00:00:00] Decode batch failed"), DECODE)
        is None
    )
    assert parse_batch(split_prefix("x", 1, "no marker here"), DECODE) is None


def test_mixed_shapes_in_one_block_fall_back_and_stay_exact(tmp_path):
    lines = []
    for i in range(6):
        cap = f"cap len: {1.5 + i / 10:.2f}, " if i % 2 else ""
        lines.append(
            f"[2026-04-02 10:00:{10 + i}] Decode batch, #running-req: {i + 1}, #token: {100 * i}, "
            f"token usage: 0.0{i}, accept len: 2.{i}0, accept rate: 0.{i}0, {cap}cuda graph: {i != 3}, "
            f"gen throughput (token/s): {80 + i}.25, #queue-req: {i}"
        )
    log = tmp_path / "mixed.log"
    log.write_text("\n".join(lines) + "\n")
    run = run_of(str(log), keep_series=True)
    assert run.slow_lines == 6
    table = run.series["decode"].table
    assert table[:, DECODE.index("gen_throughput")].tolist() == [
        80.25,
        81.25,
        82.25,
        83.25,
        84.25,
        85.25,
    ]
    assert table[:, DECODE.index("graph")].tolist() == [1, 1, 1, 0, 1, 1]
    assert run.decode.graph_share == 5 / 6


def test_colour_codes_and_crlf(tmp_path):
    text = (ROOT / NO_SPEC).read_text()
    coloured = text.replace("Decode batch", "\x1b[32mDecode batch\x1b[0m").replace("\n", "\r\n")
    log = tmp_path / "coloured.log"
    log.write_bytes(coloured.encode())
    plain, odd = run_of(NO_SPEC), run_of(str(log))
    assert odd.decode.gen_throughput == plain.decode.gen_throughput
    assert odd.decode.lines == plain.decode.lines


def test_empty_and_binary_inputs(tmp_path):
    empty = tmp_path / "empty.log"
    empty.write_text("")
    run = run_of(str(empty))
    assert run.decode.lines == 0 and run.decode.gen_throughput is None and run.chart == []
    binary = tmp_path / "core.bin"
    binary.write_bytes(b"\0\1\2" * 3000)
    assert run_of(str(binary)).notes == ["binary file: skipped"]


def test_restarts_keep_the_last_startup(tmp_path):
    log = tmp_path / "twice.log"
    log.write_text((ROOT / NO_SPEC).read_text() + (ROOT / EAGLE3).read_text())
    run = run_of(str(log))
    assert run.startup.startups == 2
    assert run.config["algorithm"] == "EAGLE3"
    assert run.decode.lines == 24
    assert any("2 startups" in n for n in run.notes)


@given(st.lists(st.integers(0, 300), min_size=1, max_size=60), st.sampled_from([0.1, 0.5, 0.9]))
def test_histogram_quantile_is_numpys(values, q):
    counts = np.bincount(np.array(values))
    assert accumulate._histogram_quantile(counts, q) == pytest.approx(float(np.quantile(values, q)))


# ---- comparison and the spec_slowdown finding ------------------------------------------


def test_eagle3_slower_than_no_spec_is_a_warning_with_break_even():
    comparison = compare(extract_paths([EAGLE3, NO_SPEC]))
    assert comparison.best == 1 and comparison.baseline == 1
    (speedup,) = comparison.speedups
    assert speedup.ratio == pytest.approx(82.30 / 90.00)
    assert speedup.break_even == pytest.approx(2.10 * 90.00 / 82.30)
    (finding,) = comparison.findings
    assert (finding.rule_class, finding.rule, finding.severity) == (
        "spec_slowdown",
        "spec-slowdown",
        "warning",
    )
    assert finding.source == EAGLE3 and finding.line == 37
    assert "2.10 x 90.00 / 82.30 = 2.30" in finding.explanation
    assert "--speculative-num-draft-tokens" in finding.offending_flags
    advice = " ".join(finding.advice)
    for known in (
        "drafter",
        "more (and in-domain) data",
        "--speculative-num-draft-tokens",
        "--speculative-eagle-topk",
    ):
        assert known in advice


def test_faster_speculation_is_no_finding(tmp_path):
    fast = tmp_path / "fast.log"
    fast.write_text(
        (ROOT / EAGLE3)
        .read_text()
        .replace("gen throughput (token/s): 8", "gen throughput (token/s): 17")
    )
    comparison = compare(extract_paths([str(fast), NO_SPEC]))
    assert comparison.findings == []
    assert comparison.best == 0 and comparison.speedups[0].ratio > 1


def test_no_accepted_drafts_is_a_finding_without_baseline(tmp_path):
    log = tmp_path / "zero.log"
    text = (ROOT / EAGLE3).read_text()
    for value in ("2.05", "2.12", "2.10", "2.08", "2.15", "2.11", "2.09", "2.13", "2.07"):
        text = text.replace(f"accept len: {value}", "accept len: 1.00")
    log.write_text(text)
    (finding,) = spec_findings(run_of(str(log)))
    assert finding.rule_class == "spec_slowdown" and "1.00" in finding.title
    assert spec_findings(run_of(EAGLE3)) == []


def test_other_model_is_no_baseline():
    comparison = compare(extract_paths([str(FIXTURES / "sglang-0.4.6-eagle.log"), NO_SPEC]))
    assert comparison.speedups == [] and comparison.findings == []
    assert "no run of the same model" in render_compare_plain(comparison)


def test_compare_table_snapshot(snapshot):
    assert render_compare_plain(compare(extract_paths([EAGLE3, NO_SPEC]))) == snapshot


def test_compare_all_versions_snapshot(snapshot):
    assert render_compare_plain(compare(extract_paths(ALL))) == snapshot


def test_compare_json_snapshot(snapshot):
    text = render_json(compare_dict(compare(extract_paths([EAGLE3, NO_SPEC]))))
    data = json.loads(text)
    assert data["comparison"]["speedups"][0]["break_even_accept_len"] == 2.2965
    assert data["findings"][0]["class"] == "spec_slowdown"
    assert text == snapshot


def test_compare_html_snapshot(snapshot):
    from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

    class HtmlSnapshot(SingleFileSnapshotExtension):
        _write_mode = WriteMode.TEXT
        file_extension = "html"

    page = render_compare_html(compare(extract_paths(ALL)))
    assert page.count("<svg") == 2 and "<script" not in page
    assert page.count('<tr class="best">') == 1
    assert "0.91x slower" in page and "spec_slowdown" in page
    assert page == snapshot(extension_class=HtmlSnapshot)


def test_compare_charts_give_each_run_one_colour():
    runs = extract_paths([EAGLE3, NO_SPEC, FIXTURES_056])
    throughput, accept = comparison_charts(runs, ["a", "b", "c"])
    legend = re.compile(r'fill="(#[0-9a-f]{6})">&#9632; (\w)<')
    assert legend.findall(throughput) == [("#2563eb", "a"), ("#dc2626", "b"), ("#16a34a", "c")]
    assert legend.findall(accept) == [("#2563eb", "a"), ("#16a34a", "c")]  # b: no speculation


def test_compare_html_escapes_and_redacts(tmp_path):
    secret = "hf_" + "C" * 30
    log = tmp_path / f"{secret}<i>.log"
    log.write_bytes((ROOT / EAGLE3).read_bytes())
    page = render_compare_html(redact_comparison(compare(extract_paths([str(log), NO_SPEC]))))
    assert secret not in page and "<i>" not in page and "&lt;i&gt;" in page


def test_metrics_summary_snapshot(snapshot):
    run = run_of(EAGLE3)
    assert render_metrics_plain([run], spec_findings(run)) == snapshot


def test_output_is_deterministic():
    first = render_json(metrics_dict(extract_paths(ALL), []))
    assert render_json(metrics_dict(extract_paths(ALL), [])) == first


def test_secrets_in_paths_are_redacted(tmp_path):
    log = tmp_path / "secret.log"
    secret = "hf_" + "A" * 30
    log.write_text(
        (ROOT / EAGLE3).read_text().replace("/models/sglang-EAGLE3", f"/models/{secret}/EAGLE3")
    )
    comparison = redact_comparison(compare(extract_paths([str(log), NO_SPEC])))
    assert secret not in render_compare_plain(comparison)
    assert secret not in render_json(compare_dict(comparison))


# ---- the command line ----------------------------------------------------------------


def cli(monkeypatch, capsys, *args: str) -> tuple[int, str, str]:
    monkeypatch.setattr(sys, "argv", ["loganalyze", *args])
    with pytest.raises(SystemExit) as exit_info:
        main()
    out = capsys.readouterr()
    return exit_info.value.code, out.out, out.err


def test_cli_metrics_writes_the_series_csv(monkeypatch, capsys, tmp_path):
    target = tmp_path / "series.csv"
    code, out, err = cli(monkeypatch, capsys, "metrics", EAGLE3, "-o", str(target))
    assert code == 0 and "median 82.30" in out and "wrote 17 rows" in err
    import pandas as pd

    frame = pd.read_csv(target)
    decode = frame[frame["kind"] == "decode"]
    assert len(decode) == 12 and len(frame) == 17
    assert list(frame["line"]) == sorted(frame["line"])
    assert decode["gen_throughput"].median() == 82.30
    assert decode.iloc[0]["time"] == "2026-04-02 10:00:49"


def test_streamed_csv_equals_the_in_memory_series(tmp_path, monkeypatch):
    import pandas as pd

    monkeypatch.setattr(scanner, "BLOCK_BYTES", 512)
    target = tmp_path / "series.csv"
    runs, rows = metrics.extract_with_series([EAGLE3, NO_SPEC], target)
    frames = [run_of(p, keep_series=True).series_frame() for p in (EAGLE3, NO_SPEC)]
    expected = pd.concat(frames, ignore_index=True)
    assert rows == len(expected) == 34
    assert target.read_text() == expected.to_csv(index=False)
    assert [r.decode for r in runs] == [run_of(EAGLE3).decode, run_of(NO_SPEC).decode]


def test_parquet_series_when_pyarrow_is_installed(tmp_path):
    pytest.importorskip("pyarrow")
    import pandas as pd

    target = tmp_path / "series.parquet"
    _, rows = metrics.extract_with_series([EAGLE3], target)
    frame = pd.read_parquet(target)
    assert rows == len(frame) == 17
    assert frame[frame["kind"] == "decode"]["gen_throughput"].median() == 82.30


def test_cli_parquet_without_pyarrow_is_one_line_error(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(metrics, "_has_module", lambda name: False)
    code, _, err = cli(monkeypatch, capsys, "metrics", EAGLE3, "-o", str(tmp_path / "s.parquet"))
    assert code == 2 and err.count("\n") == 1 and "pyarrow" in err


def test_cli_json_and_compare(monkeypatch, capsys):
    code, out, _ = cli(monkeypatch, capsys, "metrics", EAGLE3, "--format", "json")
    data = json.loads(out)
    assert code == 0 and data["runs"][0]["decode"]["lines"] == 12
    assert data["runs"][0]["decode"]["accept_len"]["mean"] == 2.1
    code, out, _ = cli(monkeypatch, capsys, "compare", EAGLE3, NO_SPEC, "--format", "json")
    assert code == 0 and json.loads(out)["comparison"]["best"] == NO_SPEC
    code, out, _ = cli(monkeypatch, capsys, "compare", EAGLE3, NO_SPEC)
    assert code == 0 and "0.91x slower" in out
    code, out, _ = cli(monkeypatch, capsys, "compare", EAGLE3, NO_SPEC, "--format", "html")
    assert code == 0 and out.startswith("<!DOCTYPE html>") and out.count("<svg") == 2


def test_cli_bad_input_is_an_error_not_a_traceback(monkeypatch, capsys, tmp_path):
    code, _, err = cli(monkeypatch, capsys, "metrics", str(tmp_path / "missing.log"))
    assert code == 2 and "no such file" in err and "Traceback" not in err
    code, _, err = cli(monkeypatch, capsys, "metrics", EAGLE3, "-o", str(tmp_path / "s.txt"))
    assert code == 2 and ".csv or .parquet" in err
    named_csv = tmp_path / "run.csv"
    named_csv.write_bytes((ROOT / EAGLE3).read_bytes())
    code, _, err = cli(monkeypatch, capsys, "metrics", str(named_csv), "-o", str(named_csv))
    assert code == 2 and "over an input" in err


# ---- SVG charts ----------------------------------------------------------------------


def test_line_chart_escapes_and_breaks_on_missing_values():
    svg = line_chart(
        [("a<b>", [(0, 1.0), (1, None), (2, 3.0), (3, 4.0)])], title="<script>x</script>"
    )
    assert "<script>" not in svg and "&lt;script&gt;" in svg and "a&lt;b&gt;" in svg
    assert svg.count("<polyline") == 1 and svg.count("<circle") == 1
    assert svg.startswith("<svg") and svg.endswith("</svg>")
    assert line_chart([("a", [(0, 1.0)])], title="t") == line_chart([("a", [(0, 1.0)])], title="t")


def test_line_chart_without_data():
    assert "no data" in line_chart([("a", [])], title="empty")


def test_metrics_charts_of_a_speculative_run():
    charts = metrics_charts(run_of(EAGLE3))
    assert len(charts) == 2 and "Accept length" in charts[1]
    assert metrics_charts(run_of(NO_SPEC))[0].count("<polyline") >= 1
    assert len(metrics_charts(run_of(NO_SPEC))) == 1


def test_graph_advice_names_the_flag_of_the_runs_release():
    from analyzer.sglang.catalog import load_catalog

    assert startup.graph_limit_flag({"cuda_graph_max_bs": 8}) == "--cuda-graph-max-bs"
    assert startup.graph_limit_flag({"cuda_graph_max_bs_decode": 8}) == "--cuda-graph-max-bs-decode"
    assert load_catalog().spec(startup.graph_limit_flag(None)) is not None
    assert run_of(EAGLE3).graph_limit_flag == "--cuda-graph-max-bs-decode"
    assert run_of("fixtures/metrics/sglang-0.5.6-eagle3-iterations.log").graph_limit_flag == (
        "--cuda-graph-max-bs"
    )
