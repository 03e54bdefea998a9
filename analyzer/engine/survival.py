"""What the server survived: an error after which it kept serving is not its death.

An incident is judged by what follows it in the same input, whichever rule made it:

- a client's traceback (its frames are in `sglang.bench_serving` / `sglang/benchmark/` or a
  user's script, none in the server's `sglang/srt/`) becomes a `client_error` finding of
  severity info that names the client (engine/clients.py), and the requests SGLang refused
  (400, 413, 422 access lines) one `client_error` finding of the http client's;
- an error followed by serving (`Decode batch`, `Prefill batch`, `" 200 OK` access lines of
  requests: not of GET probes, answered whatever became of the requests)
  before any sign of death (`... hit an exception`, `Received sigquit`, a child that
  `crashed with exit code`) or a restart (a new `server_args` record) is one the server
  survived (a request-level exception, an aborted request): severity warning;
- an error after a stop request (`SIGTERM received`, uvicorn's `Shutting down`, Ctrl-C's
  `KeyboardInterrupt`) with no restart between is shutdown noise: severity info;
- an error that ended a thread (Python's threading excepthook prints `Exception in thread
  NAME:` above the traceback) is not survived by serving after it: the process serves on
  without that thread's work (a cache controller's backup loop), severity error.

Stop, death and restart lines are among the lines the scan keeps (their literals are added
to the rules' triggers). Serving lines are too many to keep: `WatchedInput` sees every byte
chunk the scanner reads (so a log is usually read once) and keeps the first and last serving
line of each segment of about 64 KiB, and the first refused requests (a flood of them never
crowds out the lines the rules need). When an
error sits between two serving lines of one segment, that segment's lines are read again
to find the first serving line after it (stdin cannot be read again: the severity stays).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from analyzer.core.model import Incident, Line, ScannedLog, Traceback
from analyzer.core.read import TextInput
from analyzer.engine.clients import (
    CLIENT_GONE,
    REFUSED,
    REFUSED_MARK,
    client_incident,
    client_of,
    refused_finding,
)
from analyzer.engine.scan import SERVER_ARGS_MARKERS
from analyzer.rulebook.logic import HTTP_FRAMEWORKS
from analyzer.rulebook.vocabulary import PHASE_RULE_PREFIX
from analyzer.sglang.log_format import split_prefix

# scheduler_components/metrics_reporter.py (`Prefill batch`, `Decode batch`) and uvicorn's
# access log as SGLang configures it (`"POST /generate HTTP/1.1" 200 OK`). Only the first two
# are the scheduler's: the HTTP process still answers requests the scheduler finished before
# it died, so an access line before a death notice is no sign the scheduler lived on.
SCHEDULER_SERVING = ("Decode batch", "Prefill batch")
SERVING = (*SCHEDULER_SERVING, '" 200 OK')
# Probes are answered whatever became of the users' requests (a load balancer's or
# kubelet's GET /health, /v1/models, /metrics): only the requests that do work (POST
# /generate, /v1/chat/completions, ...) show the server kept serving.
PROBE = '"GET '
# tokenizer_manager's SignalHandler.sigterm_handler, uvicorn's handle_exit, Ctrl-C
STOPS = ("SIGTERM received", "INFO:     Shutting down", "Waiting for connections to close",
         "KeyboardInterrupt")  # fmt: skip
# the processes' own exception handlers, the parent's SIGQUIT handlers, utils/watchdog
DEATHS = ("hit an exception", "Received sigquit", "SIGQUIT received", "crashed with exit code",
          "Child process unexpectedly failed")  # fmt: skip
# CPython Lib/threading.py excepthook: `Exception in thread {name}:` (3.10+ adds the target,
# `Thread-7 (backup_thread_func)`), then the traceback of the exception that ended the thread
THREAD_DEATH = re.compile(r"Exception in thread (?P<name>[^:]+):\s*$")
KINDS = {"stop": STOPS, "death": DEATHS, "restart": SERVER_ARGS_MARKERS,
         "thread": ("Exception in thread ",)}  # fmt: skip
SEGMENT_BYTES = 64 * 1024
SEGMENT_LINES = 256
# the main process runs the HTTP server and the TokenizerManager; the scheduler is a child
MAIN_PROCESS_CODE = ("sglang/srt/entrypoints/", "sglang/srt/managers/tokenizer", *HTTP_FRAMEWORKS)
# a child's traceback this few lines below the death notice it caused is its report
REPORT_GAP = 2
CHILD_REPORT = " hit an exception"
_SERVING_BYTES = tuple(m.encode() for m in SERVING)
_REFUSED_BYTES = REFUSED_MARK.encode()
_GONE_BYTES = CLIENT_GONE.encode()
# refused requests shown as evidence, and counted before the count says "at least"
REFUSED_SHOWN = 5
REFUSED_COUNTED = 1000
# literals the scan keeps as candidate lines (the pipeline adds them to the rules' triggers)
MARKERS = tuple(m for markers in KINDS.values() for m in markers)


@dataclass
class _Segment:
    """A stretch of one server run in the log, and where in it the server was serving."""

    first: int
    last: int
    serving_first: int | None = None
    serving_last: int | None = None
    first_text: str = ""

    def serves(self, number: int, text: str) -> None:
        if self.serving_first is None or number < self.serving_first:
            self.serving_first, self.first_text = number, text
        if self.serving_last is None or number > self.serving_last:
            self.serving_last = number


@dataclass
class LifeSigns:
    """The lines of one input that tell whether its server lived on after a line."""

    segments: list[_Segment] = field(default_factory=list)
    marks: dict[str, list[tuple[int, str]]] = field(
        default_factory=lambda: {kind: [] for kind in KINDS}
    )
    lines: int = 0
    # the first requests SGLang refused (access lines) and how many were counted
    refused: list[tuple[int, str]] = field(default_factory=list)
    refused_count: int = 0
    _previous: str = ""
    # the input's lines again, for a question the segments cannot answer (None: stdin)
    reread: Callable[[], Iterable[tuple[int, str]]] | None = None
    _carry: bytes = b""

    def feed_chunk(self, chunk: bytes) -> None:
        data = self._carry + chunk if self._carry else chunk
        end = data.rfind(b"\n") + 1
        self._carry = data[end:]
        self._block(data, end)

    def close(self) -> None:
        if self._carry:
            carry, self._carry = self._carry + b"\n", b""
            self._block(carry, len(carry))

    def feed_lines(self, lines: Iterable[tuple[int, str]]) -> None:
        segment = self.segments[-1] if self.segments else None
        for number, text in lines:
            if segment is None or number - segment.first >= SEGMENT_LINES:
                segment = _Segment(number, number)
                self.segments.append(segment)
            segment.last = number
            if _serves(text):
                segment.serves(number, text)
            elif REFUSED_MARK in text and CLIENT_GONE not in self._previous:
                self._refused(number, text)
            self.lines, self._previous = number, text

    def _refused(self, number: int, text: str) -> None:
        if self.refused_count < REFUSED_COUNTED and REFUSED.search(text):
            self.refused_count += 1
            if len(self.refused) < REFUSED_SHOWN:
                self.refused.append((number, text))

    def _block(self, data: bytes, end: int) -> None:
        """Whole lines data[:end], a segment at a time."""
        start = 0
        while start < end:
            cut = data.find(b"\n", min(start + SEGMENT_BYTES, end - 1)) + 1 or end
            self._segment(data, start, cut)
            start = cut

    def _segment(self, data: bytes, start: int, end: int) -> None:
        """The segment's first and last serving lines; each search stops at the best so
        far, so a marker a segment lacks costs only the stretch before the first hit."""
        segment = _Segment(self.lines + 1, self.lines + data.count(b"\n", start, end))
        self.lines = segment.last
        first = last = -1
        for marker in _SERVING_BYTES:
            found = _find(data, marker, start, first + len(marker) if first >= 0 else end)
            first = found if found >= 0 else first
            found = _rfind(data, marker, last if last >= 0 else start, end)
            last = max(last, found)
        if first >= 0:
            segment.serves(segment.first + data.count(b"\n", start, first), _line_at(data, first))
            segment.serves(segment.last - data.count(b"\n", last, end - 1), "")
        self.segments.append(segment)
        self._refused_in(data, start, end, segment.first)

    def _refused_in(self, data: bytes, start: int, end: int, first: int) -> None:
        """The refused requests among the segment's lines (none looked for past the count)."""
        counted, number = start, first
        at = data.find(_REFUSED_BYTES, start, end) if self.refused_count < REFUSED_COUNTED else -1
        while at >= 0 and self.refused_count < REFUSED_COUNTED:
            number += data.count(b"\n", counted, at)
            counted = at
            begin = data.rfind(b"\n", 0, at) + 1
            if data.find(_GONE_BYTES, data.rfind(b"\n", 0, max(begin - 1, 0)) + 1, begin) < 0:
                self._refused(number, _line_at(data, at))
            line_end = data.find(b"\n", at, end)
            at = data.find(_REFUSED_BYTES, line_end, end) if line_end >= 0 else -1

    def mark(self, lines: Iterable[Line]) -> None:
        """The stop, death and restart lines among the lines the scan kept."""
        for line in sorted({ln.number: ln for ln in lines}.values(), key=lambda ln: ln.number):
            for kind, markers in KINDS.items():
                if any(m in line.text for m in markers):
                    self.marks[kind].append((line.number, line.text))

    def first_after(self, kind: str, after: int) -> int | None:
        return min((n for n, _ in self.marks[kind] if n > after), default=None)

    def last_before(self, kind: str, before: int) -> tuple[int, str] | None:
        return max(((n, t) for n, t in self.marks[kind] if n < before), default=None)

    def first_serving(
        self, after: int, before: int, scheduler_only: bool = False
    ) -> tuple[int, str] | None:
        """The first serving line strictly between two lines, if there is one (with
        `scheduler_only`, a scheduler's batch line; stdin, which cannot be read again, counts
        any serving line)."""
        found = self._first_serving(after, before)
        if found is None or not scheduler_only or _serves(found[1], SCHEDULER_SERVING):
            return found
        if self.reread is None:
            return found
        return self._first_in_lines(after, before, SCHEDULER_SERVING)

    def _first_serving(self, after: int, before: int) -> tuple[int, str] | None:
        for segment in self.segments:
            if segment.serving_first is None or segment.serving_last is None:
                continue
            if segment.last <= after or segment.serving_last <= after:
                continue
            if segment.serving_first > after:
                found = segment.serving_first, segment.first_text
                return found if found[0] < before else None
            # serving before and after `after` in one segment: read its lines again
            return self._first_in_lines(after, min(before, segment.last + 1))
        return None

    def _first_in_lines(
        self, after: int, before: int, markers: tuple[str, ...] = SERVING
    ) -> tuple[int, str] | None:
        if self.reread is None:
            return None
        for number, text in self.reread():
            if number >= before:
                return None
            if number > after and _serves(text, markers):
                return number, text
        return None


