"""The shareable reports (HTML, Markdown, JUnit, GitHub annotations) and `loganalyze ci`.

Snapshots (tests/__snapshots__/test_reports/, one real file per format, openable as is) pin
the rendered output for representative fixtures; the other tests check the properties a
snapshot cannot: escaping, size limits, schema validity, exit codes.
"""

from __future__ import annotations

import dataclasses
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

from analyzer.core.model import Report
from analyzer.formats.ci import CiRun, post_mortem
from analyzer.formats.format_registry import REPORT_FORMATS
from analyzer.formats.github import escape_data, escape_property, render_annotations
from analyzer.formats.html import render_html
from analyzer.formats.junit import render_junit
from analyzer.formats.markdown import code_span, render_markdown
from analyzer.pipeline import Options, analyze, charted
from tests.fixture_cases import ROOT, fixture_cases

SCHEMA = Path(__file__).parent / "data" / "junit.xsd"
CASES = {c.id: c for c in fixture_cases()}
# An argparse failure with a corrected command, a failure printed by several TP ranks, and a
# healthy log: together they reach every part of every format.
REPRESENTATIVE = [
    "real/unrecognized_num_speculative_tokens",
    "source/oom_kv_cache_tp8",
    "negative/healthy_speculative_eagle3",
]


def fixture_report(case_id: str) -> Report:
    """The fixture analysed as the fixture runner does, with a repository-relative path."""
    case = CASES[case_id]
    source = str(case.input.relative_to(ROOT))
    return analyze([source], Options(command=case.user_command))


def _extension(suffix: str) -> type[SingleFileSnapshotExtension]:
    return type(
        f"{suffix.capitalize()}Snapshot",
        (SingleFileSnapshotExtension,),
        {"_write_mode": WriteMode.TEXT, "file_extension": suffix},
    )


RENDERERS = {
    "html": render_html,
    "markdown": render_markdown,
    "junit": render_junit,
    "github": lambda r: render_annotations(r, ROOT),
}
# each snapshot file has its format's extension in formats/format_registry.py
FORMATS = {
    name: (render, _extension(str(REPORT_FORMATS[name].extension)))
    for name, render in RENDERERS.items()
}


@pytest.fixture
def at_root(monkeypatch):
    monkeypatch.chdir(ROOT)


def _incidents_with(report: Report, **changes) -> Report:
    return dataclasses.replace(
        report, incidents=[dataclasses.replace(i, **changes) for i in report.incidents]
    )


def _write_log(tmp_path: Path, name: str, lines: list[str]) -> str:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


XSS_LINE = (
    "[2026-03-02 10:01:15 TP0] Address already in use: <script>alert(1)</script>"
    "<img src=x onerror=alert(2)> [evil](javascript:alert(3)) `tick` %0A, a:b"
)


# ---- snapshots ---------------------------------------------------------------------------


SNAPSHOT_NAMES = dict(zip(REPRESENTATIVE, ("argparse", "multirank", "clean"), strict=True))


@pytest.mark.parametrize("case_id", REPRESENTATIVE, ids=SNAPSHOT_NAMES.get)
@pytest.mark.parametrize("format_name", sorted(FORMATS))
def test_report_snapshot(case_id, format_name, snapshot, at_root):
    render, extension = FORMATS[format_name]
    assert render(fixture_report(case_id)) == snapshot(extension_class=extension)


@pytest.mark.parametrize("format_name", sorted(FORMATS))
def test_same_report_same_bytes(format_name, at_root):
    render, _ = FORMATS[format_name]
    assert render(fixture_report(REPRESENTATIVE[0])) == render(fixture_report(REPRESENTATIVE[0]))


# ---- HTML --------------------------------------------------------------------------------


def test_html_escapes_log_text_and_forbids_network(tmp_path):
    report = analyze([_write_log(tmp_path, "xss.log", [XSS_LINE])])
    page = render_html(report)
    assert report.incidents, "the port-in-use rule should fire on the line"
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<script>alert" not in page and "<img src=x" not in page
    assert page.count("<script>") == 1  # only our own, admitted by hash
    assert "default-src 'none'" in page and "script-src 'sha256-" in page
    for attribute in ('src="http', 'href="http', "url(http", "@import"):
        assert attribute not in page


