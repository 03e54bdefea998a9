"""Several nodes, one story: the stage that joins each node's incidents into one report.

Who is who (node_logs.py), one clock (skew.py), then cause and consequences: the root cause
is the earliest failure that is not itself a consequence (a flag the nodes disagree on comes
before any of them); the consequences (NCCL/gloo timeouts and aborts, a sigquit cascade, a
store or socket timed out, a node that stopped printing) point at it with `consequence_of`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from analyzer.core.model import Incident, Report, severity_rank
from analyzer.core.read import TextInput
from analyzer.incidents.collate import verdict
from analyzer.incidents.one_cause import number_consequences
from analyzer.nodes.node_incidents import (
    Timed,
    agreement_incidents,
    kernel_incidents,
    quiet_node_incident,
)
from analyzer.nodes.node_logs import NodeLog, RunLogs, node_name, read_run
from analyzer.nodes.skew import Skew, estimate, on_reference

# what a peer's failure looks like on the nodes that did not fail (the rules of rules/)
PEER_SYMPTOMS = {
    "nccl-watchdog",
    "nccl-distributed",
    "nccl-transport",
    "store-connection-lost",
    "watchdog-timeout",
    "startup-stall",
    "health-check-failed",
}
QUIET_SYMPTOMS = {"startup-stall"}
# a process that died with no error of its own: explained by a failure beside it, if any
LOCAL_DEATHS = {"child-died", "silent-death"}
FIRST_LOOK = 2000  # lines of each input: the server_args record and the first ranks
SCHEDULER_WATCHDOG = re.compile(r"watchdog_timeout=(\d+(?:\.\d+)?)")
WATCHDOG_RAN = re.compile(r"ran for (\d+) milliseconds|Timeout\(ms\)=(\d+)")
SHORT = {
    "nccl-watchdog": "NCCL watchdog timeout",
    "nccl-distributed": "distributed error",
    "nccl-transport": "NCCL transport error",
    "store-connection-lost": "TCPStore connection lost",
    "watchdog-timeout": "scheduler watchdog timeout",
    "startup-stall": "startup stall",
    "child-died": "sigquit from a dead child",
    "silent-death": "silent death",
    "kernel-oom-kill": "kernel OOM kill",
    "node-stopped-printing": "stop",
    "health-check-failed": "health check failure",
    "oom": "CUDA out of memory",
}


@dataclass
class NodeStory:
    """One node of the run, as the report lists it."""

    name: str
    source: str
    pod: str | None
    host: str | None
    node_rank: int | None
    ranks: list[str]
    skew: Skew | None
    last_time: datetime | None
    line: str = ""  # what this node shows and why, in one sentence
    incidents: list[int] = field(default_factory=list)
    first_time: datetime | None = None
    # (incident index, its time on the reference clock) for the HTML lanes
    marks: list[tuple[int, datetime | None]] = field(default_factory=list)

    def as_json(self) -> dict:
        return {
            "node": self.name,
            "source": self.source,
            "pod": self.pod,
            "host": self.host,
            "node_rank": self.node_rank,
            "ranks": list(self.ranks),
            "skew_seconds": self.skew.offset if self.skew else None,
            "skew_bound_seconds": self.skew.bound if self.skew else None,
            "last_time": _clock(self.last_time, full=True),
            "summary": self.line,
            "incidents": list(self.incidents),
        }


def join_run(report: Report, inputs: Iterable[TextInput]) -> Report:
    """The report with each incident's node, its cause, the nodes' lines; unchanged when the
    inputs are not several nodes of one run (nodes/several_nodes.py looked first). An input that changed or vanished since the
    pipeline read it leaves the report as it was, with a note."""
    incidents = list(report.incidents)
    try:
        return _join(report, inputs)
    except (OSError, UnicodeError, ValueError) as exc:
        for incident in incidents:
            incident.node = incident.consequence_of = None
        report.incidents, report.nodes = incidents, []
        report.warnings.append(f"the nodes were not joined: {exc}")
        return report


def _join(report: Report, inputs: Iterable[TextInput]) -> Report:
    paths = {s.path for s in report.inputs if not s.kind.startswith("transcript")}
    wanted: dict[str, set[int]] = {}
    for incident in report.incidents:
        wanted.setdefault(incident.source, set()).add(incident.line)
    files = [t for t in inputs if t.path in paths and t.file is not None and not t.is_binary()]
    if not _first_look(files):
        return report
    run = read_run(files, wanted)
    nodes = [n for n in run.nodes if n.sglang_lines or not _only_kernel(n, run)]
    if not _is_multinode(nodes, run):
        return report
    _name_nodes(nodes)
    reference = min(nodes, key=lambda n: (n.node_rank is None, n.node_rank or 0, n.key))
    skews = estimate(nodes, reference)
    # a kernel line the join reads as its own incident (kernel-oom-kill, nvidia-xid) is not
    # also the failure signal the pipeline saw on it
    kernel_lines = {(k.source, k.line) for k in run.kernel}
    own = [i for i in report.incidents if (i.source, i.line) not in kernel_lines]
    timed = _timed_incidents(own, run, nodes, skews)
    died = {t.incident.node for t in timed if t.incident.rule in LOCAL_DEATHS}
    failed = any(_is_failure(t.incident) for t in timed)
    timed += kernel_incidents(run, nodes, skews, died, failed)
    mismatches = agreement_incidents(nodes, reference)
    if not any(_is_failure(t.incident) for t in timed):
        # nodes that came up together despite a difference (a host name and its address,
        # one model in two paths): worth a warning, no cause of anything
        for mismatch in mismatches:
            mismatch.incident.severity = "warning"
        timed, mismatches = [*timed, *mismatches], []
    ordered = _order(timed, mismatches, nodes, skews)
    report.incidents = [t.incident for t in ordered]
    number_consequences(report.incidents)  # a cause found within one node keeps its consequence
    report.verdict = verdict(report.incidents)
    report.nodes = _stories(ordered, nodes, skews)
    return report


def _first_look(files: list[TextInput]) -> bool:
    """The inputs' first lines: are they nodes of one run, or is one of them no SGLang log
    (a kernel log, whose lines may come later)? Several single-node logs are read no further."""
    sample = read_run(files, {}, limit=FIRST_LOOK)
    if any(not n.sglang_lines for n in sample.nodes):
        return True
    return _is_multinode(sample.nodes, sample)


def _only_kernel(node: NodeLog, run: RunLogs) -> bool:
    return any(k.stream == node.key for k in run.kernel) or not node.lines


def _is_multinode(nodes: list[NodeLog], run: RunLogs) -> bool:
    """Nodes of one run: the record says so (nnodes, a node rank), pods of one stream, kernel
    lines beside the logs, or rank sets that split one world (node0 TP0-7, node1 TP8-15)."""
    if len(nodes) < 2:
        return len(nodes) == 1 and bool(run.kernel)
    told = any(int(n.settings.get("nnodes", "1")) > 1 for n in nodes if _digits(n))
    ranked = any((n.node_rank or 0) > 0 for n in nodes)
    sets = [n.ranks for n in nodes if n.ranks]
    split = len(sets) == len(nodes) and all(
        not (a & b) for i, a in enumerate(sets) for b in sets[i + 1 :]
    )
    return told or ranked or split or any(n.pod for n in nodes) or bool(run.kernel)


def _digits(node: NodeLog) -> bool:
    return node.settings.get("nnodes", "1").isdigit()


def _name_nodes(nodes: list[NodeLog]) -> None:
    names = [node_name(n) for n in nodes]
    for node, name in zip(nodes, names, strict=True):
        # two streams that would share a name (two files of node0) keep their own
        node.name = name if names.count(name) == 1 else f"{name} ({node.source})"


def _timed_incidents(
    incidents: list[Incident], run: RunLogs, nodes: list[NodeLog], skews: dict[str, Skew]
) -> list[Timed]:
    by_key = {n.key: n for n in nodes}
    out = []
    for incident in incidents:
        key, time = run.at.get((incident.source, incident.line), (incident.source, None))
        node = by_key.get(key)
        incident.node = node.name if node else None
        reference_time = on_reference(time, skews.get(key))
        out.append(Timed(incident, reference_time, _started(incident, reference_time)))
    return out


def _started(incident: Incident, time: datetime | None) -> datetime | None:
    """When the failure began: a watchdog timeout names its timeout, the collective started
    that long before the message."""
    if time is None or incident.rule not in ("nccl-watchdog", "watchdog-timeout"):
        return time
    text = " ".join(ln.text for ln in incident.evidence)
    if incident.rule == "watchdog-timeout":  # scheduler.py: `(self.watchdog_timeout=300, ...)`
        found = SCHEDULER_WATCHDOG.search(text)
        return time - timedelta(seconds=float(found[1])) if found else time
    found = WATCHDOG_RAN.search(text)
    if not found:
        return time
    return time - timedelta(milliseconds=int(found[1] or found[2]))


def is_symptom(incident: Incident) -> bool:
    """A failure another node's failure explains (a peer's timeout, not its own CUDA error)."""
    if incident.rule not in PEER_SYMPTOMS:
        return False
    return not any("CUDA error" in ln.body for ln in incident.evidence)


def _is_failure(incident: Incident) -> bool:
    return severity_rank(incident.severity) < severity_rank("warning")


def _order(
    timed: list[Timed], mismatches: list[Timed], nodes: list[NodeLog], skews: dict[str, Skew]
) -> list[Timed]:
    """Root cause first, then its consequences and other failures by time, then the rest."""
    failures = [t for t in timed if _is_failure(t.incident)]
    rest = [t for t in timed if not _is_failure(t.incident)]
    causes = [
        t for t in failures if t.incident.rule not in LOCAL_DEATHS and not is_symptom(t.incident)
    ]
    deaths = [t for t in failures if t.incident.rule in LOCAL_DEATHS]
    symptoms = [t for t in failures if is_symptom(t.incident)]
    root: Timed | None = None
    if mismatches:
        root = mismatches[0]
    elif causes:
        root = min(causes, key=_when)
    elif deaths:
        root = min(deaths, key=_when)
    elif symptoms:
        # a node that went quiet before the others' collectives began: the silence is the
        # evidence (a startup stall is itself a silence, it starts nothing)
        timed_out = [t for t in symptoms if t.incident.rule not in QUIET_SYMPTOMS]
        quiet = None
        if timed_out:
            quiet = quiet_node_incident(nodes, skews, min(_when(t) for t in timed_out), symptoms)
        root = quiet or min(symptoms, key=_when)
    if root is None:
        return timed
    others = [t for t in [*mismatches, *failures] if t is not root]
    others.sort(key=lambda t: (t.started is None, t.started or datetime.min))
    ordered = [root, *others, *rest]
    for t in others:
        if _follows(t, root):
            t.incident.consequence_of = 0
    return ordered


def _when(timed: Timed) -> tuple[bool, datetime]:
    return (timed.started is None, timed.started or datetime.min)


def _follows(timed: Timed, root: Timed) -> bool:
    """A symptom or a death with no cause of its own follows the root; so does any failure
    on the root's node after it (a sigquit cascade, the parent's exit)."""
    incident = timed.incident
    if incident.rule in LOCAL_DEATHS or is_symptom(incident):
        return True
    return incident.node == root.incident.node and _when(timed) >= _when(root)


def _stories(ordered: list[Timed], nodes: list[NodeLog], skews: dict[str, Skew]) -> list[NodeStory]:
    root = ordered[0] if ordered and _is_failure(ordered[0].incident) else None
    stories = []
    root_node = root.incident.node if root else None
    ranked = sorted(nodes, key=lambda n: (n.node_rank is None, n.node_rank or 0, n.name))
    for node in sorted(ranked, key=lambda n: n.name != root_node):
        story = NodeStory(
            node.name,
            node.source,
            node.pod,
            node.host,
            node.node_rank,
            _compact(node.ranks),
            skews.get(node.key),
            on_reference(node.last, skews.get(node.key)),
        )
        story.incidents = [i for i, t in enumerate(ordered) if t.incident.node == node.name]
        story.first_time = on_reference(node.first, skews.get(node.key))
        story.marks = [(i, ordered[i].time) for i in story.incidents]
        story.line = _node_line(story, ordered, root) + _clock_note(story.skew)
        stories.append(story)
    return stories


def _node_line(story: NodeStory, ordered: list[Timed], root: Timed | None) -> str:
    name = story.name
    mine = [ordered[i] for i in story.incidents if _is_failure(ordered[i].incident)]
    if root is None:
        return f"{name}: no error; its log ends at {_clock(story.last_time)}"
    cause = f"{root.incident.node or 'the run'}'s {_short(root.incident)}"
    if root.time is not None:
        cause += f" at {_clock(root.time)}"
    if mine and mine[0] is root:
        return f"{name}: {_short(root.incident)}{_at(root.time)}: the root cause"
    if not mine:
        ended = _clock(story.last_time)
        if root.time is None or story.last_time is None:
            return f"{name}: no error in its lines"
        if story.last_time < root.time:
            return f"{name}: no error; stopped printing at {ended}, before {cause}"
        if story.last_time == root.time:
            return f"{name}: no error; its log ends at {ended}, with {cause}"
        return f"{name}: no error; its log ends at {ended}, after {cause}"
    first = mine[0]
    line = f"{name}: {_short(first.incident)}{_at(first.time)}"
    if first.time is not None and root.time is not None:
        seconds = (first.time - root.time).total_seconds()
        side = "after" if seconds >= 0 else "before"
        line += f", {abs(seconds):.0f} s {side} {cause}"
    else:
        line += f", after {cause}"
    if first.started is not None and first.started != first.time:
        waited = (first.time - first.started).total_seconds()
        what = "collective" if first.incident.rule == "nccl-watchdog" else "wait"
        line += f" (its {what} started at {_clock(first.started)}, {waited:.0f} s before)"
    return line


def _clock_note(skew: Skew | None) -> str:
    """The node's clock against the reference node's, where the shared lines moved it."""
    if skew is None or skew.bound is None or abs(skew.offset) < 0.5:
        return ""
    side = "behind" if skew.offset > 0 else "ahead"
    return f" [its clock {abs(skew.offset):.0f} s {side}, ±{skew.bound:.0f} s]"


def _short(incident: Incident) -> str:
    if incident.rule == "nvidia-xid":
        return incident.title.split(":")[0]
    if incident.rule == "multinode-flag-mismatch":
        return f"{' '.join(incident.offending_flags) or 'release'} mismatch"
    return SHORT.get(incident.rule, incident.rule_class.replace("_", " "))


def _at(time: datetime | None) -> str:
    return f" at {_clock(time)}" if time else ""


def _clock(time: datetime | None, full: bool = False) -> str | None:
    if time is None:
        return None if full else "an unknown time"
    return time.isoformat(sep=" ") if full else time.strftime("%H:%M:%S")


def _compact(ranks: set[str]) -> list[str]:
    """`TP8`...`TP15` as one `TP8-15`."""
    by_kind: dict[str, list[int]] = {}
    for rank in ranks:
        found = re.fullmatch(r"([A-Za-z_]+)(\d+)", rank)
        if found:
            by_kind.setdefault(found[1], []).append(int(found[2]))
    out = []
    for kind in sorted(by_kind):
        numbers = sorted(by_kind[kind])
        first = previous = numbers[0]
        for number in [*numbers[1:], None]:
            if number is not None and number == previous + 1:
                previous = number
                continue
            out.append(f"{kind}{first}" if first == previous else f"{kind}{first}-{previous}")
            if number is not None:
                first = previous = number
    return out