@dataclass
class WatchedInput(TextInput):
    """A TextInput whose chunks and lines are also read for the server's life signs."""

    signs: LifeSigns = field(default_factory=LifeSigns)

    def __post_init__(self) -> None:
        if self.file is not None:
            plain = TextInput(self.path, self.file)
            self.signs.reread = lambda: enumerate(plain.lines(), start=1)

    def chunks(self) -> Iterator[bytes]:
        for chunk in super().chunks():
            self.signs.feed_chunk(chunk)
            yield chunk
        self.signs.close()

    def lines(self) -> Iterator[str]:
        for number, text in enumerate(super().lines(), start=1):
            self.signs.feed_lines([(number, text)])
            yield text


def watched(text_input: TextInput) -> WatchedInput:
    fields = {f.name: getattr(text_input, f.name) for f in dataclasses.fields(TextInput)}
    return WatchedInput(**fields)


def signs_of_lines(lines: list[tuple[int, str]]) -> LifeSigns:
    signs = LifeSigns(reread=lambda: lines)
    signs.feed_lines(lines)
    return signs


def judge(
    incidents: list[Incident],
    log: ScannedLog,
    signs: LifeSigns,
    outliving: set[str] | frozenset[str] = frozenset(),
) -> list[Incident]:
    """The incidents with what the server survived lowered to its own severity; the rules
    in `outliving` report failures serving does not undo (a KV transfer path that failed:
    every request needing it fails again), which stay errors."""
    signs.mark([*log.candidates, *log.tail])
    judged = []
    for incident in incidents:
        if incident.severity not in ("fatal", "error"):
            judged.append(incident)
            continue
        traceback = _traceback_at(log, incident.line)
        unexplained = incident.rule == "unknown" or incident.rule.startswith(PHASE_RULE_PREFIX)
        client = client_of(traceback, unexplained)
        if client is not None:
            judged.append(client_incident(incident, client))
            continue
        # the main process's own access lines show it alive; not a scheduler that died
        own_access = traceback is None or _in_main_process(traceback)
        thread = _dead_thread(signs, traceback)
        lasting = incident.rule in outliving
        judged.append(_survived(incident, log.summary.path, signs, not own_access, thread, lasting))
    if signs.refused:
        shown = [split_prefix(log.summary.path, n, t) for n, t in signs.refused]
        capped = signs.refused_count >= REFUSED_COUNTED
        judged.append(refused_finding(shown, signs.refused_count, capped))
    return judged