def test_html_marks_the_span_and_shows_the_diff(at_root):
    report = fixture_report(REPRESENTATIVE[0])
    root = report.incidents[0]
    decisive = next(ln for ln in root.evidence if ln.number == root.line)
    start, end = root.span
    page = render_html(report)
    assert f'<td class="ln">{root.line}</td>' in page
    assert f"<mark>{decisive.text[start:end]}</mark>" in page
    assert '<del class="w">--num-speculative-tokens</del>' in page
    assert '<ins class="w">--speculative-num-draft-tokens</ins>' in page
    assert f'<pre id="cmd-1" hidden>{root.corrected_command}</pre>' in page
    assert '<details class="usage">' in page  # the usage dump starts collapsed


def test_html_timeline_only_with_several_incidents(tmp_path, at_root):
    single = render_html(fixture_report(REPRESENTATIVE[0]))
    assert 'aria-label="Timeline"' not in single
    second = _write_log(tmp_path, "port.log", [XSS_LINE])
    both = analyze([CASES[REPRESENTATIVE[0]].input.relative_to(ROOT).as_posix(), second])
    page = render_html(both)
    assert 'aria-label="Timeline"' in page
    assert page.count('<a href="#incident-') == len(both.incidents)


METRICS_LOG = "fixtures/metrics/sglang-0.5.23-eagle3.log"


def test_html_charts_the_decode_metrics(snapshot, at_root):
    report = charted([METRICS_LOG])
    [run] = report.runs
    assert run.decode.lines == 12 and run.decode.accept_len.mean == pytest.approx(2.1, abs=0.01)
    page = render_html(report)
    assert page.count('aria-label="Decode metrics"') == 1
    assert page.count("<svg") == 2 and "Accept length: " + METRICS_LOG in page
    assert "median 82.30, p10 81.89, p90 82.75" in page and "ready after</th><td>42.0 s" in page
    assert page == snapshot(extension_class=FORMATS["html"][1])


def test_metrics_are_read_only_when_asked_and_leave_the_json_alone(at_root):
    from analyzer.formats.json_report import render_json

    plain, with_charts = analyze([METRICS_LOG]), charted([METRICS_LOG])
    assert plain.runs == [] and 'aria-label="Decode metrics"' not in render_html(plain)
    assert render_json(plain) == render_json(with_charts)


def test_logs_without_decode_lines_get_no_chart(at_root):
    report = charted([str(CASES[REPRESENTATIVE[0]].input.relative_to(ROOT))])
    assert report.runs == [] and "<svg" not in render_html(report)


def test_chart_section_redacts_and_escapes_the_source(tmp_path):
    secret = "hf_" + "B" * 30
    folder = tmp_path / f"{secret}<b>"
    folder.mkdir()
    log = folder / "run.log"
    log.write_bytes((ROOT / METRICS_LOG).read_bytes())
    page = render_html(charted([str(log)]))
    assert page.count("<svg") == 2
    assert secret not in page and "<b>" not in page and "&lt;b&gt;" in page


def test_cli_html_outputs_carry_the_charts(tmp_path, at_root):
    html, ci_html = tmp_path / "r.html", tmp_path / "ci.html"
    for argv in (
        [METRICS_LOG, "--html", str(html), "-f", "json"],
        ["ci", METRICS_LOG, "--html", str(ci_html), "--no-summary"],
    ):
        subprocess.run([sys.executable, "-m", "analyzer", *argv], capture_output=True, cwd=ROOT)
    assert html.read_text().count("<svg") == 2 and ci_html.read_text().count("<svg") == 2
    done = subprocess.run(
        [sys.executable, "-m", "analyzer", "-", "-f", "html"],
        input=(ROOT / METRICS_LOG).read_bytes(),
        capture_output=True,
        cwd=ROOT,
    )
    assert done.returncode == 0 and b"<svg" not in done.stdout  # stdin is read once only


def test_only_the_html_path_imports_jinja2(tmp_path):
    log = _write_log(tmp_path, "port.log", [XSS_LINE])
    probe = (
        "import sys; from analyzer import cli; sys.argv = ['loganalyze', *sys.argv[1:]]\n"
        "try:\n    cli.main()\nexcept SystemExit:\n    pass\n"
        "print('jinja2' in sys.modules, file=sys.stderr)"
    )
    for argv, imports_jinja in (
        ([log, "-f", "markdown"], False),
        ([log, "-f", "junit"], False),
        ([log, "-f", "github"], False),
        (["ci", log, "--junit", str(tmp_path / "r.xml")], False),
        ([log, "-f", "html"], True),
    ):
        done = subprocess.run(
            [sys.executable, "-c", probe, *argv], capture_output=True, text=True, cwd=ROOT
        )
        assert done.stderr.strip().splitlines()[-1] == str(imports_jinja), (argv, done.stderr)


