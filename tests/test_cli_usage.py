"""The command line as a new user meets it: --version, -h, one-line usage errors, range
checks, --session, --format command, folder scans that skip loganalyze's own reports, and
corrected commands that come back whole from every format."""

from __future__ import annotations

import html
import io
import json
import re
import subprocess
import sys

import pytest
import typer
from rich.console import Console

from analyzer import __version__
from analyzer.cli import app
from analyzer.formats.github import render_annotations
from analyzer.formats.html import render_html
from analyzer.formats.markdown import render_markdown
from analyzer.formats.terminal import render_plain, render_rich
from analyzer.pipeline import analyze
from tests.fixture_cases import ROOT

TRANSCRIPT = ROOT / "fixtures" / "transcripts" / "terminal_nohup_wrong_interpreter.txt"
EXPORT = ROOT / "fixtures" / "transcripts" / "opencode_export_log_folder_missing.json"
LOG = ROOT / "fixtures" / "real" / "spec_eagle3_topk_without_steps.log"


def _cli(*argv: str, cwd=ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "analyzer", *argv], capture_output=True, text=True, cwd=cwd
    )


def test_version_names_the_package_and_its_catalogs():
    done = _cli("--version")
    assert done.returncode == 0
    assert done.stdout.startswith(f"loganalyze {__version__} (SGLang flag catalogs: ")
    assert "0.5.23" in done.stdout


@pytest.mark.parametrize("flag", ["-h", "--help"])
def test_help_leads_with_the_main_form_and_shows_every_command_whole(flag):
    done = _cli(flag)
    assert done.returncode == 0
    lines = done.stdout.splitlines()
    assert lines[0] == "Usage: loganalyze FILE... [OPTIONS]"
    assert "{paths}" not in done.stdout
    assert "Examples:" in lines and sum("  loganalyze " in ln for ln in lines) >= 3
    # a description is its docstring's first paragraph, never cut
    group = typer.main.get_command(app)
    for name, command in group.commands.items():
        first = " ".join((command.help or "").split("\n\n")[0].split())
        assert any(ln.split() == [name, *first.split()] for ln in lines), name
    assert _cli("analyze", flag).returncode == 0
    assert _cli("metrics", flag).stdout.startswith("Usage: loganalyze metrics")


@pytest.mark.parametrize(
    "argv, says",
    [
        (["--bogus", "x.log"], "No such option: --bogus"),
        (["x.log", "--format", "nope"], "'nope' is not one of"),
        (["metrics", "--workers", "-3", "x.log"], "-3 is not in the range 1<=x<=1024"),
        (["metrics", "--workers", "99999999", "x.log"], "99999999 is not in the range"),
        (["compare", "--workers", "0", "x.log"], "0 is not in the range"),
        (["run", "--ready-timeout", "-1", "--", "true"], "-1 is not a positive number"),
        (["run", "--stop-timeout", "-2", "--", "true"], "-2.0 is not in the range"),
        (["verify", "--timeout", "-5", "python -m sglang.launch_server"], "-5 is not a positive"),
        (["catalog", "show"], "Missing argument"),
    ],
)
def test_a_usage_error_is_one_line_and_exit_2(argv, says, tmp_path):
    done = _cli(*argv, cwd=tmp_path)
    assert done.returncode == 2, done
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("loganalyze: error: ")
    assert says in done.stderr and "Usage:" not in done.stderr


def test_a_session_that_matches_nothing_lists_the_sessions_there_are():
    done = _cli(str(EXPORT), "--session", "nope")
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    held = json.loads(EXPORT.read_text())["info"]["id"]
    assert f"no session nope here; it holds: {held}" in done.stderr
    assert _cli(str(EXPORT), "--session", held, "-f", "json").returncode in (0, 1)


def test_format_command_prints_only_the_root_causes_corrected_command():
    report = analyze([str(TRANSCRIPT)])
    done = _cli(str(TRANSCRIPT), "--format", "command")
    assert done.returncode == 1
    assert done.stdout == report.incidents[0].corrected_command + "\n"
    healthy = ROOT / "fixtures" / "negative"
    clean = next(p for p in sorted(healthy.glob("*.log")) if not analyze([str(p)]).incidents)
    done = _cli(str(clean), "--format", "command")
    assert (done.returncode, done.stdout) == (0, "")