def _survived(
    incident: Incident,
    source: str,
    signs: LifeSigns,
    scheduler_only: bool = False,
    thread: str | None = None,
    lasting: bool = False,
) -> Incident:
    start = min((ln.number for ln in incident.evidence if ln.source == source), default=0)
    end = max((ln.number for ln in incident.evidence if ln.source == source), default=0)
    if not start:
        return incident
    death, restart = (signs.first_after(kind, end) for kind in ("death", "restart"))
    bound = min((b for b in (death, restart) if b is not None), default=signs.lines + 1)
    # a death is not survived by serving after it (another DP rank's last batches)
    died = any(m in ln.text for ln in incident.evidence for m in DEATHS)
    served = None
    if not died:
        served = signs.first_serving(end, bound, scheduler_only and bound == death)
    if served is not None and thread is not None:
        return _lowered(
            incident,
            "error" if incident.severity == "fatal" else incident.severity,
            f" The process kept serving (line {served[0]}), but the exception ended the thread"
            f" {thread}: what that thread did stops from here on.",
            split_prefix(source, *served),
        )
    if served is not None and lasting:
        return _lowered(
            incident,
            "error" if incident.severity == "fatal" else incident.severity,
            f" The server kept serving (line {served[0]}), but not through what failed: the"
            " requests that need it fail the same way.",
            split_prefix(source, *served),
        )
    if served is not None:
        return _lowered(
            incident,
            "warning",
            f" The server survived it: it kept serving after it (line {served[0]}).",
            split_prefix(source, *served),
        )
    stop = signs.last_before("stop", start + 1)
    restart = signs.last_before("restart", start)
    if stop is not None and (restart is None or restart[0] < stop[0]):
        return _lowered(
            incident,
            "info",
            f" It came after the stop request at line {stop[0]}: shutdown noise, not a failure.",
            split_prefix(source, stop[0], stop[1]),
        )
    return incident


