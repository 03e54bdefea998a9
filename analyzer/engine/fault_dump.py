"""CPython faulthandler's dumps: read them in the scan, and report the death one shows.

SGLang enables faulthandler in its scheduler and data-parallel controller processes
(srt/managers/scheduler.py run_scheduler_process, data_parallel_controller.py
run_data_parallel_controller_process: `faulthandler.enable()`). On a fatal signal (SIGSEGV,
SIGFPE, SIGABRT, SIGBUS, SIGILL) faulthandler.c writes `Fatal Python error: <name>`, a blank
line, then Python/traceback.c _Py_DumpTracebackThreads: for each thread `Current thread 0x...`
(the one the signal hit) or `Thread 0x...` ` (most recent call first):`, then its frames as
dump_frame writes them, `  File "PATH", line N in FUNC` (no comma; innermost first, the
reverse of a traceback), or `  <no Python frame>`; `  Garbage-collecting` when the collector
ran, `  ...` past 100 frames, a blank line between threads; 3.12+ adds `Extension modules:`.
faulthandler.dump_traceback_later (pytest's faulthandler_timeout) writes the same blocks
under `Timeout (0:10:00)!`: a hang's dump, not a death.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from analyzer.core.lazy_pattern import LazyPattern
from analyzer.core.model import FaultDump, Frame, Incident, Line, ScannedLog, severity_rank
from analyzer.sglang.releases import package_path

if TYPE_CHECKING:
    from analyzer.rulebook.frame_phases import PhaseFound

# faulthandler.c faulthandler_handlers: the names it prints, and the signals they are
FAULT_SIGNALS = {
    "Segmentation fault": "SIGSEGV",
    "Floating point exception": "SIGFPE",
    "Aborted": "SIGABRT",
    "Bus error": "SIGBUS",
    "Illegal instruction": "SIGILL",
}
# at a line's start, or glued to a tqdm bar's last redraw (`... ?it/s]Fatal Python error: ...`:
# the bar ends its redraws with a carriage return, not a newline)
FATAL_HEADER = LazyPattern(r"(?:^|(?<=\]))Fatal Python error: (?P<reason>\S.*)$")
TIMEOUT_HEADER = LazyPattern(r"^Timeout \(\d+:\d\d:\d\d(?:\.\d+)?\)!$")
THREAD_LINE = LazyPattern(
    r"^(?:(?:(?P<current>Current thread)|Thread) 0x[0-9A-Fa-f]+(?: \[[^\]]*\])?"
    r"|(?P<stack>Stack)) \(most recent call first\):$"
)
DUMP_FRAME = re.compile(
    r'^\s*File (?:"(?P<file>[^"]*)"|\?\?\?), line (?P<lineno>\d+|\?\?\?) in (?P<func>.+)$'
)
DUMP_NOTES = ("<no Python frame>", "<tstate is freed>", "Garbage-collecting", "...")
# lines around the blocks: Py_FatalError's runtime state, 3.12+'s extension module list
DUMP_LINE_STARTS = ("Python runtime state: ", "Extension modules: ")
# what the Scanner must be fed for a dump to start (engine/scan.py SCANNER_LITERALS)
FAULT_LITERALS = (
    "Fatal Python error: ",
    "Timeout (",
    "Thread 0x",
    "thread 0x",
    "Stack (most recent call first):",
)
MAX_DUMP_LINES = 12000  # 100 threads of 100 frames, CPython's own bounds
MAX_FAULT_DUMPS = 64
FAULT_RULE = "silent-death"
NATIVE_ADVICE = (
    "A fatal signal is a crash in native code (a CUDA kernel, the driver, NCCL, a C++ "
    "extension) that Python called: the crashing thread's innermost frames name the call; "
    "`dmesg -T` shows the faulting library, and a run with CUDA_LAUNCH_BLOCKING=1 puts a "
    "kernel's fault at the kernel that made it."
)


class FaultDumpBuilder:
    """Collects one dump's lines; `feed` returns False when the line is none of the dump's."""

    def __init__(self, header: Line | None, signal: str = "", hang: bool = False) -> None:
        self.header, self.signal, self.hang = header, signal, hang
        self.thread: Line | None = None
        self.frames: list[tuple[Frame, Line]] = []
        self.in_current = False
        self.length = 0

    def feed(self, line: Line) -> bool:
        body = line.body.rstrip()
        stripped = body.strip()
        thread = THREAD_LINE.match(stripped) if stripped.endswith("):") else None
        if self.length >= MAX_DUMP_LINES:
            return False
        if thread:
            current = bool(thread["current"] or thread["stack"])
            if current and self.thread is not None:
                return False  # the next process's dump, pasted below this one
            self.in_current = current
            if current:
                self.thread = line
        elif not stripped:
            self.in_current = False
        elif found := DUMP_FRAME.match(body):
            if self.in_current:
                self.frames.append((_frame(found), line))
        elif stripped not in DUMP_NOTES and not stripped.startswith(DUMP_LINE_STARTS):
            return False
        self.length += 1
        return True

    def build(self) -> FaultDump:
        ordered = self.frames[::-1]  # traceback order: outermost first
        return FaultDump(
            header=self.header,
            signal=self.signal,
            hang=self.hang,
            thread=self.thread,
            frames=tuple(frame for frame, _ in ordered),
            frame_lines=tuple(line for _, line in ordered),
        )


def start_dump(line: Line) -> FaultDumpBuilder | None:
    """The dump a line begins: a header, or a thread block pasted without its header."""
    body = line.body.strip()
    if not any(literal in body for literal in FAULT_LITERALS):
        return None
    if header := FATAL_HEADER.search(body):
        reason = header["reason"].strip()
        signal = next((name for name in FAULT_SIGNALS if reason.startswith(name)), "")
        return FaultDumpBuilder(line, signal)
    if TIMEOUT_HEADER.match(body):
        return FaultDumpBuilder(line, hang=True)
    if THREAD_LINE.match(body):
        builder = FaultDumpBuilder(None)
        builder.feed(line)
        return builder
    return None


def _frame(found: re.Match[str]) -> Frame:
    lineno = found["lineno"]
    return Frame(found["file"] or "???", int(lineno) if lineno.isdigit() else 0, found["func"])


# ---- the death a dump shows ---------------------------------------------------------------


def death_dump(log: ScannedLog) -> FaultDump | None:
    """The last dump that shows a process dying: a fatal error's (or one cut above its header)
    with the crashing thread's block; not a timeout's, nor one SGLang's own watchdog took
    (its thread dumping the others is the current one)."""
    for dump in reversed(log.fault_dumps):
        if dump.hang or dump.thread is None or _watchdog_dump(dump):
            continue
        return dump
    return None


def _watchdog_dump(dump: FaultDump) -> bool:
    return any(
        "watchdog" in frame.function.lower() and package_path(frame.file) is not None
        for frame in dump.frames
    )


def with_fault_dump(
    log: ScannedLog, incidents: list[Incident], fallback: Incident | None
) -> list[Incident]:
    """The incidents of an input where nothing but death notices explains the failure: a
    faulthandler dump of the death replaces them (it names the signal and where the crashing
    thread was), unless a traceback classed after it is the failure (`fallback`)."""
    dump = death_dump(log)
    later = (
        fallback is not None
        and fallback.rule != "unknown"
        and dump is not None
        and (dump.first is None or fallback.line > dump.first.number)
    )
    if dump is None or later:
        return [fallback, *incidents] if fallback else incidents
    notices = [i for i in incidents if severity_rank(i.severity) < severity_rank("warning")]
    others = [i for i in incidents if i not in notices]
    return [fault_incident(log, dump, notices), *others]


def fault_incident(log: ScannedLog, dump: FaultDump, notices: list[Incident]) -> Incident:
    """The death a dump shows: of a `whole` frame phase's class when the crashing thread was
    in one (CUDA graph capture, distributed init), else a silent death with its place."""
    from analyzer.rulebook.frame_phases import phase_of, whole_phase_of

    found = whole_phase_of(dump.frames)
    whole = found is not None
    found = found or phase_of(dump.frames)
    signal = FAULT_SIGNALS.get(dump.signal, "")
    died_of = signal or ("a fatal error" if dump.header is not None else "a fatal signal")
    where = f" during {found.phase.text}" if whole and found else ""
    if found is not None and not whole:
        where = f" in {found.phase.text}"
    notice_lines = [i for n in notices for i in n.evidence if i.number == n.line]
    return Incident(
        rule_class=found.phase.rule_class if whole and found else "silent_death",
        rule=found.phase.rule_id if whole and found else FAULT_RULE,
        title=f"A server process died of {died_of}{where}",
        severity="fatal",
        source=log.summary.path,
        line=dump.first.number if dump.first else 0,
        ranks=[],
        evidence=_evidence(dump, found, notice_lines),
        span=None,
        offending_flags=[],
        explanation=_explanation(dump, found, whole, notice_lines),
        advice=[*(found.phase.advice if whole and found else ()), NATIVE_ADVICE],
    )


def _evidence(dump: FaultDump, found: PhaseFound | None, notices: list[Line]) -> list[Line]:
    shown = [dump.header, dump.thread, *dump.frame_lines[-2:], *notices]
    if found is not None and found.frame in dump.frames:
        shown.append(dump.frame_lines[dump.frames.index(found.frame)])
    unique = {line.number: line for line in shown if line is not None}
    return [unique[number] for number in sorted(unique)]


def _explanation(
    dump: FaultDump, found: PhaseFound | None, whole: bool, notices: list[Line]
) -> str:
    thread = dump.thread
    if dump.header is None:
        text = (
            f"faulthandler's dump of a dying process (`{thread.body.strip() if thread else ''}`), "
            "pasted without the `Fatal Python error: <signal>` line above it that names the "
            "signal: SGLang's scheduler and DP controller enable faulthandler, which prints "
            "these blocks when a fatal signal ends the process."
        )
    else:
        body = dump.header.body
        header = body[body.find("Fatal Python error") :].strip()
        text = f"`{header}`: faulthandler's report of a process ending"
        signal = FAULT_SIGNALS.get(dump.signal)
        text += f" by {signal}, a crash in native code." if signal else "."
    if dump.frames:
        inner = dump.frames[-1]
        text += f" The crashing thread was in {inner.function} ({inner.file}:{inner.lineno})."
    else:
        text += " The crashing thread ran no Python frame (a native thread: NCCL, CUDA)."
    if found is not None:
        text += f" {found.placement}"
        text += f": most likely a {found.phase.rule_class} failure." if whole else "."
    if notices:
        shown = ", ".join(f"`{line.body.strip()}` (line {line.number})" for line in notices)
        text += f" The launcher reported the death: {shown}."
    return text
