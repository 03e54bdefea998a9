"""The JUnit XML report, for GitLab's and Jenkins' test views.

One <testsuite> per input. Each incident is a <testcase> whose <failure> carries the class
(`type`) and title (`message`), with the evidence and the corrected command as its text; an
input without an incident is one passing testcase, so a healthy launch shows up as green
rather than as nothing. Incidents below `fail_on` (the CI threshold) are reported as passing
testcases with the details in <system-out>: visible, but not failing the build.

The attributes are those of the Jenkins/Ant schema (tests/data/junit.xsd). Characters XML 1.0
cannot hold are replaced, so any log text yields a well-formed file.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import regex

from analyzer.core.model import Incident, InputSummary, Report
from analyzer.formats.report_text import at_least, command_origin, edit_texts

DEFAULT_FAIL_ON = "error"
NOT_XML = regex.compile(r"[^\x09\x0a\x0d\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
MAX_BODY_LINE = 2000


def xml_text(text: str) -> str:
    """Text XML 1.0 can carry: control characters and lone surrogates become U+FFFD."""
    return NOT_XML.sub("\ufffd", text)


def render_junit(report: Report, fail_on: str = DEFAULT_FAIL_ON) -> str:
    """The report as JUnit XML (same report, same bytes)."""
    root = ET.Element("testsuites", name="loganalyze")
    totals = [0, 0]
    by_source: dict[str, list[Incident]] = {}
    for incident in report.incidents:
        by_source.setdefault(incident.source, []).append(incident)
    summaries = list(report.inputs)
    known = {s.path for s in summaries}
    summaries += [InputSummary(path) for path in by_source if path not in known]
    for summary in summaries:
        tests, failures = _suite(root, summary, by_source.get(summary.path, []), fail_on)
        totals[0] += tests
        totals[1] += failures
    root.set("tests", str(totals[0]))
    root.set("failures", str(totals[1]))
    root.set("errors", "0")
    root.set("time", "0")
    ET.indent(root)
    body = ET.tostring(root, encoding="unicode")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + body + "\n"


def _suite(
    root: ET.Element, summary: InputSummary, incidents: list[Incident], fail_on: str
) -> tuple[int, int]:
    suite = ET.SubElement(root, "testsuite", name=xml_text(f"loganalyze: {summary.path}"))
    failures = 0
    if not incidents:
        _case(suite, summary.path, "no incident", None, fail_on)
    for index, incident in enumerate(incidents, start=1):
        name = f"{index}. {incident.rule_class}: {incident.title}"
        failures += _case(suite, summary.path, name, incident, fail_on)
    tests = max(len(incidents), 1)
    suite.set("tests", str(tests))
    suite.set("failures", str(failures))
    suite.set("errors", "0")
    suite.set("skipped", "0")
    suite.set("time", "0")
    if summary.notes:
        ET.SubElement(suite, "system-out").text = xml_text("\n".join(summary.notes))
    return tests, failures


def _case(
    suite: ET.Element, source: str, name: str, incident: Incident | None, fail_on: str
) -> int:
    """Add one testcase; returns 1 when it is a failure."""
    case = ET.SubElement(
        suite, "testcase", name=xml_text(name), classname=xml_text(_classname(source)), time="0"
    )
    if incident is None:
        return 0
    details = xml_text(_details(incident))
    if not at_least(incident.severity, fail_on):
        ET.SubElement(case, "system-out").text = details
        return 0
    failure = ET.SubElement(
        case,
        "failure",
        type=xml_text(incident.rule_class),
        message=xml_text(f"{incident.severity}: {incident.title}"),
    )
    failure.text = details
    return 1


def _classname(source: str) -> str:
    """GitLab groups by classname: the input, as a dotted name without its folders."""
    name = source.replace("\\", "/").rsplit("/", 1)[-1] or source
    return f"loganalyze.{name}"


def _details(incident: Incident) -> str:
    out = [
        f"{incident.severity.upper()} {incident.rule_class} (rule {incident.rule})",
        f"at {incident.source}:{incident.line}",
    ]
    if incident.ranks:
        out.append(f"ranks: {', '.join(incident.ranks)}")
    if incident.attempt is not None:
        out.append(f"attempt: {incident.attempt}")
    if incident.offending_flags:
        out.append(f"flags: {' '.join(incident.offending_flags)}")
    if incident.explanation:
        out += ["", incident.explanation]
    if incident.advice:
        out += ["", *(f"- {a}" for a in incident.advice)]
    if incident.command:
        out += ["", f"command ({command_origin(incident)}):", f"  {incident.command}"]
    if incident.corrected_command:
        out += ["corrected command:", f"  {incident.corrected_command}"]
        out.append(f"edits: {'; '.join(edit_texts(incident))}")
    if incident.evidence:
        out += ["", "evidence:"]
        width = max(len(str(ln.number)) for ln in incident.evidence)
        for line in incident.evidence:
            text = line.text[:MAX_BODY_LINE]
            out.append(f"  {line.number:>{width}} | {text}")
    return "\n".join(out)