def _lowered(incident: Incident, severity: str, why: str, shown: Line | None) -> Incident:
    evidence = list(incident.evidence)
    if shown is not None and all(ln.number != shown.number for ln in evidence):
        evidence = sorted([*evidence, shown], key=lambda ln: ln.number)
    return dataclasses.replace(
        incident, severity=severity, explanation=incident.explanation + why, evidence=evidence
    )


def _dead_thread(signs: LifeSigns, traceback: Traceback | None) -> str | None:
    """The thread a traceback ended: the excepthook's header just above it."""
    if traceback is None:
        return None
    first = traceback.first.number
    for number, text in signs.marks["thread"]:
        if first - 2 <= number < first and (found := THREAD_DEATH.search(text)):
            return found["name"].strip()
    return None


def _traceback_at(log: ScannedLog, number: int) -> Traceback | None:
    for traceback in log.tracebacks:
        if traceback.first.number <= number <= traceback.lines[-1].number:
            return traceback
    return None


def death_cause(log: ScannedLog, death: Line, signs: LifeSigns | None) -> Traceback | None:
    """The traceback a death notice (`Received sigquit from a child process`) is the
    consequence of: the last one before it, when nothing between shows the server alive
    (startup progress, a batch of the scheduler's) and it is no request's (one through the
    HTTP framework is answered with an error and the server serves on)."""
    before = [t for t in log.tracebacks if t.lines[-1].number < death.number]
    if not before:
        return _reported_after(log, death)
    cause = before[-1]
    end = cause.lines[-1].number
    if _files_hold(cause, HTTP_FRAMEWORKS):
        return None
    if any(end < number < death.number for number, _ in log.phases):
        return None
    scheduler_only = not _in_main_process(cause)
    if signs is not None and signs.first_serving(end, death.number, scheduler_only):
        return None
    return cause


