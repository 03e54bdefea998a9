"""Explanations say only what the finding holds: every fixture input is analyzed and each
incident's text is checked against its own facts. No "no error" when the incident quotes an
exception or a raise site; no advice about a speculative draft unless the command, the
server_args record or the evidence (frames, messages) shows speculative decoding."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from analyzer.pipeline import analyze
from benchmarks.output_snapshot import runs

INPUTS = [(key, path, options) for key, path, options in runs() if not key.endswith("]")]

NO_ERROR = re.compile(r"(?i)\b(?:with no error|shows no error|no error (?:in|at|was))\b")
EXCEPTION_LINE = re.compile(
    r"Traceback \(most recent call last\)|hit an exception|^\s*(?:[\w.]+\.)?\w*(?:Error|Exception)\b:"
)
DRAFT_ADVICE = re.compile(
    r"(?i)--speculative-draft|draft checkpoint|draft's|eagle-?3 (?:draft|model)|draft model"
)
# the record's algorithm, a command's flag, a frame in the draft's code
SHOWN_IN_INPUT = re.compile(
    r"speculative_algorithm='|--speculative-|File \"[^\"]*(?:/speculative/|eagle|_mtp\.py|_nextn\.py)"
)
SPECULATIVE = re.compile(r"(?i)speculative|eagle|draft|nextn|_mtp\b|\bmtp\b")


def _input_shows_speculative(path: Path) -> bool:
    if path.is_dir() or path.suffix in (".gz", ".zst"):
        return True  # not read here: assume shown (only loosens the check)
    text = path.read_text("utf-8", errors="replace")
    return bool(SHOWN_IN_INPUT.search(text))


@pytest.mark.parametrize("case", INPUTS, ids=lambda c: c[0])
def test_explanations_hold_to_the_findings_facts(case):
    key, path, options = case
    report = analyze([str(path)], options)
    for incident in report.incidents:
        evidence = "\n".join(line.text for line in incident.evidence)
        quoted = any(EXCEPTION_LINE.search(line.text) for line in incident.evidence)
        if NO_ERROR.search(incident.explanation):
            assert not quoted and incident.raise_site is None, (incident.rule, evidence)
        said = " ".join([incident.explanation, *incident.advice])
        if DRAFT_ADVICE.search(said):
            shown = (
                SPECULATIVE.search(incident.command or "")
                or SPECULATIVE.search(evidence)
                or SPECULATIVE.search(incident.title)
                or _input_shows_speculative(path)
            )
            assert shown, (incident.rule, DRAFT_ADVICE.search(said).group(0))
