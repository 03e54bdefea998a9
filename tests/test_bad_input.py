"""Bad input gets a one-line error (exit 2) or a degraded report: never a traceback,
and the input is never changed."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.fixture_cases import ROOT

ARGPARSE_LOG = (
    "usage: sglang serve [-h] --model-path MODEL_PATH\n"
    "sglang serve: error: unrecognized arguments: --num-speculative-tokens 4\n"
)


def run(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "analyzer", *args],
        input=stdin,
        capture_output=True,
        cwd=ROOT,
        timeout=120,
    )


def assert_one_line_error(result: subprocess.CompletedProcess, fragment: str) -> None:
    err = result.stderr.decode()
    assert result.returncode == 2, err
    assert "Traceback" not in err
    assert err.count("\n") == 1 and err.startswith("loganalyze: error: "), err
    assert fragment in err


def json_report(result: subprocess.CompletedProcess) -> dict:
    assert "Traceback" not in result.stderr.decode()
    return json.loads(result.stdout)


def test_missing_path(tmp_path):
    assert_one_line_error(run(str(tmp_path / "nope.log")), "no such file or directory")


def test_directory_without_logs(tmp_path):
    (tmp_path / "image.png").write_bytes(b"\x89PNG")
    assert_one_line_error(run(str(tmp_path)), "holds no *.log")


def test_directory_reads_its_logs_in_order(tmp_path):
    (tmp_path / "b.log").write_text(ARGPARSE_LOG)
    (tmp_path / "a.txt").write_text(
        "[2026-01-01 10:00:00] The server is fired up and ready to roll!\n"
    )
    report = json_report(run(str(tmp_path), "--format", "json"))
    assert [Path(i["path"]).name for i in report["inputs"]] == ["a.txt", "b.log"]
    assert report["incidents"][0]["class"] == "argparse_unrecognized"


def test_empty_file_is_a_silent_death_report(tmp_path):
    empty = tmp_path / "run.log"
    empty.write_bytes(b"")
    result = run(str(empty), "--format", "json")
    report = json_report(result)
    assert result.returncode == 1
    assert report["incidents"][0]["class"] == "silent_death"
    assert "empty input" in report["warnings"][0]


def test_binary_file_is_skipped_with_a_note(tmp_path):
    blob = tmp_path / "core.log"
    blob.write_bytes(bytes(range(256)) * 64)
    result = run(str(blob), "--format", "json")
    report = json_report(result)
    assert result.returncode == 0
    assert report["inputs"][0]["kind"] == "binary"
    assert "binary file: skipped" in report["warnings"][0]


def test_invalid_utf8_and_crlf_are_read(tmp_path):
    log = tmp_path / "run.log"
    log.write_bytes(b"\xff\xfe garbage \xc3\r\n" + ARGPARSE_LOG.replace("\n", "\r\n").encode())
    report = json_report(run(str(log), "--format", "json"))
    incident = report["incidents"][0]
    assert incident["class"] == "argparse_unrecognized"
    assert not incident["evidence"][-1]["text"].endswith("\r")


def test_a_100_mb_line_is_cut_not_loaded(tmp_path):
    log = tmp_path / "run.log"
    with open(log, "wb") as handle:
        handle.write(b"x" * (100 * 1024 * 1024))
        handle.write(b"\n" + ARGPARSE_LOG.encode())
    result = run(str(log), "--format", "json")
    report = json_report(result)
    assert report["incidents"][0]["class"] == "argparse_unrecognized"
    assert report["incidents"][0]["line"] == 3
    assert any("longer than" in w for w in report["warnings"])


def test_truncated_gzip_is_analysed_as_far_as_it_reads(tmp_path):
    data = gzip.compress((ARGPARSE_LOG * 2000).encode())
    log = tmp_path / "run.log.gz"
    log.write_bytes(data[: len(data) // 2])
    report = json_report(run(str(log), "--format", "json"))
    assert report["incidents"][0]["class"] == "argparse_unrecognized"
    assert any("ends early" in w for w in report["warnings"])


def test_gz_name_that_is_not_gzip_is_read_as_text(tmp_path):
    log = tmp_path / "run.gz"
    log.write_text(ARGPARSE_LOG)
    report = json_report(run(str(log), "--format", "json"))
    assert report["incidents"][0]["class"] == "argparse_unrecognized"


def test_stdin_dash(tmp_path):
    result = run("-", "--format", "json", stdin=ARGPARSE_LOG.encode())
    report = json_report(result)
    assert report["inputs"][0]["path"] == "<stdin>"
    assert report["incidents"][0]["class"] == "argparse_unrecognized"


def test_gzip_on_stdin():
    result = run("-", "--format", "json", stdin=gzip.compress(ARGPARSE_LOG.encode()))
    assert json_report(result)["incidents"][0]["class"] == "argparse_unrecognized"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_fifo_is_read_as_a_stream(tmp_path):
    fifo = tmp_path / "pipe.log"
    os.mkfifo(fifo)

    def feed():
        with open(fifo, "w") as handle:
            handle.write(ARGPARSE_LOG)

    writer = threading.Thread(target=feed)
    writer.start()
    result = run(str(fifo), "--format", "json")
    writer.join(timeout=10)
    assert json_report(result)["incidents"][0]["class"] == "argparse_unrecognized"


def test_symlink_loop(tmp_path):
    loop = tmp_path / "loop.log"
    loop.symlink_to(loop)
    assert_one_line_error(run(str(loop)), "loop.log")


def test_malformed_user_rule_names_the_file(tmp_path):
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "broken.toml").write_text('id = "mine"\nclass = "x"\n')
    log = tmp_path / "run.log"
    log.write_text(ARGPARSE_LOG)
    assert_one_line_error(run(str(log), "--rules", str(rules)), "broken.toml: rule mine")


def test_report_is_never_written_over_an_input(tmp_path):
    log = tmp_path / "run.log"
    log.write_text(ARGPARSE_LOG)
    before = hashlib.sha256(log.read_bytes()).hexdigest()
    assert_one_line_error(run(str(log), "-o", str(log)), "over an input")
    assert hashlib.sha256(log.read_bytes()).hexdigest() == before


def test_inputs_are_unchanged_and_json_is_byte_identical(tmp_path):
    log = tmp_path / "run.log"
    log.write_text(ARGPARSE_LOG)
    stat_before = log.stat()
    first = run(str(log), "--format", "json").stdout
    second = run(str(log), "--format", "json").stdout
    assert first == second
    assert log.stat().st_mtime_ns == stat_before.st_mtime_ns
    assert log.read_text() == ARGPARSE_LOG


def test_output_file_is_written_atomically(tmp_path):
    log = tmp_path / "run.log"
    log.write_text(ARGPARSE_LOG)
    out = tmp_path / "report.json"
    result = run(str(log), "--format", "json", "-o", str(out))
    assert result.returncode == 1
    assert json.loads(out.read_text())["schema_version"] == 1
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".report")] == []


def test_directory_with_an_unreadable_file_says_what_was_skipped(tmp_path, monkeypatch):
    # CI runs as root, where chmod cannot make a file unreadable: deny it at os.access.
    from analyzer.core import read
    from analyzer.pipeline import analyze

    (tmp_path / "a.log").write_text(ARGPARSE_LOG)
    (tmp_path / "b.log").write_text(ARGPARSE_LOG)
    real_access = os.access
    monkeypatch.setattr(
        read.os, "access", lambda p, m: Path(p).name != "b.log" and real_access(p, m)
    )
    report = analyze([str(tmp_path)])
    assert [Path(i.path).name for i in report.inputs] == ["a.log"]
    assert any("skipped unreadable" in w and "b.log" in w for w in report.warnings)


def test_file_truncated_while_being_read(tmp_path, monkeypatch):
    from analyzer.core import read
    from analyzer.formats.json_report import render_json
    from analyzer.pipeline import analyze

    log = tmp_path / "run.log"
    log.write_text(
        ("[2026-01-01 10:00:00 TP0] Decode batch, token usage: 0.5\n" * 2000) + ARGPARSE_LOG
    )
    monkeypatch.setattr(read, "CHUNK_BYTES", 4096)
    original = read.TextInput._read_chunks

    def truncating(self, stream):
        for number, chunk in enumerate(original(self, stream)):
            if number == 2:
                os.truncate(log, 1000)
            yield chunk

    monkeypatch.setattr(read.TextInput, "_read_chunks", truncating)
    report = json.loads(render_json(analyze([str(log)])))
    assert report["inputs"][0]["lines"] > 0
    assert report["schema_version"] == 1


def test_file_that_grows_while_being_read(tmp_path):
    log = tmp_path / "run.log"
    log.write_text("[2026-01-01 10:00:00 TP0] Decode batch, token usage: 0.5\n" * 200000)
    stop = threading.Event()

    def grow():  # as fast as it can, capped so that a reader that never stops cannot fill the disk
        with open(log, "a") as handle:
            while not stop.is_set() and handle.tell() < 256 << 20:
                handle.write("[2026-01-01 10:00:01 TP0] Decode batch, token usage: 0.6\n" * 100)
                handle.flush()

    writer = threading.Thread(target=grow)
    writer.start()
    try:
        result = run(str(log), "--format", "json")
    finally:
        stop.set()
        writer.join(timeout=10)
    report = json_report(result)
    with open(log, "rb") as handle:
        total = sum(block.count(b"\n") for block in iter(lambda: handle.read(1 << 20), b""))
    assert 200000 <= report["inputs"][0]["lines"] <= total


@pytest.mark.parametrize("gzipped", [False, True])
def test_reading_stops_at_the_size_the_file_had_when_opened(tmp_path, gzipped):
    from analyzer.core import read
    log = tmp_path / ("run.log.gz" if gzipped else "run.log")
    first = b"[2026-01-01 10:00:00 TP0] Decode batch, token usage: 0.5\n" * 50000
    log.write_bytes(gzip.compress(first) if gzipped else first)
    text_input = read.TextInput(str(log), log)
    chunks = text_input.chunks()
    read_back = [next(chunks)]
    with open(log, "ab") as handle:  # the server keeps logging while we read
        handle.write(b"more\n" * 100000)
    read_back += list(chunks)
    assert b"".join(read_back) == first
