"""Reports go where they are told, and nothing else changes (core/output.py).

Run through the CLI as a subprocess against real targets: device nodes, FIFOs with a reader,
/proc and /sys, /dev/stdout, files whose mode and umask matter.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from analyzer.core.output import OutputError, open_output
from tests.fixture_cases import ROOT

LOG = "fixtures/real/unrecognized_set_x_wrapper.log"
METRICS_LOG = "fixtures/metrics/sglang-0.5.23-eagle3.log"
METRICS_BASELINE = "fixtures/metrics/sglang-0.5.23-no-spec.log"


def run(*args: str, umask: int | None = None, stdout=subprocess.PIPE, env=None):
    return subprocess.run(
        [sys.executable, "-m", "analyzer", *args],
        stdout=stdout,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        timeout=120,
        env=env,
        preexec_fn=(lambda: os.umask(umask)) if umask is not None else None,
    )


def cannot_write(result, path: str) -> str:
    """The one-line error (exit 2) for an output that cannot be written; returns it."""
    err = result.stderr.decode()
    assert result.returncode == 2, err
    assert "Traceback" not in err and "internal error" not in err, err
    assert err.count("\n") == 1 and err.startswith(f"loganalyze: error: {path}: cannot write ("), err
    return err


def json_report() -> bytes:
    return run(LOG, "--format", "json").stdout


class FifoReader(threading.Thread):
    """Reads a FIFO to its end, as the consumer waiting on `-o FIFO` would."""

    def __init__(self, path: Path) -> None:
        super().__init__(daemon=True)
        self.path, self.data = path, b""

    def run(self) -> None:
        with open(self.path, "rb") as stream:
            self.data = stream.read()


def fifo(tmp_path: Path, name: str) -> tuple[Path, FifoReader]:
    path = tmp_path / name
    os.mkfifo(path)
    reader = FifoReader(path)
    reader.start()
    return path, reader


def node(path: str | Path) -> tuple[int, int, int]:
    found = os.stat(path)
    return stat.S_IFMT(found.st_mode), found.st_ino, found.st_rdev


# ---- devices, FIFOs, descriptors: written in place, never renamed over ------------------


def test_dev_null_stays_the_device():
    before = node("/dev/null")
    result = run(LOG, "--format", "json", "-o", "/dev/null")
    assert result.returncode == 1, result.stderr
    assert node("/dev/null") == before and stat.S_ISCHR(before[0])


def test_dev_full_is_a_cannot_write_and_stays_the_device():
    before = node("/dev/full")
    err = cannot_write(run(LOG, "--format", "json", "-o", "/dev/full"), "/dev/full")
    assert "No space left on device" in err
    assert node("/dev/full") == before and stat.S_ISCHR(before[0])


def test_a_fifo_gets_the_report_and_stays_a_fifo(tmp_path):
    path, reader = fifo(tmp_path, "report.pipe")
    result = run(LOG, "--format", "json", "-o", str(path))
    reader.join(30)
    assert result.returncode == 1, result.stderr
    assert reader.data == json_report()
    assert stat.S_ISFIFO(os.stat(path).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.pipe"]


def test_html_markdown_junit_into_fifos(tmp_path):
    pipes = {name: fifo(tmp_path, f"r.{name}") for name in ("html", "markdown", "junit")}
    args = [a for name, (path, _) in pipes.items() for a in (f"--{name}", str(path))]
    result = run(LOG, "--format", "plain", *args)
    assert result.returncode == 1, result.stderr
    for path, reader in pipes.values():
        reader.join(30)
        assert stat.S_ISFIFO(os.stat(path).st_mode)
    assert pipes["html"][1].data.startswith(b"<!DOCTYPE html>")
    assert b"argparse_unrecognized" in pipes["markdown"][1].data
    assert pipes["junit"][1].data.startswith(b"<?xml")


def test_dev_stdout_when_stdout_is_a_pipe():
    result = run(LOG, "--format", "json", "-o", "/dev/stdout")
    assert result.returncode == 1, result.stderr
    assert result.stdout == json_report()


def test_dev_stdout_when_stdout_is_a_file_writes_through_the_descriptor(tmp_path):
    out = tmp_path / "captured.json"
    with open(out, "wb") as handle:
        inode = os.fstat(handle.fileno()).st_ino
        result = run(LOG, "--format", "json", "-o", "/dev/stdout", stdout=handle)
    assert result.returncode == 1, result.stderr
    assert out.read_bytes() == json_report()
    assert out.stat().st_ino == inode  # written through fd 1, not a new file renamed over it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["captured.json"]


def test_proc_self_fd_is_the_descriptor():
    result = run(LOG, "--format", "json", "-o", "/proc/self/fd/1")
    assert result.returncode == 1, result.stderr
    assert result.stdout == json_report()


# ---- what cannot be written: one line, exit 2 ---------------------------------------------


def test_proc_version_is_a_cannot_write():
    before = Path("/proc/version").read_text()
    cannot_write(run(LOG, "--format", "plain", "--html", "/proc/version"), "/proc/version")
    assert Path("/proc/version").read_text() == before


def test_a_report_under_sys_is_a_cannot_write():
    cannot_write(run(LOG, "--format", "json", "-o", "/sys/report.json"), "/sys/report.json")
    assert not Path("/sys/report.json").exists()


def test_a_directory_is_a_cannot_write(tmp_path):
    cannot_write(run(LOG, "-o", str(tmp_path)), str(tmp_path))


def test_ci_json_onto_dev_full():
    cannot_write(run("ci", LOG, "--json", "/dev/full"), "/dev/full")


def test_a_failed_write_leaves_the_old_file_and_no_temp(tmp_path):
    report = tmp_path / "report.json"
    report.write_text("yesterday\n")
    with pytest.raises(OutputError, match="cannot write"):
        with open_output(report, []) as handle:
            handle.write("half a report")
            raise OSError(28, "No space left on device")
    assert report.read_text() == "yesterday\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]


# ---- regular files: atomic, the mode kept, new ones as a shell would create them ------------


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o600, 0o664])
def test_overwriting_keeps_the_files_mode(tmp_path, mode):
    report = tmp_path / "report.json"
    report.write_text("yesterday\n")
    report.chmod(mode)
    result = run(LOG, "--format", "json", "-o", str(report), umask=0o077)
    assert result.returncode == 1, result.stderr
    assert stat.S_IMODE(report.stat().st_mode) == mode
    assert report.read_bytes() == json_report()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_a_new_file_gets_the_umasks_mode(tmp_path, umask, mode):
    report = tmp_path / "new.html"
    result = run(LOG, "--format", "plain", "--html", str(report), umask=umask)
    assert result.returncode == 1, result.stderr
    assert stat.S_IMODE(report.stat().st_mode) == mode
    assert report.read_text().startswith("<!DOCTYPE html>")


def test_a_symlink_is_followed_and_stays_a_symlink(tmp_path):
    real = tmp_path / "real.json"
    real.write_text("old\n")
    real.chmod(0o644)
    link = tmp_path / "link.json"
    link.symlink_to(real)
    result = run(LOG, "--format", "json", "-o", str(link))
    assert result.returncode == 1, result.stderr
    assert link.is_symlink() and real.read_bytes() == json_report()
    assert stat.S_IMODE(real.stat().st_mode) == 0o644


def test_never_over_an_input_even_through_a_link(tmp_path):
    log = tmp_path / "run.log"
    log.write_bytes((ROOT / LOG).read_bytes())
    before = log.read_bytes()
    (tmp_path / "soft.log").symlink_to(log)
    os.link(log, tmp_path / "hard.log")
    for target in ("run.log", "soft.log", "hard.log"):
        result = run(str(log), "-o", str(tmp_path / target))
        err = result.stderr.decode()
        assert result.returncode == 2 and "over an input" in err and err.count("\n") == 1, err
    assert log.read_bytes() == before


# ---- metrics and compare -------------------------------------------------------------------


def test_metrics_series_into_a_fifo_and_keeping_a_mode(tmp_path):
    path, reader = fifo(tmp_path, "series.csv")
    result = run("metrics", METRICS_LOG, "-o", str(path))
    reader.join(30)
    assert result.returncode == 0, result.stderr
    assert reader.data.startswith(b"source,") and reader.data.count(b"\n") > 10
    assert stat.S_ISFIFO(os.stat(path).st_mode)
    kept = tmp_path / "kept.csv"
    kept.write_text("old\n")
    kept.chmod(0o644)
    assert run("metrics", METRICS_LOG, "-o", str(kept), umask=0o077).returncode == 0
    assert stat.S_IMODE(kept.stat().st_mode) == 0o644
    assert kept.read_bytes() == reader.data


def test_metrics_series_through_a_link_to_dev_full(tmp_path):
    link = tmp_path / "series.csv"
    link.symlink_to("/dev/full")
    cannot_write(run("metrics", METRICS_LOG, "-o", str(link)), str(link))
    assert link.is_symlink() and stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_compare_output(tmp_path):
    out = tmp_path / "compare.json"
    result = run("compare", METRICS_LOG, METRICS_BASELINE, "-f", "json", "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert json.loads(out.read_text())["comparison"]["best"] == METRICS_BASELINE
    cannot_write(run("compare", METRICS_LOG, METRICS_BASELINE, "-o", "/dev/full"), "/dev/full")


# ---- catalog build -o (needs a real SGLang) --------------------------------------------------


@pytest.mark.sglang
def test_catalog_build_onto_devices(tmp_path):
    python = os.environ.get("LOGANALYZE_SGLANG_PYTHON")
    if not python:
        pytest.skip("LOGANALYZE_SGLANG_PYTHON is not set")
    env = {key: value for key, value in os.environ.items() if not key.startswith("SGLANG_")}
    env["PYTHONPATH"] = str(ROOT)

    def build(target: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [python, "-m", "analyzer", "catalog", "build", "-o", target],
            capture_output=True, cwd=ROOT, env=env, timeout=600,
        )  # fmt: skip

    cannot_write(build("/dev/full"), "/dev/full")
    result = build("/dev/null")
    assert result.returncode == 0, result.stderr
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    assert not list(Path("/dev").glob("errors-*.json"))  # nothing written beside a device
