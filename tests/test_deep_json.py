"""Readers of JSON never recurse without bound: a deep or huge value is skipped with a note,
the rest of the input still analysed (core/bounded_json.py, transcripts/jsonstream.py)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from analyzer.core import bounded_json
from analyzer.transcripts import jsonstream
from analyzer.transcripts.jsonstream import ObjectStream, RecordLines
from tests.fixture_cases import ROOT

TRANSCRIPTS = ROOT / "fixtures" / "transcripts"
DEPTH = 200_000
DEEP_ARRAY = "[" * DEPTH + "]" * DEPTH
DEEP_OBJECT = '{"a":' * DEPTH + "1" + "}" * DEPTH


def analyse(path: Path) -> dict:
    result = subprocess.run(
        [sys.executable, "-m", "analyzer", str(path), "--format", "json"],
        capture_output=True, cwd=ROOT, timeout=120,
    )  # fmt: skip
    err = result.stderr.decode()
    assert result.returncode in (0, 1) and "Traceback" not in err and not err, err
    return json.loads(result.stdout)


def verdict_and_classes(report: dict) -> tuple[str, list[str]]:
    return report["verdict"], [i["class"] for i in report["incidents"]]


def test_loads_turns_depth_into_a_value_error():
    with pytest.raises(bounded_json.JsonTooDeepError):
        bounded_json.loads(DEEP_ARRAY)
    assert issubclass(bounded_json.JsonTooDeepError, ValueError)
    assert bounded_json.loads('{"a": [1, {"b": null}]}') == {"a": [1, {"b": None}]}


@pytest.mark.parametrize(
    ("fixture", "deep", "where"),
    [
        ("claude_unrecognized_then_assertion.jsonl", DEEP_ARRAY, 1),
        ("claude_unrecognized_then_assertion.jsonl", DEEP_OBJECT, 0),
        ("codex_gpus_busy_then_oom.jsonl", DEEP_ARRAY, 2),
        ("codex_gpus_busy_then_oom.jsonl", DEEP_OBJECT, 1),
    ],
)
def test_a_deep_jsonl_line_is_skipped_and_noted(tmp_path, fixture, deep, where):
    lines = (TRANSCRIPTS / fixture).read_text("utf-8").splitlines(keepends=True)
    path = tmp_path / fixture
    path.write_text("".join([*lines[:where], deep + "\n", *lines[where:]]), "utf-8")
    report, original = analyse(path), analyse(TRANSCRIPTS / fixture)
    assert report["inputs"][0]["kind"] == original["inputs"][0]["kind"]
    assert verdict_and_classes(report) == verdict_and_classes(original)
    assert "1 line(s) of JSON nested too deep to read: skipped" in report["inputs"][0]["notes"]


def test_a_deep_message_in_an_opencode_export_is_skipped(tmp_path):
    fixture = TRANSCRIPTS / "opencode_export_log_folder_missing.json"
    text = fixture.read_text("utf-8")
    start = text.index("[", text.index('"messages"')) + 1
    # brackets and escaped quotes inside strings must not confuse the step over the value
    deep = '{"info": {"note": "a\\"]}[{\\\\"}, "parts": ' + DEEP_ARRAY + "}"
    path = tmp_path / "export.json"
    path.write_text(text[:start] + deep + "," + DEEP_OBJECT + "," + text[start:], "utf-8")
    report, original = analyse(path), analyse(fixture)
    assert verdict_and_classes(report) == verdict_and_classes(original)
    notes = report["inputs"][0]["notes"]
    assert "2 value(s) nested too deep or too big to read: skipped" in notes


def test_a_deep_user_rule_is_a_one_line_error(tmp_path):
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "deep.toml").write_text(f'id = "deep"\nclass = "x"\nx = {DEEP_ARRAY}\n')
    result = subprocess.run(
        [sys.executable, "-m", "analyzer", "fixtures/real/unrecognized_set_x_wrapper.log",
         "--rules", str(rules)],
        capture_output=True, cwd=ROOT, timeout=120,
    )  # fmt: skip
    err = result.stderr.decode()
    assert result.returncode == 2 and err.count("\n") == 1, err
    assert "deep.toml: not valid TOML (nested too deep to read)" in err


def test_a_huge_jsonl_line_is_skipped_unread(monkeypatch):
    monkeypatch.setattr(jsonstream, "MAX_RECORD_BYTES", 64)
    monkeypatch.setattr(jsonstream, "CHUNK", 16)
    huge = json.dumps({"type": "user", "text": "x" * 500}).encode()
    stream = io.BytesIO(b'{"n": 1}\n' + huge + b'\nnot json\n{"n": 2}\n')
    records = RecordLines()
    assert list(records.read(stream)) == [(1, {"n": 1}), (4, {"n": 2})]
    assert records.lines == 4
    assert records.notes() == [
        "1 line(s) were not JSON records: skipped",
        "1 line(s) over 0 MiB: skipped unread",
    ]


def test_a_huge_value_in_a_stream_is_stepped_over(monkeypatch):
    monkeypatch.setattr(jsonstream, "MAX_VALUE_CHARS", 100)
    monkeypatch.setattr(jsonstream, "CHUNK", 7)  # escapes and brackets cut at chunk edges
    huge = {"info": {"text": 'q\\"[{' * 100}, "parts": [[1, 2]] * 50}
    text = json.dumps({"info": {"id": "s"}, "messages": [{"m": 1}, huge, {"m": 2}], "end": 3})
    members = ObjectStream(io.BytesIO(text.encode()), frozenset({"messages"}))
    assert list(members) == [
        ("info", {"id": "s"}), ("messages", {"m": 1}), ("messages", {"m": 2}), ("end", 3),
    ]  # fmt: skip
    assert members.skipped == 1