def test_a_crash_log_never_imports_numpy_or_pandas(tmp_path):
    """numpy and pandas serve `metrics` and `compare`; a crash log's report (every format
    but HTML, whose charts need the metrics) starts without them."""
    log = _write_log(tmp_path, "port.log", [XSS_LINE])
    probe = (
        "import sys; from analyzer import cli; sys.argv = ['loganalyze', *sys.argv[1:]]\n"
        "try:\n    cli.main()\nexcept SystemExit:\n    pass\n"
        "print([m for m in ('numpy', 'pandas') if m in sys.modules], file=sys.stderr)"
    )
    for argv in ([log, "-f", "json"], [log, "-f", "plain"], ["ci", log]):
        done = subprocess.run(
            [sys.executable, "-c", probe, *argv], capture_output=True, text=True, cwd=ROOT
        )
        assert done.stderr.strip().splitlines()[-1] == "[]", (argv, done.stderr)


# ---- Markdown ----------------------------------------------------------------------------


def test_markdown_escapes_log_text(tmp_path):
    report = analyze([_write_log(tmp_path, "xss.log", [XSS_LINE])])
    report = _incidents_with(report, title="Bad [link](javascript:x) <b>bold</b> *x* | y")
    text = render_markdown(report)
    assert r"Bad \[link\](javascript:x) \<b\>bold\</b\> \*x\* \| y" in text
    outside, inside = _split_fences(text)
    for raw in ("<script", "<img", "](javascript"):
        assert re.search(r"(?<!\\)" + re.escape(raw), outside) is None, raw
    assert r"\<script\>alert(1)\</script\>" in outside  # the explanation quotes the line
    assert XSS_LINE in inside  # the evidence, verbatim in a code block


def _split_fences(text: str) -> tuple[str, str]:
    """Markdown outside and inside fenced code blocks."""
    outside, inside, fence = [], [], None
    for line in text.splitlines():
        if fence is None and line.startswith("```"):
            fence = line[: len(line) - len(line.lstrip("`"))]
        elif fence is not None and line == fence:
            fence = None
        elif fence is None:
            outside.append(line)
        else:
            inside.append(line)
    return "\n".join(outside), "\n".join(inside)


def _word(i: int) -> str:
    return "listener " + "abcdefghijklmnopqrstuvwxyz"[i] * 3


def test_code_span_holds_backticks():
    assert code_span("plain") == "`plain`"
    assert code_span("a `b` c") == "`` a `b` c ``"
    assert code_span("``x") == "``` ``x ```"


def test_markdown_stays_under_the_limit_and_keeps_the_verdict(tmp_path):
    lines = [
        # distinct words: lines that differ only in numbers are one failure (one incident)
        f"[2026-03-02 10:01:{i:02d} TP{i}] Address already in use: {_word(i)}"
        for i in range(20)
    ]
    report = analyze([_write_log(tmp_path, "many.log", lines)])
    # Inflate the evidence (a 60 KB line is what the reader keeps at most, times a few).
    big = [
        dataclasses.replace(ln, text=ln.text + " x" * 30_000) for ln in report.incidents[0].evidence
    ]
    report = _incidents_with(report, evidence=big * 3, explanation="why " * 10_000)
    full = render_markdown(report, limit=10**9)
    assert len(full.encode()) > 1_000_000
    short = render_markdown(report)
    assert len(short.encode()) <= 1_000_000
    assert short.startswith(f"## loganalyze: `{report.verdict}` (20 incidents")
    assert "shortened to keep this summary under 1 MiB" in short
    assert short.count("| **fatal** |") == len(report.incidents) == 20
    assert "more characters)" in short
    tiny = render_markdown(report, limit=3000)
    assert len(tiny.encode()) <= 3000 and tiny.startswith("## loganalyze: `port_in_use`")
    assert "cut to stay under GitHub's 1 MiB limit" in tiny


# ---- JUnit -------------------------------------------------------------------------------


def _validate(xml: str) -> None:
    etree = pytest.importorskip("lxml.etree", reason="lxml validates JUnit against the XSD")
    schema = etree.XMLSchema(etree.parse(str(SCHEMA)))
    document = etree.fromstring(xml.encode("utf-8"))
    assert schema.validate(document), schema.error_log


@pytest.mark.parametrize("case_id", REPRESENTATIVE, ids=SNAPSHOT_NAMES.get)
def test_junit_validates_against_the_schema(case_id, at_root):
    _validate(render_junit(fixture_report(case_id)))


