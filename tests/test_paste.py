"""Undoing what pasting did (analyzer/engine/paste.py): terminal hard wraps, HTML entities,
invisible characters, typographic quotes, `\\r` redraws, a JSON string's `\\n`; and the
logs that only look mangled, which must read as before.

fixtures/paste/ holds real logs mangled these ways (tests/test_fixtures.py checks their
verdicts); these tests check the evidence and the negatives.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analyzer.engine.paste import NO_REPAIRS, Rejoiner, cut_width, escaped_lines, read_paste
from analyzer.engine.scan import visible_lines
from analyzer.formats.json_report import render_json
from analyzer.pipeline import Options, analyze

ROOT = Path(__file__).resolve().parent.parent
PASTE = ROOT / "fixtures" / "paste"
TRACEBACK = [
    "[2026-03-02 10:00:01 TP0] Scheduler hit an exception: Traceback (most recent call last):",
    '  File "/opt/venv/lib/python3.11/site-packages/sglang/srt/managers/scheduler.py", '
    "line 2791, in run_scheduler_process",
    "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, dp_rank)",
    "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
]


def _report(path: Path) -> dict:
    return json.loads(render_json(analyze([str(path)], Options())))


def _write(tmp_path: Path, lines: list[str], name: str = "pasted.log") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", "utf-8")
    return path


def _wrap(lines: list[str], width: int) -> list[str]:
    out = []
    for line in lines:
        while len(line) > width:
            out, line = [*out, line[:width]], line[width:]
        out.append(line)
    return out


def test_a_rejoined_line_cites_the_lines_the_user_pasted():
    path = PASTE / "hard_wrapped_80_config_context_length.log"
    physical = path.read_text("utf-8").split("\n")
    report = _report(path)
    evidence = next(
        e for e in report["incidents"][0]["evidence"] if e["text"].startswith("ValueError: ")
    )
    first = evidence["line"]
    pasted = evidence["pasted"].split("\n")
    assert len(pasted) > 1 and all(len(p) == 80 for p in pasted[:-1])
    assert pasted == physical[first - 1 : first - 1 + len(pasted)]
    assert evidence["text"] == "".join(pasted)
    assert "context_length (8192) is greater than" in evidence["text"]
    assert any("hard-wrap at 80 columns" in n for s in report["inputs"] for n in s["notes"])


def test_the_input_file_is_never_changed():
    path = PASTE / "html_escaped_engine_unexpected_keyword.log"
    before = path.read_bytes()
    report = _report(path)
    assert path.read_bytes() == before
    escaped = [e for i in report["incidents"] for e in i["evidence"] if "pasted" in e]
    lines = before.decode().split("\n")
    assert escaped and all(lines[e["line"] - 1] == e["pasted"] for e in escaped)
    assert all("&quot;" not in e["text"] and "&#39;" not in e["text"] for e in escaped)


@pytest.mark.parametrize("width", [80, 100, 120, 160])
def test_a_traceback_cut_at_a_terminal_width_reads_as_the_whole_one(tmp_path, width):
    whole = _report(_write(tmp_path, TRACEBACK, "whole.log"))["incidents"][0]
    cut = _report(_write(tmp_path, _wrap(TRACEBACK, width)))["incidents"][0]
    assert (cut["class"], cut["title"]) == (whole["class"], whole["title"])


def test_genuinely_short_lines_are_never_joined():
    # the longest lines of a log all of one length, each followed by a line of its own
    # kind (records of one template): no terminal cut them
    lines = [
        f"gpu-node-a:2041{i}:2041{i} [{i}] NCCL INFO comm 0x5{i}a0 rank {i} nranks 8 cudaDev "
        f"{i} nvmlDev {i} busId {i}8000 - Init COMPLETE"
        for i in range(8)
    ]
    lines += ["[2026-03-02 10:00:05 TP0] Load weight end. avail mem=20.45 GB"] * 3
    assert cut_width(visible_lines(lines), lambda line: False) is not None  # the shape alone
    assert read_paste(lines).repairs == NO_REPAIRS  # but each next line starts a record


@pytest.mark.parametrize(
    "folder", ["real", "source", "negative", "metrics"], ids=lambda f: f"fixtures/{f}"
)
def test_logs_as_written_need_no_repair(folder):
    """The fast path stays: an input with nothing to undo reads no repair."""
    for path in sorted((ROOT / "fixtures" / folder).glob("*.log")):
        head = path.read_text("utf-8", errors="replace").split("\n")[:400]
        assert read_paste(visible_lines(head)).repairs == NO_REPAIRS, path.name


def test_a_url_with_amp_is_left_as_written(tmp_path):
    lines = [
        "[2026-03-02 10:00:00] Downloading https://hf.example/api/models?author=org&amp;"
        "sort=downloads&limit=5",
        *TRACEBACK,
    ]
    assert not read_paste(lines).repairs.unescape
    report = _report(_write(tmp_path, lines))
    assert report["incidents"][0]["class"] == "oom"
    assert not any("paste repaired" in n for s in report["inputs"] for n in s["notes"])


def test_entities_beside_raw_markup_are_the_logs_own_text():
    lines = ["<html><body>502 Bad Gateway</body></html>", "detail: &lt;none&gt;", *TRACEBACK]
    assert not read_paste(lines).repairs.unescape


def test_an_escaped_paste_is_unescaped_with_its_amp():
    lines = [
        "usage: sglang serve [-h] --model-path MODEL_PATH",
        "sglang serve: error: argument --dtype: invalid choice: &#39;fp9&#39; (choose from "
        "&#39;auto&#39;, &#39;half&#39;)",
        "see https://docs.example/?a=1&amp;b=2",
    ]
    repairs = read_paste(lines).repairs
    assert repairs.unescape
    texts = [text for _, text, _ in Rejoiner(repairs).lines(lines)]
    assert "invalid choice: 'fp9'" in texts[1] and texts[2].endswith("?a=1&b=2")


def test_a_logged_prompt_with_escaped_newlines_stays_one_line():
    line = (
        "[2026-03-02 10:00:00 TP0] Receive: obj=GenerateReqInput(text='Question:\\nWhat is 2+2?"
        "\\nAnswer:\\n', sampling_params={'max_new_tokens': 8})"
    )
    assert escaped_lines(line) is None
    assert read_paste([line]).repairs == NO_REPAIRS


def test_a_logged_prompt_holding_a_traceback_is_not_the_servers(tmp_path):
    # a coding assistant's request, logged with --log-requests: the traceback is its text
    prompt = json.dumps("Why does this fail?\n" + "\n".join(TRACEBACK))[1:-1]
    lines = [
        f"[2026-03-02 10:00:{n:02d} TP0] Decode batch, #running-req: 1, #token: {90 + n}, "
        "token usage: 0.01, gen throughput (token/s): 41.20, #queue-req: 0"
        for n in range(12)
    ]
    lines.insert(6, f"[2026-03-02 10:00:05] Receive: obj=GenerateReqInput(text='{prompt}')")
    assert escaped_lines(lines[6]) is not None  # it does hold log-like lines
    assert read_paste(lines).repairs == NO_REPAIRS  # but among a log's own records
    assert _report(_write(tmp_path, lines))["incidents"] == []


def test_a_log_in_a_json_string_is_split_into_its_lines(tmp_path):
    raw = json.dumps("\n".join(TRACEBACK))[1:-1]
    report = _report(_write(tmp_path, [raw]))
    incident = report["incidents"][0]
    assert incident["class"] == "oom"
    assert all(e["line"] == 1 for e in incident["evidence"])
    assert any(
        e["text"].startswith("RuntimeError: Not enough memory") for e in incident["evidence"]
    )


def test_a_line_written_over_a_progress_bar_is_read_as_shown(tmp_path):
    bar = "Loading safetensors checkpoint shards:  50% Completed | 1/2 [00:01<00:01,  1.52it/s]"
    lines = [*TRACEBACK[:-1], f"{bar}\r{TRACEBACK[-1]}"]
    evidence = _report(_write(tmp_path, lines))["incidents"][0]["evidence"]
    last = next(e for e in evidence if e["line"] == len(lines))
    assert last["text"] == TRACEBACK[-1] and last["pasted"] == lines[-1]
    # a bar drawn over the line after it was written does not hide it
    lines = [*TRACEBACK[:-1], f"{TRACEBACK[-1]}\r{bar}"]
    assert _report(_write(tmp_path, lines))["incidents"][0]["class"] == "oom"


def test_details_and_invisible_characters_and_smart_quotes(tmp_path):
    line = "sglang-1  | sglang serve: error: argument --dtype: invalid choice: 'fp9' (choose "
    line += "from 'auto', 'half', 'float16', 'bfloat16', 'float', 'float32')"
    plain = _report(_write(tmp_path, [line], "plain.log"))["incidents"][0]
    mangled = [
        "<details><summary>server log</summary>",
        "",
        "```",
        "\ufeff" + line.replace("'", "\u2019").replace("_", "_\u200b").replace("  ", "\u00a0 "),
        "```",
        "</details>",
    ]
    found = _report(_write(tmp_path, mangled))["incidents"][0]
    assert (found["class"], found["offending_flags"]) == (plain["class"], plain["offending_flags"])


@pytest.mark.parametrize("session", [False, True], ids=["log", "terminal-session"])
def test_one_line_cut_at_a_terminals_width_is_rejoined(tmp_path, session):
    # a `$ ` session is read as a transcript: its log views are repaired as a log file is
    exception = "ValueError: The input (85050 tokens) is longer than the model's context length "
    exception += "(32768 tokens)."
    lines = [
        "$ python3 -m sglang.launch_server --model-path /models/m",
        exception[:80],
        exception[80:],
    ]
    if session:
        lines = ['$ python3 -c "import torch; print(torch.__version__)"', "2.9.1+cu128", *lines]
    evidence = [e for i in _report(_write(tmp_path, lines))["incidents"] for e in i["evidence"]]
    cut = next(e for e in evidence if e["text"].startswith("ValueError"))
    assert cut["text"].endswith("(32768 tokens).") and cut["pasted"] == "\n".join(lines[-2:])