def test_a_folder_scan_skips_loganalyzes_own_reports(tmp_path):
    (tmp_path / "server.log").write_bytes(LOG.read_bytes())
    first = _cli(str(tmp_path), "-f", "json")
    (tmp_path / "report.json").write_text(first.stdout)
    (tmp_path / "report.txt").write_text(_cli(str(tmp_path), "-f", "plain").stdout)
    (tmp_path / "metrics.json").write_text(_cli("metrics", str(tmp_path), "-f", "json").stdout)
    again = json.loads(_cli(str(tmp_path), "-f", "json").stdout)
    assert [i["path"] for i in again["inputs"]] == [str(tmp_path / "server.log")]
    note = again["inputs"][0]["notes"][-1]
    assert note.startswith("skipped loganalyze's own reports: ") and "report.json" in note
    assert "report.txt" in note and "metrics.json" in note
    assert again["incidents"] == json.loads(first.stdout)["incidents"]
    (tmp_path / "server.log").unlink()
    done = _cli(str(tmp_path))
    assert done.returncode == 2 and "only loganalyze's own reports" in done.stderr
    # a report named on the command line is still read: the user asked for it
    assert _cli(str(tmp_path / "report.txt"), "-f", "json").returncode in (0, 1)


# ------------------------------------------------------------------ long corrected commands


def _long_transcript(tmp_path) -> str:
    """The pasted session of fixtures/transcripts/terminal_nohup_wrong_interpreter.txt, its
    failing launch made over 1,000 characters long (deep paths, a long served name)."""
    lines = TRANSCRIPT.read_text().splitlines()
    deep = "/data/eagle3/" + "/".join(f"experiment_{n:02d}_synthetic_100k" for n in range(14))
    launch = lines[1].replace("/models/llama-target", deep + "/target")
    launch = launch.replace("/models/eagle3-draft", deep + "/drafter")
    launch = launch.replace("--device cpu", f"--device cpu --served-model-name {'k' * 120}")
    assert len(launch) > 1100
    path = tmp_path / "session.txt"
    path.write_text("\n".join([lines[0], launch, *lines[2:]]) + "\n")
    return str(path)


def _after(label: str, lines: list[str]) -> str:
    return lines[[ln.strip() for ln in lines].index(label) + 1].strip()


def test_a_corrected_command_over_1000_characters_comes_back_whole(tmp_path):
    report = analyze([_long_transcript(tmp_path)])
    corrected = report.incidents[0].corrected_command
    assert corrected and len(corrected) > 1000 and "--speculative-num-steps" in corrected

    # plain: a terminal copy keeps each printed line, soft-wrapped or not, as one line
    plain = render_plain(report).split("\n")
    assert _after("corrected command:", plain) == corrected
    assert _after("command (transcript):", plain) == report.incidents[0].command

    # rich, on an 80-column terminal: the command stands outside the panel, never wrapped
    buffer = io.StringIO()
    render_rich(report, Console(file=buffer, width=80, highlight=False, color_system=None))
    shown = buffer.getvalue().split("\n")
    assert _after("corrected command:", shown) == corrected
    assert not any("…" in ln for ln in shown if "launch_server" in ln)

    # markdown: the diff block's + lines
    markdown = render_markdown(report)
    block = re.search(r"```+diff\n(.*?)\n```", markdown, re.S)
    assert block is not None
    plus = [ln[2:] for ln in block.group(1).split("\n") if ln.startswith("+ ")]
    assert "\n".join(plus) == corrected

    # GitHub annotations: the message's last line, percent-decoded
    annotation = render_annotations(report).split("\n")[0]
    message = annotation.split("::", 2)[2]
    for code, char in (("%0A", "\n"), ("%0D", "\r"), ("%25", "%")):
        message = message.replace(code, char)
    assert message.split("\n")[-1] == f"Corrected command: {corrected}"

    # html: the copy button's text
    page = render_html(report)
    copied = re.search(r'<pre id="cmd-1" hidden>(.*?)</pre>', page, re.S)
    assert copied is not None and html.unescape(copied.group(1)) == corrected


def test_a_long_evidence_line_is_cut_and_says_how_much(tmp_path):
    log = tmp_path / "long.log"
    log.write_text("RuntimeError: " + "x" * 1000 + "\n")
    text = render_plain(analyze([str(log)]))
    assert re.search(r" … \[cut: \d+ more characters\]", text)