def test_junit_one_failure_per_incident_and_a_pass_per_clean_input(tmp_path, at_root):
    etree = pytest.importorskip("lxml.etree")
    healthy = _write_log(tmp_path, "ok.log", ["[2026-03-02 10:00:00] The server is fired up"])
    failing = CASES[REPRESENTATIVE[0]].input.relative_to(ROOT).as_posix()
    report = analyze([failing, healthy], Options(command=CASES[REPRESENTATIVE[0]].user_command))
    xml = render_junit(report)
    _validate(xml)
    root = etree.fromstring(xml.encode())
    failures = root.findall(".//failure")
    assert len(failures) == len(report.incidents) == int(root.get("failures"))
    assert failures[0].get("type") == report.incidents[0].rule_class
    assert report.incidents[0].title in failures[0].get("message")
    assert report.incidents[0].corrected_command in failures[0].text
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == [f"loganalyze: {failing}", f"loganalyze: {healthy}"]
    clean = suites[1].findall("testcase")
    assert len(clean) == 1 and clean[0].find("failure") is None


def test_junit_survives_control_characters(tmp_path):
    etree = pytest.importorskip("lxml.etree")
    line = "[2026-03-02 10:01:15 TP0] Address already in use \x01\x08\x1b[31m\x7f ]]> &amp;"
    report = analyze([_write_log(tmp_path, "ctl.log", [line])])
    xml = render_junit(report)
    _validate(xml)
    text = etree.fromstring(xml.encode()).find(".//failure").text
    assert "]]> &amp;" in text


def test_junit_below_the_threshold_passes_with_details(tmp_path):
    etree = pytest.importorskip("lxml.etree")
    report = _incidents_with(
        analyze([_write_log(tmp_path, "p.log", [XSS_LINE])]), severity="warning"
    )
    root = etree.fromstring(render_junit(report, fail_on="error").encode())
    assert root.findall(".//failure") == []
    assert "port_in_use" in root.find(".//testcase/system-out").text


# ---- GitHub annotations ------------------------------------------------------------------


def test_workflow_command_escaping():
    assert escape_data("100% done\r\nnext, a:b") == "100%25 done%0D%0Anext, a:b"
    assert escape_property("a:b, 50%\nc") == "a%3Ab%2C 50%25%0Ac"


def test_annotations_escape_title_and_message(tmp_path):
    log = _write_log(tmp_path, "x.log", [XSS_LINE])
    report = _incidents_with(
        analyze([log]), title="50% of ranks: dead, again", explanation="line one\nline two, 3:4"
    )
    line = render_annotations(report, tmp_path).splitlines()[0]
    assert line.startswith(
        "::error file=x.log,line=1,title=port_in_use%3A 50%25 of ranks%3A dead%2C again::"
    )
    message = line.split("::", 2)[2]
    assert message == (
        "ranks: TP0%0Aline one%0Aline two, 3:4%0A" + escape_data(report.incidents[0].advice[0])
    )
    assert "\n" not in line and "\r" not in line


def test_annotations_locate_only_files_in_the_workspace(tmp_path, monkeypatch):
    inside = tmp_path / "ws"
    inside.mkdir()
    log = _write_log(inside, "server.log", [XSS_LINE])
    report = analyze([log])
    assert "file=server.log,line=1," in render_annotations(report, inside)
    outside = render_annotations(report, tmp_path / "elsewhere")
    assert "file=" not in outside and f"at {log}:1" in outside
    monkeypatch.chdir(inside)
    relative = analyze(["server.log"])
    assert "file=server.log,line=1," in render_annotations(relative, inside)


def test_annotations_cap_at_ten_and_summarise_the_rest(tmp_path):
    lines = [
        f"[2026-03-02 10:01:{i:02d} TP{i}] Address already in use: {_word(i)}" for i in range(14)
    ]
    report = analyze([_write_log(tmp_path, "many.log", lines)])
    assert len(report.incidents) == 14
    out = render_annotations(report, tmp_path).splitlines()
    assert len(out) == 11
    assert all(line.startswith("::error ") for line in out[:10])
    assert out[10].startswith("::notice title=loganalyze::4 more incidents not annotated")


def test_warning_severity_is_a_warning_annotation(tmp_path):
    report = _incidents_with(
        analyze([_write_log(tmp_path, "w.log", [XSS_LINE])]), severity="warning"
    )
    assert render_annotations(report, tmp_path).startswith("::warning ")


# ---- loganalyze ci -----------------------------------------------------------------------


