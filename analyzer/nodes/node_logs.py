"""Reading a multi-node run: which node wrote each line, when, with which settings.

One pass over each input file. A file is one node's log, unless `kubectl logs --prefix`
put several pods in it (`[pod/NAME/CONTAINER] line`: one stream per pod). Kernel lines
(`dmesg`, `journalctl -k`) are kept as events wherever they appear: the OOM killer with the
pid it killed (mm/oom_kill.c: `Out of memory: Killed process PID (NAME)`, `Memory cgroup
out of memory: ...`) and the NVIDIA driver's `NVRM: Xid (PCI:...): CODE, ...`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from analyzer.core.read import TextInput
from analyzer.engine.normalize import SAMPLE_LINES, LinePrefixes, detect_prefixes
from analyzer.sglang.log_format import RANK, SGLANG_PREFIX, parse_server_args, stated_version

KUBECTL = re.compile(r"^\[pod/(?P<pod>[^\s\]/]+)/[^\s\]]+\] ")
ISO_TIME = re.compile(r"^(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)? ")
# journald's short format: `Dec 05 10:05:20 HOST IDENT[PID]: `
JOURNAL = re.compile(
    r"^(?P<mon>[A-Z][a-z]{2}) +(?P<day>\d{1,2}) (?P<hms>\d\d:\d\d:\d\d) (?P<host>\S+) "
    r"[^\s:\[]+(?:\[\d+\])?: "
)
# `dmesg -T`: `[Sat Dec  5 10:05:20 2026] `; plain dmesg: seconds since boot, no clock
DMESG_T = re.compile(
    r"^\[(?:[A-Z][a-z]{2} )?(?P<mon>[A-Z][a-z]{2}) +(?P<day>\d{1,2}) (?P<hms>\d\d:\d\d:\d\d)"
    r" (?P<year>\d{4})\] ?"
)
DMESG = re.compile(r"^\[ *\d+\.\d+\] ?")
# torch's glog-style prefix (c10/util/Logging): `[rank4]:[E304 12:54:52.122900428 File.cpp:616]`
TORCH_RANK = re.compile(r"^\[rank(?P<rank>\d+)\]: ?")
TORCH_TIME = re.compile(r"^\[[EWIF](?P<mon>\d\d)(?P<day>\d\d) (?P<hms>\d\d:\d\d:\d\d)(?:\.\d+)? ")
OOM_KILL = re.compile(
    r"(?:Out of memory|Memory cgroup out of memory): Kill(?:ed)? process (?P<pid>\d+) "
    r"\((?P<name>[^)]*)\)"
)
XID = re.compile(
    r"NVRM: Xid \((?P<pci>[^)]*)\): (?P<code>\d+)(?:, pid=(?P<pid>'?[^,\s']+'?))?"
    r"(?:, name=(?P<name>[^,]+))?"
)
# lines SGLang and its launchers write with a process id in them (engine.py's
# `Scheduler or DataParallelController PID terminated with N`, utils `Process PID gpu_id`)
PIDS = re.compile(r"(?:\bpid[=: ]'?|\bPID |\bProcess |Controller |\(pid=)(?P<pid>\d{2,})\b")
# what every node logs at the same stage of startup (model_runner.py, cuda_graph_setup.py):
# the distributed init is a barrier, the others follow it closely
SYNC = re.compile(
    r"(?P<event>Init (?:torch distributed|parallel) (?:begin|ends)|Load weight (?:begin|end)"
    r"|Capture [\w ]*?(?:cuda|CUDA) graph (?:begin|end))",
)
LAUNCH = re.compile(r"sglang\.launch_server|sglang serve\b")
COMMAND_FLAG = re.compile(
    r"(?<!\S)--(?P<flag>nnodes|node-rank|dist-init-addr|tp-size|tp|model-path|model)"
    r"(?:=|\s+)(?P<value>[^\s'\"]+)"
)
MONTHS = {m: i for i, m in enumerate("Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split(), 1)}
# the settings every node must share, as server_args names them
SHARED = ("nnodes", "dist_init_addr", "tp_size", "model_path")
FLAG_SETTING = {
    "nnodes": "nnodes",
    "node-rank": "node_rank",
    "dist-init-addr": "dist_init_addr",
    "tp-size": "tp_size",
    "tp": "tp_size",
    "model-path": "model_path",
    "model": "model_path",
}


@dataclass
class KernelEvent:
    """An OOM-killer or Xid line: `kind` is "oom_kill" or "xid"."""

    kind: str
    source: str
    line: int
    text: str
    time: datetime | None
    pid: str | None
    process: str | None
    host: str | None
    code: int | None = None
    stream: str | None = None  # the pod or file whose text carried it


@dataclass
class NodeLog:
    """One node's (or pod's) stream of lines."""

    key: str  # the file, or `file#pod` for one pod of a combined stream
    source: str
    pod: str | None = None
    host: str | None = None
    lines: int = 0
    sglang_lines: int = 0
    settings: dict[str, str] = field(default_factory=dict)
    settings_line: int = 0
    settings_text: str = ""  # the server_args record or launch command they came from
    command_line: int = 0
    command_text: str = ""  # the launch command the log shows, from its entry point on
    ranks: set[str] = field(default_factory=set)
    pids: set[str] = field(default_factory=set)
    sync: dict[str, datetime] = field(default_factory=dict)
    first: datetime | None = None
    last: datetime | None = None
    last_line: int = 0
    last_text: str = ""
    name: str = ""

    @property
    def node_rank(self) -> int | None:
        value = self.settings.get("node_rank")
        return int(value) if value is not None and value.isdigit() else None


@dataclass
class RunLogs:
    """Everything read: the node streams, the kernel events, each asked line's node and time."""

    nodes: list[NodeLog] = field(default_factory=list)
    kernel: list[KernelEvent] = field(default_factory=list)
    # (source, line) -> (stream key, time of the line or the last one before it on its stream)
    at: dict[tuple[str, int], tuple[str, datetime | None]] = field(default_factory=dict)


