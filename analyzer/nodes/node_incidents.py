"""The incidents only several nodes together show: the kernel's and the driver's lines
beside the logs, a setting the nodes disagree on, a node that stopped printing."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from analyzer.core.model import Edit, Incident, Line
from analyzer.core.toml_data import shipped_toml
from analyzer.nodes.node_logs import COMMAND_FLAG, FLAG_SETTING, KernelEvent, NodeLog, RunLogs
from analyzer.nodes.skew import Skew, on_reference

SETTING_FLAGS = {
    "nnodes": "--nnodes",
    "dist_init_addr": "--dist-init-addr",
    "tp_size": "--tp-size",
    "model_path": "--model-path",
    "release": "release",
}
NODE_IN_NAME = re.compile(r"node[-_]?(?P<rank>\d+)", re.I)


@dataclass
class Timed:
    """An incident on the reference clock: `time` its line's, `started` when it began
    (a watchdog timeout's collective, earlier than its message)."""

    incident: Incident
    time: datetime | None
    started: datetime | None


def _node_of(event: KernelEvent, nodes: list[NodeLog]) -> NodeLog | None:
    """The node a kernel line is about: its own log's, the one that logged the pid, the
    journal's host, a node named in the file's name."""
    for node in nodes:
        if node.key == event.stream and node.sglang_lines:
            return node
    if event.pid:
        for node in nodes:
            if event.pid in node.pids:
                return node
    stem = Path(event.source).stem.lower()
    for node in nodes:
        names = {node.name, node.pod, node.host, Path(node.source).stem}
        names = {n.lower() for n in names if n}
        if (event.host and event.host.lower() in names) or any(n in stem for n in names):
            return node
    found = NODE_IN_NAME.search(stem)
    if found:
        return next((n for n in nodes if n.node_rank == int(found["rank"])), None)
    return None


def kernel_incidents(
    run: RunLogs,
    nodes: list[NodeLog],
    skews: dict[str, Skew],
    died: set[str | None],
    failed: bool,
) -> list[Timed]:
    """One incident per OOM kill and per Xid the driver logged (the first of each code).
    A kernel line nothing ties to a node goes to the one node whose process died without
    an error of its own (`died`), if there is just one. In a run whose logs show no failure
    (`failed`), only a kill of a pid a node's log named is fatal: another process's end is
    a warning."""
    dead = [n for n in nodes if n.name in died]
    table = shipped_toml("analyzer.nodes", "xid.toml")
    out: list[Timed] = []
    seen: set[tuple] = set()
    for event in run.kernel:
        node = _node_of(event, nodes) or (dead[0] if len(dead) == 1 else None)
        key = (event.kind, event.code, event.pid, node.key if node else event.host)
        if key in seen:
            continue
        seen.add(key)
        incident = _oom_kill(event) if event.kind == "oom_kill" else _xid(event, table)
        incident.node = node.name if node else (event.host or Path(event.source).stem)
        ours = node is not None and event.pid is not None and event.pid in node.pids
        if not failed and not ours:
            incident.severity = "warning"
        time = on_reference(event.time, skews.get(node.key)) if node else event.time
        if time is None and node is not None:
            # dmesg counts seconds since boot: the node's death is the nearest clock
            time = on_reference(node.last, skews.get(node.key))
        out.append(Timed(incident, time, time))
    return out


def _kernel_line(event: KernelEvent) -> Line:
    return Line(event.source, event.line, event.text, event.text)


def _oom_kill(event: KernelEvent) -> Incident:
    process = f"{event.process} (pid {event.pid})" if event.process else f"pid {event.pid}"
    return Incident(
        rule_class="host_oom",
        rule="kernel-oom-kill",
        title=f"The kernel's OOM killer killed {process}: the host ran out of memory",
        severity="fatal",
        source=event.source,
        line=event.line,
        ranks=[],
        evidence=[_kernel_line(event)],
        span=None,
        offending_flags=[],
        explanation=(
            "The Linux OOM killer (mm/oom_kill.c) ended the process to free host memory; the "
            "process got SIGKILL and printed nothing, so its peers only saw it vanish."
        ),
        advice=[
            "Give the node's container or cgroup more host memory, or lower the host memory the "
            "server takes (fewer tokenizer workers, a smaller --max-running-requests, no "
            "--enable-hierarchical-cache host pool of that size).",
        ],
        fix_outside_command=True,
    )


def _xid(event: KernelEvent, table: dict) -> Incident:
    known = table.get(str(event.code), {})
    meaning = known.get("meaning", "an Xid code this table does not describe")
    fatal = bool(known.get("fatal", True))
    return Incident(
        rule_class="gpu_fault",
        rule="nvidia-xid",
        title=f"Xid {event.code}: {meaning}",
        severity="fatal" if fatal else "warning",
        source=event.source,
        line=event.line,
        ranks=[],
        evidence=[_kernel_line(event)],
        span=None,
        offending_flags=[],
        explanation=(
            f"The NVIDIA driver reported Xid {event.code} ({meaning}); meanings from NVIDIA's "
            "Xid catalog (https://docs.nvidia.com/deploy/xid-errors/)."
        ),
        advice=[
            "Check the GPU (`nvidia-smi -q`, DCGM diagnostics); reset it or drain the node as "
            "NVIDIA's Xid catalog says for this code, then restart every node of the run.",
        ],
        fix_outside_command=True,
    )


def agreement_incidents(nodes: list[NodeLog], reference: NodeLog) -> list[Timed]:
    """A setting every node must share that one node has otherwise: the root cause, naming
    the flag and the node; two nodes with the same --node-rank likewise."""
    out = []
    joined = all(any(e.endswith("ends") for e in n.sync) for n in nodes)
    for setting, flag in SETTING_FLAGS.items():
        if setting == "dist_init_addr" and joined:
            continue  # every node got through distributed init: they found one another
        values = {n.name: n.settings[setting] for n in nodes if setting in n.settings}
        if len(set(values.values())) < 2:
            continue
        counts = {v: list(values.values()).count(v) for v in values.values()}
        top = max(counts.values())
        majority = [v for v, c in counts.items() if c == top]
        expected = values.get(reference.name) if len(majority) > 1 else majority[0]
        if expected is None:
            expected = majority[0]
        for node in nodes:
            value = values.get(node.name)
            if value is not None and value != expected:
                out.append(Timed(_mismatch(node, flag, value, expected, reference), None, None))
    ranks: dict[int, NodeLog] = {}
    for node in nodes:
        if node.node_rank is None:
            continue
        if node.node_rank in ranks:
            out.append(Timed(_same_rank(node, ranks[node.node_rank]), None, None))
        ranks[node.node_rank] = node
    return out


def _settings_lines(node: NodeLog) -> list[Line]:
    """The node's launch command if its log shows one, else the record it was read from."""
    if node.command_line:
        return [Line(node.source, node.command_line, node.command_text, node.command_text)]
    if node.settings_line:
        return [Line(node.source, node.settings_line, node.settings_text, node.settings_text)]
    return []


def _corrected(node: NodeLog, flag: str, value: str) -> tuple[str | None, list[Edit]]:
    """The node's own command with the one value changed (every other flag kept)."""
    if not node.command_text:
        return None, []
    spellings = [
        name
        for name, setting in FLAG_SETTING.items()
        if f"--{name}" == flag or (SETTING_FLAGS.get(setting) == flag)
    ]
    for found in COMMAND_FLAG.finditer(node.command_text):
        if found["flag"] in spellings:
            start, end = found.span("value")
            text = node.command_text
            return text[:start] + shlex.quote(value) + text[end:], [Edit("set", flag, value=value)]
    return None, []


def _mismatch(node: NodeLog, flag: str, value: str, expected: str, reference: NodeLog) -> Incident:
    what = "SGLang release" if flag == "release" else flag
    flags = [] if flag == "release" else [flag]
    corrected, edits = _corrected(node, flag, expected) if flags else (None, [])
    return Incident(
        rule_class="node_mismatch",
        rule="multinode-flag-mismatch",
        title=f"{node.name} runs with {what} {value}; the other nodes with {expected}",
        severity="fatal",
        source=node.source,
        line=node.command_line or node.settings_line,
        ranks=[],
        evidence=_settings_lines(node),
        span=None,
        offending_flags=flags,
        explanation=(
            f"Every node of one run must be launched with the same {what}: {node.name} has "
            f"{value}, {reference.name} and the rest {expected}. The nodes then wait for each "
            "other at distributed init, or join with different shapes, and time out."
        ),
        advice=[f"Launch {node.name} with {what} {expected}, as every other node."],
        command=node.command_text or None,
        command_source="log" if node.command_text else None,
        corrected_command=corrected,
        edits=edits,
        node=node.name,
        fix_outside_command=flag == "release",
    )


def _same_rank(node: NodeLog, other: NodeLog) -> Incident:
    return Incident(
        rule_class="node_mismatch",
        rule="multinode-flag-mismatch",
        title=f"{node.name} and {other.source} both run with --node-rank {node.node_rank}",
        severity="fatal",
        source=node.source,
        line=node.command_line or node.settings_line,
        ranks=[],
        evidence=_settings_lines(node),
        span=None,
        offending_flags=["--node-rank"],
        explanation="Each node needs its own --node-rank (0 to --nnodes - 1).",
        advice=["Give every node a distinct --node-rank."],
        node=node.name,
    )


def quiet_node_incident(
    nodes: list[NodeLog], skews: dict[str, Skew], first_symptom: tuple, symptoms: list[Timed]
) -> Timed | None:
    """A node with no error that stopped printing before the others' timeouts began: the
    cause never reported, the silence is the evidence."""
    loud = {t.incident.node for t in symptoms}
    began = first_symptom[1] if not first_symptom[0] else None
    quiet = []
    for node in nodes:
        skew = skews.get(node.key)
        last = on_reference(node.last, skew)
        if node.name in loud or last is None or began is None or skew is None:
            continue
        # clearly before: by more than the bound of the node's clock
        if skew.bound is None or (began - last).total_seconds() <= skew.bound:
            continue
        quiet.append((last, node))
    if not quiet:
        return None
    last, node = min(quiet, key=lambda pair: pair[0])
    line = Line(node.source, node.last_line, node.last_text, node.last_text)
    incident = Incident(
        rule_class="silent_death",
        rule="node-stopped-printing",
        title=f"{node.name} stopped printing at {last:%H:%M:%S} with no error, before the "
        "other nodes' collectives timed out",
        severity="fatal",
        source=node.source,
        line=node.last_line,
        ranks=[],
        evidence=[line],
        span=None,
        offending_flags=[],
        explanation=(
            "The other nodes waited on a collective this node never joined; its log ends "
            "without an error, so it hung or was killed (SIGKILL, the host's OOM killer, a "
            "lost host): check its kernel log (`dmesg -T`, `journalctl -k`) and exit status."
        ),
        advice=["Read this node's dmesg/journal and container status for the time it stopped."],
        node=node.name,
    )
    return Timed(incident, last, last)
