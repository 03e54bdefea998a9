"""How the reports say a multi-node story: the nodes' lines, cause first, and each
incident's node (the renderers in analyzer/formats/ call these; no renderer of its own)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from analyzer.core.model import Incident, Report


def node_lines(report: Report) -> list[str]:
    """One line per node, the root cause's node first (empty for a single node)."""
    return [story.line for story in report.nodes]


def node_heading(report: Report) -> str:
    root = report.incidents[0] if report.incidents else None
    count = len(report.nodes)
    if root is None or root.severity not in ("fatal", "error") or root.node is None:
        return f"{count} nodes, no failure"
    return f"{count} nodes; the root cause is on {root.node}"


def incident_node(incident: Incident) -> str | None:
    """`node1`, `node0 · consequence of [1]` (1-based, as the reports number incidents)."""
    if incident.node is None:
        return None
    if incident.consequence_of is None:
        return incident.node
    return f"{incident.node} · consequence of [{incident.consequence_of + 1}]"


@dataclass(frozen=True)
class LaneMark:
    """An incident on a node's lane: where on the axis (percent), its 1-based index."""

    left: float
    index: int
    title: str
    when: str
    root: bool


@dataclass(frozen=True)
class Lane:
    name: str
    line: str
    start: float
    end: float
    marks: list[LaneMark]


def node_lanes(report: Report) -> tuple[list[Lane], str, str]:
    """The nodes as lanes on one time axis (the HTML report), and the axis's two ends."""
    times = [t for s in report.nodes for t in (s.first_time, s.last_time) if t]
    times += [t for s in report.nodes for _, t in s.marks if t]
    if not times:
        return [], "", ""
    low, high = min(times), max(times)
    span = (high - low).total_seconds() or 1.0

    def place(time: datetime | None, default: float) -> float:
        return default if time is None else round((time - low).total_seconds() / span * 100, 2)

    lanes = []
    for story in report.nodes:
        end = place(story.last_time, 100.0)
        marks = [
            LaneMark(
                place(time, end),
                index + 1,
                report.incidents[index].title,
                time.strftime("%H:%M:%S") if time else "",
                index == 0,
            )
            for index, time in story.marks
            if report.incidents[index].severity in ("fatal", "error")
        ]
        lanes.append(Lane(story.name, story.line, place(story.first_time, 0.0), end, marks))
    return lanes, f"{low:%Y-%m-%d %H:%M:%S}", f"{high:%H:%M:%S}"
