"""Read the output of the diagnostic commands a session runs after a launch.

`ls` (is the log there, how big, how old), `pgrep` / `ps` (is a server process alive),
`nvidia-smi` (memory used per GPU and by whom, table or CSV), `curl` (did a health poll
answer) and `dmesg` (did the kernel kill something). Each parser takes the output lines
of one command as (number, text) pairs and keeps the numbers, so a finding can point at
the exact line of the transcript. Parsers are shape-based: lines of another command's
output mixed into the same section are ignored.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import regex

NumberedLine = tuple[int, str]

LS_LONG = regex.compile(
    r"^(?P<mode>[-dlcbpsD][-rwxsStTlL]{9}[.+@]?)\s+\d+\s+\S+\s+\S+\s+(?P<size>\d[\d.,]*[KMGTP]?)\s+"
    r"(?P<time>[A-Z][a-z]{2}\s+\d{1,2}\s+(?:\d{1,2}:\d{2}|\d{4})"
    r"|\d{4}-\d\d-\d\d(?:[ T]\d\d:\d\d(?::\d\d(?:\.\d+)?)?(?:\s*[+-]\d{4})?)?)\s+"
    r"(?P<name>.+?)(?: -> .+)?$"
)
LS_MISSING = regex.compile(
    r"^(?:ls|stat|tail|cat|head|less|grep|wc): (?:cannot (?:access|open|stat) )?['‘]?"
    r"(?P<path>.+?)['’]?(?: for reading)?: No such file or directory$"
)
GPU_ROW = regex.compile(r"^\|\s+(?P<index>\d+)\s+(?P<name>\S.*?)\s{2,}(?:On|Off)\s+\|")
GPU_MEMORY = regex.compile(r"(?P<used>\d+)\s?MiB\s*/\s*(?P<total>\d+)\s?MiB")
GPU_PROCESS = regex.compile(
    r"^\|\s+(?P<gpu>\d+)\s+(?:(?:N/A|\d+)\s+(?:N/A|\d+)\s+)?(?P<pid>\d+)\s+"
    r"(?P<type>C\+G|M\+C|C|G|M)\s+(?P<name>\S.*?)\s+(?P<used>\d+|N/A)\s?(?:MiB)?\s*\|$"
)
CSV_NUMBER = regex.compile(r"^\s*(?P<value>\d+(?:\.\d+)?)\s*(?:MiB)?\s*$")
CURL_ERROR = regex.compile(r"curl: \((?P<code>\d+)\) (?P<message>.+)")
TIMED_OUT = regex.compile(r"\(Command timed out after \d+ ms\)|\bCommand timed out\b|timed out")
HTTP_STATUS = regex.compile(r"^(?:HTTP/[\d.]+ )?(?P<status>[1-5]\d\d)\b")
HEALTHY_WORDS = regex.compile(r"(?i)^(?:ok|ready|healthy|up|server (?:is )?(?:up|ready)\b.*)\W*$")
KERNEL_KILL = regex.compile(
    r"(?i)(?:Out of memory: Killed process (?P<pid>\d+) \((?P<name>[^)]+)\)|oom-kill|Killed process \d+)"
)
SERVER_PROCESS = regex.compile(r"sglang|launch_server")
PID_ONLY = regex.compile(r"^\s*\d+\s*$")
# pgrep (`PID [command]`), ps aux (`USER PID %CPU %MEM ...`), ps -ef (`UID PID PPID C ...`)
PROCESS_LINE = regex.compile(
    r"^\s*\d+(?:\s|$)|^\S+\s+\d+\s+[\d.]+\s+[\d.]+\s|^\S+\s+\d+\s+\d+\s+\d+\s"
)


# --------------------------------------------------------------------------- ls


@dataclass(frozen=True)
class Listing:
    """One file `ls -l` showed."""

    path: str
    size: int | None
    mtime: str | None
    line: NumberedLine


@dataclass
class LsResult:
    """What one `ls` was asked for and what it showed."""

    asked: list[str]
    entries: list[Listing] = field(default_factory=list)
    missing: list[tuple[str, NumberedLine]] = field(default_factory=list)
    lines: list[NumberedLine] = field(default_factory=list)


def parse_ls(arguments: Sequence[str], lines: Sequence[NumberedLine]) -> LsResult:
    """Entries and `cannot access` errors; names are joined to a listed directory."""
    asked = [a for a in arguments if not a.startswith("-")]
    folder = asked[0].rstrip("/") if len(asked) == 1 and not _has_glob(asked[0]) else None
    result = LsResult(asked)
    for number, text in lines:
        missing = LS_MISSING.match(text)
        if missing and text.startswith("ls"):
            result.missing.append((missing["path"], (number, text)))
            result.lines.append((number, text))
            continue
        found = LS_LONG.match(text)
        if not found:
            continue
        name = found["name"]
        if folder and "/" not in name and not found["mode"].startswith("d"):
            name = f"{folder}/{name}" if not folder.endswith(name) else folder
        result.entries.append(Listing(name, _size(found["size"]), found["time"], (number, text)))
        result.lines.append((number, text))
    return result


def _has_glob(word: str) -> bool:
    return any(ch in word for ch in "*?[")


def _size(text: str) -> int | None:
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50}
    try:
        if text[-1] in scale:
            return int(float(text[:-1].replace(",", ".")) * scale[text[-1]])
        return int(text.replace(",", ""))
    except ValueError:
        return None


# --------------------------------------------------------------------------- processes


@dataclass
class ProcessCheck:
    """A pgrep / ps look for the server: the lines that are a server process, if any."""

    command: str
    lines: list[NumberedLine]
    server: list[NumberedLine]
    conclusive: bool


def parse_processes(
    command: str, arguments: Sequence[str], lines: Sequence[NumberedLine]
) -> ProcessCheck:
    """Server processes in pgrep/ps output (grep's own line and pgrep's are not servers)."""
    listing = any(a in ("-a", "-l", "-f", "-af", "-fa", "-lf", "-fl") for a in arguments)
    pattern = " ".join(a for a in arguments if not a.startswith("-"))
    shown = [(n, t) for n, t in lines if PROCESS_LINE.match(t) and not LS_LONG.match(t)]
    server = [
        (n, t)
        for n, t in shown
        if SERVER_PROCESS.search(t) and not regex.search(r"\b(?:grep|pgrep|rg)\b", t)
    ]
    if not server and not listing and SERVER_PROCESS.search(pattern):
        server = [(n, t) for n, t in shown if PID_ONLY.match(t)]
    conclusive = bool(server) or bool(regex.search(r"sglang|launch_server|python", command))
    return ProcessCheck(command, list(shown), server, conclusive)


# --------------------------------------------------------------------------- nvidia-smi


@dataclass(frozen=True)
class GpuMemory:
    index: int
    used_mib: int
    total_mib: int
    line: NumberedLine


@dataclass(frozen=True)
class GpuProcess:
    gpu: int | None
    pid: int
    name: str
    used_mib: int | None
    line: NumberedLine


@dataclass
class GpuSnapshot:
    """Per-GPU memory and GPU processes from one nvidia-smi.

    `indexed` is False when the GPU rows were filtered out (`| grep MiB`) and indexes are
    the order of the memory lines.
    """

    gpus: list[GpuMemory] = field(default_factory=list)
    processes: list[GpuProcess] = field(default_factory=list)
    indexed: bool = True

    @property
    def lines(self) -> list[NumberedLine]:
        both = [g.line for g in self.gpus] + [p.line for p in self.processes]
        return sorted(set(both))

    def idle(self, threshold_mib: int = 500) -> bool:
        return (
            bool(self.gpus)
            and all(g.used_mib <= threshold_mib for g in self.gpus)
            and not (self.processes)
        )


def parse_nvidia_smi(arguments: Sequence[str], lines: Sequence[NumberedLine]) -> GpuSnapshot | None:
    """The table (also when grepped) or `--query-gpu` / `--query-compute-apps` CSV."""
    query = next(
        (a for a in arguments if a.startswith(("--query-gpu=", "--query-compute-apps="))), None
    )
    if query:
        return _parse_csv(query, lines)
    snapshot = GpuSnapshot()
    index: int | None = None
    position = 0
    for number, text in lines:
        row = GPU_ROW.match(text)
        if row:
            index = int(row["index"])
            continue
        process = GPU_PROCESS.match(text)
        if process:
            used = process["used"]
            snapshot.processes.append(
                GpuProcess(
                    int(process["gpu"]),
                    int(process["pid"]),
                    process["name"].strip(),
                    int(used) if used.isdigit() else None,
                    (number, text),
                )
            )
            continue
        memory = GPU_MEMORY.search(text)
        if memory and text.lstrip().startswith("|"):
            if index is None:
                snapshot.indexed = False
            gpu = index if index is not None else position
            snapshot.gpus.append(
                GpuMemory(gpu, int(memory["used"]), int(memory["total"]), (number, text))
            )
            position += 1
            index = None
    return snapshot if snapshot.gpus or snapshot.processes else None


def _parse_csv(query: str, lines: Sequence[NumberedLine]) -> GpuSnapshot | None:
    fields = [f.strip() for f in query.split("=", 1)[1].split(",")]
    snapshot = GpuSnapshot()
    for number, text in lines:
        cells = [c.strip() for c in text.split(",")]
        if len(cells) != len(fields) or any("[" in c for c in cells) or cells[0] in fields:
            continue
        row = dict(zip(fields, cells, strict=True))
        if query.startswith("--query-gpu="):
            used, total = _mib(row.get("memory.used")), _mib(row.get("memory.total"))
            index = _mib(row.get("index"))
            if used is None or total is None:
                continue
            gpu = index if index is not None else len(snapshot.gpus)
            snapshot.gpus.append(GpuMemory(gpu, used, total, (number, text)))
        else:
            pid = _mib(row.get("pid"))
            if pid is None:
                continue
            name = row.get("process_name") or row.get("name") or "?"
            used = _mib(row.get("used_memory") or row.get("used_gpu_memory"))
            snapshot.processes.append(GpuProcess(None, pid, name, used, (number, text)))
    return snapshot if snapshot.gpus or snapshot.processes else None


def _mib(cell: str | None) -> int | None:
    if cell is None:
        return None
    found = CSV_NUMBER.match(cell)
    return int(float(found["value"])) if found else None


# --------------------------------------------------------------------------- health polls


@dataclass
class HealthPoll:
    """A curl to the server: ok True (it answered), False (it did not), None (unclear)."""

    command: str
    ok: bool | None
    detail: str
    lines: list[NumberedLine]


def parse_health(
    command: str, looped: bool, exit_code: int | None, lines: Sequence[NumberedLine]
) -> HealthPoll:
    """Judge a health poll by what it printed; a loop's exit code says nothing."""
    shown = [(n, t) for n, t in lines if t.strip()]
    for number, text in shown:
        error = CURL_ERROR.search(text)
        if error:
            return HealthPoll(
                command, False, f"curl error {error['code']}: {error['message']}", [(number, text)]
            )
        if TIMED_OUT.search(text):
            return HealthPoll(command, False, "the poll timed out", [(number, text)])
    for number, text in shown:
        status = HTTP_STATUS.match(text.strip())
        if text.strip() == "000":
            return HealthPoll(command, False, "no HTTP answer (000)", [(number, text)])
        if status:
            # a 4xx is an answer: the server was there to refuse the request
            ok = status["status"][0] in "234"
            return HealthPoll(command, ok, f"HTTP {status['status']}", [(number, text)])
        if text.lstrip().startswith(("{", "[")) or HEALTHY_WORDS.match(text.strip()):
            return HealthPoll(command, True, "the server answered", [(number, text)])
    if exit_code is not None and not looped:
        if exit_code == 0:
            return HealthPoll(command, True, "curl succeeded", shown[-1:])
        return HealthPoll(command, False, f"curl exited with {exit_code}", shown[-1:])
    if looped and not shown:
        return HealthPoll(command, False, "the poll loop ended without a sign of the server", [])
    return HealthPoll(command, None, "no clear answer", shown[-1:])


# --------------------------------------------------------------------------- kernel


def kernel_kills(lines: Sequence[NumberedLine]) -> list[NumberedLine]:
    """dmesg / journalctl lines where the kernel killed a process (the OOM killer)."""
    return [(n, t) for n, t in lines if KERNEL_KILL.search(t)]