def _reported_after(log: ScannedLog, death: Line) -> Traceback | None:
    """A child's traceback printed right under the death notice it caused: the child logs
    `Scheduler hit an exception` and then signals the parent (managers/scheduler.py
    run_scheduler_process), but the two processes write to the same stream unsynchronised,
    so the parent's notice can land first."""
    after = [t for t in log.tracebacks if t.first.number > death.number]
    if not after or after[0].first.number - death.number > REPORT_GAP:
        return None
    cause = after[0]
    # a child's own report: a rank's line, or its process's `hit an exception` header (the
    # launcher re-raising the death below its notice is the consequence, not the cause)
    first = cause.first
    if not (first.rank_label or CHILD_REPORT in first.body) or _in_main_process(cause):
        return None
    return cause


def _in_main_process(traceback: Traceback) -> bool:
    """A traceback of the server's main process: its HTTP server and TokenizerManager."""
    return _files_hold(traceback, MAIN_PROCESS_CODE)


def _files_hold(traceback: Traceback, markers: tuple[str, ...]) -> bool:
    files = [f.file.replace("\\", "/") for t in (*traceback.chain, traceback) for f in t.frames]
    return any(marker in file for file in files for marker in markers)


def _serves(text: str, markers: tuple[str, ...] = SERVING) -> bool:
    return any(marker in text for marker in markers) and PROBE not in text


_PROBE_BYTES = PROBE.encode()


def _find(data: bytes, marker: bytes, start: int, end: int) -> int:
    """The first serving marker in data[start:end] on a line that is no probe's."""
    found = data.find(marker, start, end)
    while found >= 0 and _probe_line(data, found):
        found = data.find(marker, data.find(b"\n", found) + 1 or end, end)
    return found


def _rfind(data: bytes, marker: bytes, start: int, end: int) -> int:
    """The last serving marker in data[start:end] on a line that is no probe's."""
    found = data.rfind(marker, start, end)
    while found >= 0 and _probe_line(data, found):
        found = data.rfind(marker, start, data.rfind(b"\n", 0, found) + 1)
    return found


def _probe_line(data: bytes, at: int) -> bool:
    begin = data.rfind(b"\n", 0, at) + 1
    return data.find(_PROBE_BYTES, begin, at) >= 0


def _line_at(data: bytes, at: int) -> str:
    start = data.rfind(b"\n", 0, at) + 1
    end = data.find(b"\n", at)
    line = data[start : end if end >= 0 else len(data)].rstrip(b"\r")
    return line.decode("utf-8", errors="replace")