@dataclass
class _Clock:
    """Dates without a year (journald, torch) take the year the run's full dates show."""

    year: int = 2000

    def parse(self, found: re.Match[str]) -> datetime | None:
        groups = found.groupdict()
        month = groups["mon"]
        month_number = MONTHS.get(month) if not month.isdigit() else int(month)
        year = int(groups.get("year") or self.year)
        try:
            return datetime.strptime(
                f"{year:04d}-{month_number:02d}-{int(groups['day']):02d} {groups['hms']}",
                "%Y-%m-%d %H:%M:%S",
            )
        except (ValueError, TypeError):
            return None


def read_run(
    inputs: Iterable[TextInput], wanted: dict[str, set[int]], limit: int | None = None
) -> RunLogs:
    """Read every input once; `wanted` are the lines (per source) whose node and time to keep;
    `limit`: only each input's first lines (a first look)."""
    run = RunLogs()
    clock = _Clock()
    for text_input in inputs:
        streams: dict[str, NodeLog] = {}
        lines = wanted.get(text_input.path, set())
        _read_input(text_input, lines, streams, run, clock, limit)
        run.nodes.extend(streams.values())
    return run


def _read_input(
    text_input: TextInput,
    wanted: set[int],
    streams: dict[str, NodeLog],
    run: RunLogs,
    clock: _Clock,
    limit: int | None,
) -> None:
    source = text_input.path
    stream: NodeLog | None = None
    last_time: dict[str, datetime | None] = {}
    peel = _other_prefixes(text_input)
    for number, raw in enumerate(text_input.lines(), start=1):
        if limit is not None and number > limit:
            break
        text = raw.rstrip("\r\n")
        pod = KUBECTL.match(text)
        if pod:
            text = text[pod.end() :]
            key = f"{source}#{pod['pod']}"
        elif stream is not None:
            key = stream.key
        else:
            key = source
        stream = streams.get(key)
        if stream is None:
            stream = streams[key] = NodeLog(key, source, pod["pod"] if pod else None)
        stream.lines += 1
        time, host, text = _line_time(text, clock)
        if host:
            stream.host = host
        if peel is not None:
            start, end, _ = peel.body_span(text)
            text = text[start:end]
        if time is None and text.startswith("["):
            time = _torch_time(text, clock)
        body = text
        sglang = SGLANG_PREFIX.match(body) if body.startswith("[") else None
        if sglang and (sglang["ts"] or sglang["ranks"].strip()):
            if sglang["ts"]:
                time = _iso(sglang["ts"]) or time
                clock.year = time.year if time else clock.year
            stream.ranks.update(f"{k}{v}" for k, v in RANK.findall(sglang["ranks"]))
            stream.sglang_lines += 1
            body = body[sglang.end() :]
        _read_body(body, stream, source, number, time, host, run)
        if time is not None:
            last_time[key] = time
            stream.first = stream.first or time
            stream.last = time
        stream.last_line = number
        stream.last_text = raw.rstrip("\r\n")
        if number in wanted:
            run.at[(source, number)] = (key, last_time.get(key))