def test_ci_writes_reports_summary_and_annotations(tmp_path, at_root):
    case = CASES[REPRESENTATIVE[0]]
    source = case.input.relative_to(ROOT).as_posix()
    report = analyze([source], Options(command=case.user_command))
    summary = tmp_path / "summary.md"
    summary.write_text("# earlier step\n", encoding="utf-8")
    reports = {name: tmp_path / f"r.{name}" for name in ("html", "markdown", "junit", "json")}
    out, err = io.StringIO(), io.StringIO()
    env = {
        "GITHUB_STEP_SUMMARY": str(summary),
        "GITHUB_ACTIONS": "true",
        "GITHUB_WORKSPACE": str(ROOT),
    }
    code = post_mortem(report, CiRun([source], reports), env, out, err)
    assert code == 1
    assert summary.read_text("utf-8") == "# earlier step\n\n" + render_markdown(report)
    assert reports["html"].read_text("utf-8") == render_html(report)
    assert json.loads(reports["json"].read_text("utf-8"))["verdict"] == report.verdict
    _validate(reports["junit"].read_text("utf-8"))
    assert f"::error file={source},line={report.incidents[0].line}," in out.getvalue()
    assert out.getvalue().startswith("loganalyze: 1 incident")


def test_ci_without_github_writes_no_annotations(at_root):
    report = fixture_report(REPRESENTATIVE[0])
    out = io.StringIO()
    code = post_mortem(report, CiRun([]), {}, out, io.StringIO())
    assert code == 1 and "::error" not in out.getvalue()


@pytest.mark.parametrize(
    ("severity", "fail_on", "code"),
    [
        ("fatal", "error", 1),
        ("error", "error", 1),
        ("warning", "error", 0),
        ("warning", "warning", 1),
        ("info", "warning", 0),
        ("error", "fatal", 0),
        ("info", "info", 1),
    ],
)
def test_ci_fail_on_threshold(severity, fail_on, code, tmp_path):
    report = _incidents_with(
        analyze([_write_log(tmp_path, "p.log", [XSS_LINE])]), severity=severity
    )
    assert post_mortem(report, CiRun([], fail_on=fail_on), {}, io.StringIO(), io.StringIO()) == code


def test_ci_no_incident_exits_zero(at_root):
    report = fixture_report(REPRESENTATIVE[2])
    assert post_mortem(report, CiRun([]), {}, io.StringIO(), io.StringIO()) == 0


def _cli(*args: str, env: dict[str, str] | None = None, cwd: Path = ROOT):
    return subprocess.run(
        [sys.executable, "-m", "analyzer", *args], capture_output=True, text=True, cwd=cwd, env=env
    )


def test_ci_command_exit_codes(tmp_path):
    case = CASES[REPRESENTATIVE[0]]
    html = tmp_path / "report.html"
    done = _cli("ci", str(case.input), "--html", str(html), "--command", case.user_command or "")
    assert done.returncode == 1, done.stderr
    assert html.read_text("utf-8").startswith("<!DOCTYPE html>")
    assert _cli("ci", str(case.input), "--fail-on", "bogus").returncode == 2
    missing = _cli("ci", str(tmp_path / "missing.log"))
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    assert _cli("ci", str(CASES[REPRESENTATIVE[2]].input)).returncode == 0


def test_analyze_writes_several_formats_at_once(tmp_path):
    case = CASES[REPRESENTATIVE[0]]
    files = {opt: tmp_path / f"r.{opt}" for opt in ("html", "markdown", "junit")}
    args = [a for opt, path in files.items() for a in (f"--{opt}", str(path))]
    done = _cli(str(case.input), "-f", "json", "-o", str(tmp_path / "r.json"), *args)
    assert done.returncode == 1, done.stderr
    assert all(path.stat().st_size > 0 for path in files.values())
    github = _cli(str(case.input), "-f", "github")
    assert github.stdout.startswith("::error ")


@pytest.mark.parametrize(
    ("verdict", "expected"),
    [
        (("pass", "0.5.23", ""), "verified with sglang 0.5.23"),
        (("fail", "0.5.23", "AssertionError"), "rejected by sglang 0.5.23: AssertionError"),
    ],
)
def test_every_format_marks_the_corrected_command_with_sglangs_verdict(verdict, expected):
    from analyzer.core.model import Verification
    from analyzer.formats.json_report import render_json
    from analyzer.formats.terminal import render_plain

    case = next(c for c in fixture_cases() if c.id == "real/unrecognized_num_speculative_tokens")
    report = analyze([str(case.input)], Options(command=case.user_command))
    report.incidents[0].verification = Verification(*verdict, seconds=4.2)
    for text in (render_plain(report), render_markdown(report), render_html(report)):
        assert expected in text
    entry = json.loads(render_json(report))["incidents"][0]["verification"]
    assert entry == {
        "status": verdict[0],
        "sglang_version": "0.5.23",
        "message": verdict[2],
        "catalog_check": None,
    }
