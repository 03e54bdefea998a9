"""The multi-node stage's entry: a cheap first look at the report decides whether its inputs
may be several nodes of one run. Only then is the join (story.py and the modules it reads
the nodes with) imported: a single log never pays for it."""

from __future__ import annotations

import re
from collections.abc import Iterable

from analyzer.core.model import Report
from analyzer.core.read import TextInput

KUBECTL_POD = re.compile(r"\[pod/([^\s\]/]+)/")


def join_nodes(report: Report, inputs: Iterable[TextInput]) -> Report:
    """The report joined across nodes (nodes/story.py), or unchanged when it cannot be several
    nodes: one log input whose lines carry at most one kubectl pod."""
    if not may_be_multinode(report):
        return report
    from analyzer.nodes.story import join_run

    return join_run(report, inputs)


def may_be_multinode(report: Report) -> bool:
    """Several log inputs, or one whose lines carry more than one kubectl pod."""
    if sum(not s.kind.startswith("transcript") for s in report.inputs) >= 2:
        return True
    lines = [ln for i in report.incidents for ln in i.evidence] + report.last_lines
    return len({m[1] for ln in lines if (m := KUBECTL_POD.search(ln.text))}) >= 2