def _other_prefixes(text_input: TextInput) -> LinePrefixes | None:
    """What else a user's tools put before the lines (docker compose, srun --label, grep -n:
    engine/normalize.py), to peel after the pod and the clock read here."""
    sample = []
    for line in text_input.lines():
        sample.append(KUBECTL.sub("", line.rstrip("\r\n"), count=1))
        if len(sample) >= SAMPLE_LINES:
            break
    found = detect_prefixes(sample)
    forms = tuple(f for f in found.forms if f.name not in ("kubectl", "journald"))
    return LinePrefixes(forms, found.fenced, found.columns) if forms or found.fenced else None


def _iso(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text.replace(",", ".")[:19])
    except ValueError:  # a date no calendar has
        return None


def _line_time(text: str, clock: _Clock) -> tuple[datetime | None, str | None, str]:
    """The line's own clock (one of the prefixes above), the journal's host, the rest."""
    first = text[:1]
    if first == "[" and text[1:3] == "20":  # SGLang's own `[2025-...`: no prefix of these
        return None, None, text
    iso = ISO_TIME.match(text) if first.isdigit() else None
    if iso:
        time = _iso(iso["ts"])
        clock.year = time.year if time else clock.year
        return time, None, text[iso.end() :]
    journal = JOURNAL.match(text) if first.isupper() else None
    if journal:
        rest = text[journal.end() :]
        rest = DMESG.sub("", rest, count=1)
        return clock.parse(journal), journal["host"], rest
    if first != "[":
        return None, None, text
    dmesg_t = DMESG_T.match(text)
    if dmesg_t:
        return clock.parse(dmesg_t), None, text[dmesg_t.end() :]
    dmesg = DMESG.match(text)
    if dmesg:
        return None, None, text[dmesg.end() :]
    return None, None, text


def _torch_time(text: str, clock: _Clock) -> datetime | None:
    """torch's own clock on its C++ lines (`[rank4]:[E304 12:54:52.1 File.cpp:N]`)."""
    torch_rank = TORCH_RANK.match(text)
    torch_time = TORCH_TIME.match(text[torch_rank.end() :] if torch_rank else text)
    return clock.parse(torch_time) if torch_time else None


def _read_body(
    body: str,
    stream: NodeLog,
    source: str,
    number: int,
    time: datetime | None,
    host: str | None,
    run: RunLogs,
) -> None:
    if body.startswith("[rank"):
        torch_rank = TORCH_RANK.match(body)
        if torch_rank:
            stream.ranks.add(f"rank{torch_rank['rank']}")
    if "NVRM: Xid" in body or "rocess " in body:
        kill = OOM_KILL.search(body)
        xid = XID.search(body) if kill is None else None
        if kill or xid:
            found = kill or xid
            assert found is not None
            pid = (found["pid"] or "").strip("'")
            run.kernel.append(
                KernelEvent(
                    "oom_kill" if kill else "xid",
                    source,
                    number,
                    body.strip(),
                    time,
                    pid if pid.isdigit() else None,
                    (found["name"] or "").strip() or None,
                    host,
                    int(xid["code"]) if xid else None,
                    stream.key,
                )
            )
            return
    sync = SYNC.search(body) if time is not None and (" begin" in body or " end" in body) else None
    if sync and time is not None:
        event = re.sub(r"Capture [\w ]*?graph", "Capture graph", sync["event"], flags=re.I)
        stream.sync.setdefault(event.lower(), time)
    if "server_args" in body:
        settings = parse_server_args(body)
        if settings:
            _take_settings(stream, settings, number)
            stream.settings_text = body
    elif launch := LAUNCH.search(body):
        if not stream.command_line:
            entry = body.rfind("python", 0, launch.start())
            start = entry if entry >= 0 else launch.start()
            stream.command_line, stream.command_text = number, body[start:].strip()
        flags = {FLAG_SETTING[f["flag"]]: f["value"] for f in COMMAND_FLAG.finditer(body)}
        if flags and not stream.settings_line:
            stream.settings.update(flags)
            stream.settings_line, stream.settings_text = number, body
    if "release" not in stream.settings and "sglang" in body:
        version = stated_version(body)
        if version:
            stream.settings["release"] = version
    if "pid" in body or "PID" in body or "rocess " in body or "Controller " in body:
        stream.pids.update(found["pid"] for found in PIDS.finditer(body))


def _take_settings(stream: NodeLog, settings: dict[str, Any], number: int) -> None:
    for name in (*SHARED, "node_rank"):
        value = settings.get(name)
        if value is not None:
            stream.settings[name] = str(value)
    stream.settings_line = number


def node_name(stream: NodeLog) -> str:
    """How the report names a node: `node<rank>` when its server_args say, else its pod,
    host or file name."""
    if stream.node_rank is not None:
        return f"node{stream.node_rank}"
    if stream.pod:
        return stream.pod
    if stream.host:
        return stream.host
    return Path(stream.source).stem or stream.source
