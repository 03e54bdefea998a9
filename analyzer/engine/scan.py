"""Stage 2: one pass over an input's lines, keeping only what later stages need.

The scanner understands SGLang's line shapes (the `[time DPn TPn EPn PPn]`
prefix, Ray-actor prefixes, tracebacks with their chains, argparse usage dumps,
the `server_args=ServerArgs(...)` record) and keeps bounded state: candidate
lines that hold a rule's trigger literal, parsed tracebacks, and the tail.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from itertools import chain, islice

import regex

try:
    from ahocorasick_rs import AhoCorasick, Implementation
except ImportError:  # pragma: no cover - a declared dependency; `in` per literal is the fallback
    AhoCorasick = None

from analyzer.core.lazy_pattern import LazyPattern
from analyzer.core.model import Frame, InputSummary, Line, ScannedLog, Traceback, UsageDump
from analyzer.engine.fault_dump import (
    FAULT_LITERALS,
    MAX_FAULT_DUMPS,
    FaultDumpBuilder,
    start_dump,
)
from analyzer.engine.normalize import NO_PREFIXES, SAMPLE_LINES
from analyzer.engine.paste import PasteReading, Rejoiner, read_paste
from analyzer.sglang.code_paths import unelided_frame_file
from analyzer.sglang.launch_command import find_launch_command
from analyzer.sglang.log_format import (
    parse_server_args,
    split_prefix,
    stated_version,
    visible,
)
from analyzer.signals.failure_lines import note_signal, signal_literals

# also a frame whose `  File "/leading/path/` the paste cut (`sglang/x.py", line 3, in f`)
FRAME = re.compile(
    r'^\s*(?:File "|(?=[^"\s]+\.py", line \d))(?P<file>[^"]+)", line (?P<lineno>\d+)'
    r"(?:, in (?P<func>.+))?$"
)
EXCEPTION = LazyPattern(r"^(?P<type>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)(?::\s?(?P<msg>.*))?$")
# a line a user put in place of the frames they left out of a paste (`...`, `…`, `[...]`)
ELISION = re.compile(r"(?:\.{3,}|…|\[(?:\.{3}|…)\])")
CHAIN_MARKERS = (
    "During handling of the above exception, another exception occurred:",
    "The above exception was the direct cause of the following exception:",
)
ARGPARSE_ERROR = re.compile(r"^(?P<prog>[\w.\- ]+): error: (?P<message>.+)$")
# argparse's error line alone (a paste without the usage text above it; any prog, or none as
# SGLang's diffusion CLI prints it): only argparse's own phrasings, so `warmup error:` is not.
ARGPARSE_PHRASES = (
    "unrecognized arguments:", "argument ", "the following arguments are required",
    "ambiguous option:", "invalid choice:",
)  # fmt: skip
ARGPARSE_ALONE = LazyPattern(
    r"^(?:(?P<prog>[\w./\- ]+): )?error: (?P<message>(?:"
    + "|".join(regex.escape(p) for p in ARGPARSE_PHRASES)
    + r").*)$"
)
# An exception line with no traceback around it (`KeyError: 'midlayer...'` pasted alone):
# a dotted name ending like an exception class, or a class of a module of exceptions
# (`requests.exceptions.InvalidURL`). Interrupts and exits are how processes stop, not failures.
EXCEPTION_ALONE = LazyPattern(
    r"^(?P<type>(?:[a-z_]\w*\.)*(?:[A-Z]\w*(?:Error|Exception|OutOfResources)|Exception)"
    r"|(?:[a-z_]\w*\.)*(?:exceptions|errors)\.[A-Z]\w*)"
    r"(?::\s?(?P<msg>.*))?$"
)
EXCEPTION_MODULES = ("exceptions.", "errors.")
# scheduler.py / tokenizer_manager.py / detokenizer_manager.py: f"{Name} hit an exception: ..."
WRAPPED_EXCEPTION = " hit an exception: "
NOT_FAILURES = ("CancelledError",)
SERVER_ARGS_MARKERS = ("server_args=ServerArgs(", "server_args={")
# distributed/device_communicators custom_all_reduce(_utils).py, quick_all_reduce.py: each rank
# warns "{Custom allreduce|CustomAllreduce|Custom quick allreduce} is disabled because this
# process group spans across nodes." while init_torch_distributed builds its groups
SPANS_NODES = "is disabled because this process group spans across nodes"
STARTUP_MARKERS = (
    *SERVER_ARGS_MARKERS,
    SPANS_NODES,
    "Load weight begin",
    "Init torch distributed begin",
    "Init parallel begin",
    "Init nccl begin",
    "load weight begin",
)
READY_MARKER = "The server is fired up and ready to roll"
# models/registry.py import_model_classes: a model module that raised on import is skipped
IMPORT_SKIPPED = "Ignore import error when loading "
# Startup phases in the order SGLang prints them (model_runner.py: init_torch_distributed,
# load_model, init_memory_pool, init_device_graphs; 0.1-0.2 spell some in lower case).
PHASE_MARKERS = (
    ("Init torch distributed begin", "distributed_init"),
    ("Init nccl begin", "distributed_init"),
    (SPANS_NODES, "distributed_init"),
    ("Init torch distributed ends", "distributed_ready"),
    ("Load weight begin", "weight_loading"),
    ("load weight begin", "weight_loading"),
    ("Loading safetensors checkpoint shards", "weight_loading"),
    ("Load weight end", "weights_loaded"),
    ("KV Cache is allocated", "kv_cache_allocated"),
    ("Memory pool end", "kv_cache_allocated"),
    ("cuda graph begin", "cuda_graph_capture"),
    ("CUDA graph begin", "cuda_graph_capture"),
    ("cuda graph end", "cuda_graph_captured"),
    ("CUDA graph end", "cuda_graph_captured"),
    # uvicorn's startup line: the HTTP side is up and the warmup thread sends its requests
    ("Uvicorn running on", "http_warmup"),
    (READY_MARKER, "serving"),
)
# `exit code 1`, docker's `exited with code 137`, kubectl describe's `Exit Code:    137`,
# torch elastic's `failed (exitcode: -9)` and its failure table's `exitcode  : -9 (pid: N)`
EXIT_STATUS = LazyPattern(r"\b[Ee]xit(?:ed with)? ?[Cc]ode(?:: *| *: | )(?P<code>-?\d+)")
EXIT_MARKS = ("xit code", "xited with code", "xit Code", "xitcode")
# a signal's death said by others than the process: bash's report of a job the signal ended
# (strsignal's `Killed`, `Segmentation fault`, `Bus error`, `Aborted`, `Illegal instruction`,
# `Floating point exception`, then ` (core dumped)` when a core was written; alone for a
# foreground job, after `script: line N: PID` or `[N]+` for a background one), CPython's
# faulthandler (`Fatal Python error: Segmentation fault`), systemd's `Main process exited,
# code=killed, status=9/KILL` and the kernel's OOM killer (mm/oom_kill.c __oom_kill_process:
# `Out of memory: Killed process PID (comm) total-vm:...`)
SIGNAL_STATUS = {
    "Killed": "-9",
    "Segmentation fault": "-11",
    "Bus error": "-7",
    "Aborted": "-6",
    "Illegal instruction": "-4",
    "Floating point exception": "-8",
}
SIGNAL_NAMES = "|".join(SIGNAL_STATUS)
KILLED = LazyPattern(
    rf"^(?:(?:\S+: line \d+: +\d+|\[\d+\][+-]?) +(?P<signal>{SIGNAL_NAMES})(?: +\(core dumped\))? +\S.*"
    rf"|(?P<alone>{SIGNAL_NAMES})(?: \(core dumped\))?)$"
    r"|\b(?P<oom>Killed) process \d+ \("
    rf"|^Fatal Python error: (?P<fatal>{SIGNAL_NAMES})\b"
    r"|\bMain process exited, code=(?:killed|dumped), status=(?P<status>\d+)/"
)
SIGNAL_MARKS = (*SIGNAL_STATUS, "Main process exited")
SIGKILL_STATUS = "-9"
TRACEBACK_START = "Traceback (most recent call last):"
# lines from an exception line ending in `:` to the traceback its message embeds (torch's
# SubprocException: the message, a blank line, `Name=...`, the subprocess's traceback)
EMBEDDED_TRACEBACK_GAP = 3
USAGE_START = "usage: "
# `regex` finds the `--` behind a look-behind far faster than `re`, which tries every position
USAGE_OPTION = regex.compile(r"(?<![\w-])--[A-Za-z][\w-]*")
LAUNCH_HINTS = ("sglang", "launch_server")
MAX_STATED_VERSIONS = 20

# `Load weight end` is a phase marker; one per rank and model.
WEIGHTS_LOADED = "Load weight end"
# The literals _note_markers looks for: a line holding none of them is passed over in one
# Aho-Corasick pass instead of one test per marker.
MARKER_LITERALS = (
    *SERVER_ARGS_MARKERS,
    *STARTUP_MARKERS,
    *(marker for marker, _ in PHASE_MARKERS),
    READY_MARKER,
    WEIGHTS_LOADED,
    IMPORT_SKIPPED,
    *EXIT_MARKS,
    *SIGNAL_MARKS,
    *LAUNCH_HINTS,
    "Version: ",
)
# Every literal whose presence makes the Scanner do anything with a line beyond keeping
# it as context. The fast path (analyzer/engine/literal_scan.py) feeds the Scanner only lines
# holding one of these (plus a rule trigger) and the lines around them, so a check on
# a line that is not gated by one of these literals would break their equivalence.
SCANNER_LITERALS = (
    *MARKER_LITERALS,
    TRACEBACK_START,
    *CHAIN_MARKERS,
    *FAULT_LITERALS,
    'File "',  # a traceback pasted without its header
    "Error",  # an exception line pasted alone (`...Error: ...`)
    "Exception",
    "OutOfResources",
    *EXCEPTION_MODULES,
    *(f"error: {phrase}" for phrase in ARGPARSE_PHRASES),
    *signal_literals(),  # every line that shows a failure (analyzer/signals/failure_lines.py)
)

TAIL_LINES = 40
CONTEXT_LINES = 3
MAX_CANDIDATES = 2000
MAX_TRACEBACKS = 200
MAX_TRACEBACK_LINES = 400
MAX_MESSAGE_LINES = 10
# a record of some logger (a launcher's, a harness's: `2025-11-19 21:36:58.449018+08:00 - ...`,
# `[2026-01-01 10:00:00]`): it follows an exception, never continues its message
LOGGER_RECORD = LazyPattern(r"^\[?\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d")
MAX_WEIGHT_LOADS = 64
MAX_SKIPPED_IMPORTS = 64
MAX_CONTINUED_LINES = 64  # of one `\\`-continued launch command


class _TracebackBuilder:
    """Collects one traceback's lines; `feed` returns False when the line ends it."""

    def __init__(self, first: Line, chain: tuple[Traceback, ...]) -> None:
        self.lines: list[Line] = [first]
        self.frames: list[Frame] = []
        self.chain = chain
        self.exception: tuple[str, str] | None = None
        self.message_lines = 0

    def feed(self, line: Line) -> bool:
        body = line.body
        if self.exception is not None:
            return self._feed_message(line)
        frame = FRAME.match(body)
        if frame:
            self.frames.append(_frame(frame))
        elif self.frames and ELISION.fullmatch(body.strip()):
            pass  # frames cut out of the paste: the traceback goes on below them
        elif body[:1].isspace() or not body:
            if self.frames and body.strip() and not _is_caret_line(body):
                last = self.frames[-1]
                if not last.code:
                    self.frames[-1] = Frame(last.file, last.lineno, last.function, body.strip())
        else:
            exc = EXCEPTION.match(body.strip())
            # a line SGLang's logger prefixed is a new record, never the exception line
            if not exc or not self.frames or line.timestamp or line.ranks:
                return False
            message = exc["msg"] or ""
            if TRACEBACK_START in message:
                # the message embeds another process's traceback (up to 0.3 the launcher
                # raised `RuntimeError: Initialization failed. controller_init_state:
                # Traceback ...`): this line ends this traceback and starts that one
                self.exception = (exc["type"], message.split(TRACEBACK_START)[0].rstrip())
                self._append(line)
                return False
            self.exception = (exc["type"], message)
        self._append(line)
        return True

    def _feed_message(self, line: Line) -> bool:
        body = line.body
        continues = (
            body.strip()
            and not line.timestamp
            and not line.ranks
            # a launcher's own line among the output it relays carries fewer prefix layers
            and line.wrappers == self.lines[-1].wrappers
            and self.message_lines < MAX_MESSAGE_LINES
            and not body.startswith(("Traceback", *CHAIN_MARKERS))
            and not LOGGER_RECORD.match(body)
            # another traceback pasted without its header (the next rank's, the next pod's)
            and not FRAME.match(body)
        )
        if not continues:
            return False
        self.message_lines += 1
        kind, msg = self.exception  # type: ignore[misc]
        self.exception = (kind, f"{msg}\n{body}" if msg else body)
        self._append(line)
        return True

    def _append(self, line: Line) -> None:
        if len(self.lines) < MAX_TRACEBACK_LINES:
            self.lines.append(line)

    def build(self, at_end: bool = False) -> Traceback | None:
        """The traceback; one cut before its exception line only where the input ends
        (a paste cut there), with an empty exception type."""
        if self.exception is None:
            if not (at_end and self.frames):
                return None
            return Traceback(tuple(self.lines), tuple(self.frames), "", "", self.chain)
        kind, message = self.exception
        return Traceback(tuple(self.lines), tuple(self.frames), kind, message, self.chain)


def _frame(found: re.Match) -> Frame:
    file = unelided_frame_file(found["file"])
    return Frame(file, int(found["lineno"]), (found["func"] or "").strip())


def _any_of(literals: tuple[str, ...]) -> Callable[[str], bool]:
    """Whether a text holds any of the literals: one Aho-Corasick pass, not one per literal."""
    if AhoCorasick is None or not literals or "" in literals:
        return lambda text: any(literal in text for literal in literals)
    # a contiguous NFA builds in a fifth of the default DFA's time and searches a line
    # almost as fast: the scanner asks only of the lines it is fed
    automaton = AhoCorasick(list(literals), implementation=Implementation.ContiguousNFA)
    return lambda text: bool(automaton.find_matches_as_indexes(text))


def _is_caret_line(body: str) -> bool:
    stripped = body.strip()
    return bool(stripped) and set(stripped) <= set("^~ ")


class Scanner:
    """Consumes one input's lines in order and produces a ScannedLog."""

    def __init__(self, summary: InputSummary, triggers: Sequence[str]) -> None:
        self.log = ScannedLog(summary=summary)
        self.triggers = tuple(triggers)
        self.has_trigger = _any_of(self.triggers)
        self.has_marker = _any_of(MARKER_LITERALS)
        self.recent: deque[Line] = deque(maxlen=CONTEXT_LINES)
        self.tail: deque[Line] = deque(maxlen=TAIL_LINES)
        self.pending_context: list[tuple[int, int]] = []
        self.traceback: _TracebackBuilder | None = None
        self.fault: FaultDumpBuilder | None = None
        self.chain_next: tuple[Traceback, ...] | None = None
        self.last_traceback: Traceback | None = None
        self.usage: tuple[Line, int] | None = None
        self.usage_options: set[str] = set()
        self.usage_lines: list[str] = []
        # a launch command continued on the next lines with a trailing backslash
        self.continued: tuple[Line, int] | None = None

    @property
    def wants_more(self) -> bool:
        """True while a traceback, usage dump, faulthandler dump or a candidate's
        after-context is open."""
        return bool(
            self.traceback or self.usage or self.fault or self.pending_context or self.continued
        )

    def feed(self, line: Line) -> None:
        self._extend_context(line)
        if self.continued is not None:
            self._continue_command(line)
        if self.traceback is not None and self.traceback.feed(line):
            if self.has_trigger(line.text):
                self._add_candidate(line)
            if self.traceback.exception is not None:  # its exception line and message
                note_signal(self.log.signals, line)
            self._remember(line)
            return
        self._finish_traceback()
        if self.fault is not None and self.fault.feed(line):
            if self.has_trigger(line.text):
                self._add_candidate(line)
            self._remember(line)
            return
        self._finish_fault()
        body = line.body
        in_usage = self.usage is not None
        if in_usage:
            self._feed_usage(line)
        elif line.body.startswith(USAGE_START):
            self.usage = (line, 1)
            self.usage_options = set(USAGE_OPTION.findall(line.body))
            self.usage_lines = [line.body]
        if TRACEBACK_START in body:
            chain = self.chain_next or self._embedding(line) or ()
            self.traceback = _TracebackBuilder(line, chain)
            self.chain_next = None
        elif body.strip() in CHAIN_MARKERS and self.last_traceback is not None:
            self.chain_next = (self.last_traceback, *self.last_traceback.chain)
            self.log.tracebacks.pop()
            self.last_traceback = None  # it is the next one's cause now, not a traceback
        elif not in_usage and self.usage is None:
            self.fault = start_dump(line)
            if self.fault is None:
                self._note_fragment(line)
        self._note_markers(line)
        self._remember(line)

    def _embedding(self, line: Line) -> tuple[Traceback, ...] | None:
        """A traceback whose message ends in `:` and goes on as another process's traceback
        (torch/_inductor/compile_worker/subproc_pool.py SubprocException: `An exception
        occurred in a subprocess:` then the job's traceback) is one failure with it: the
        traceback opening on the next lines gets it as its cause, so a chain marker after
        the embedded one keeps both (a traceback opened on the exception's own line, the
        0.3 launcher's, is a separate one)."""
        last = self.last_traceback
        if last is None or not last.exception_message.rstrip().endswith(":"):
            return None
        if not 0 < line.number - last.lines[-1].number <= EMBEDDED_TRACEBACK_GAP:
            return None
        self.log.tracebacks.pop()
        self.last_traceback = None
        return (last, *last.chain)

    def _note_fragment(self, line: Line) -> None:
        """A traceback without its header, an exception or an argparse error pasted alone:
        the same objects as their complete forms, so the same rules classify them."""
        body = line.body
        if FRAME.match(body):
            self.traceback = _TracebackBuilder(line, self.chain_next or ())
            self.chain_next = None
            self.traceback.frames.append(_frame(FRAME.match(body)))
            return
        if any(
            word in body for word in ("Error", "Exception", "OutOfResources", *EXCEPTION_MODULES)
        ):
            # SGLang's processes log `{Name} hit an exception: {traceback}`; a paste that kept
            # only the exception line of it joins the two on one line
            text = body.rsplit(WRAPPED_EXCEPTION, 1)[-1]
            alone = EXCEPTION_ALONE.match(text.strip())
            if alone and not alone["type"].endswith(NOT_FAILURES):
                chain, self.chain_next = self.chain_next or (), None
                if alone["msg"] is not None and not alone["msg"].strip():
                    # `ImportError: ` and nothing: Python prints a message that starts
                    # with a newline on the lines below, as in a complete traceback
                    self.traceback = _TracebackBuilder(line, chain)
                    self.traceback.exception = (alone["type"], "")
                    return
                self._add_traceback(
                    Traceback((line,), (), alone["type"], alone["msg"] or "", chain)
                )
                return
        if "error: " in body and (error := ARGPARSE_ALONE.match(body)):
            if error["prog"] is None or error["prog"].strip():
                self.log.usage_dumps.append(UsageDump(line, line, 1))

    def _feed_usage(self, line: Line) -> None:
        first, length = self.usage  # type: ignore[misc]
        error = ARGPARSE_ERROR.match(line.body)
        if error:
            self.log.usage_dumps.append(self._usage_dump(first, line, length + 1))
            self.usage = None
        elif line.ranks or line.timestamp or length > 2000:
            self.log.usage_dumps.append(self._usage_dump(first, None, length))
            self.usage = None
        else:
            self.usage = (first, length + 1)
            self.usage_options.update(USAGE_OPTION.findall(line.body))
            self.usage_lines.append(line.body)

    def _usage_dump(self, first: Line, error: Line | None, length: int) -> UsageDump:
        text = " ".join(self.usage_lines)
        return UsageDump(first, error, length, frozenset(self.usage_options), text)

    def _finish_traceback(self, at_end: bool = False) -> None:
        if self.traceback is None:
            return
        built = self.traceback.build(at_end)
        self.traceback = None
        if built is not None:
            self._add_traceback(built)

    def _finish_fault(self) -> None:
        if self.fault is None:
            return
        if len(self.log.fault_dumps) < MAX_FAULT_DUMPS:
            self.log.fault_dumps.append(self.fault.build())
        self.fault = None

    def _add_traceback(self, built: Traceback) -> None:
        if len(self.log.tracebacks) < MAX_TRACEBACKS:
            self.log.tracebacks.append(built)
            self.last_traceback = built

    def _note_markers(self, line: Line) -> None:
        text = line.text
        if self.has_trigger(text):
            self._add_candidate(line)
        note_signal(self.log.signals, line)
        body = line.body
        if not self.has_marker(body):
            return
        if any(marker in body for marker in SERVER_ARGS_MARKERS):
            self.log.server_args = parse_server_args(body)
            self.log.server_args_line = line
        if any(marker in body for marker in STARTUP_MARKERS):
            self.log.startup_began = True
        for marker, phase in PHASE_MARKERS:
            if marker in body and len(self.log.phases) < MAX_CANDIDATES:
                self.log.phases.append((line.number, phase))
                self.log.last_phase[line.rank_label or ""] = (phase, line)
                self.log.startup_began = True
        if READY_MARKER in body and self.log.ready is None:
            self.log.ready = line
        if WEIGHTS_LOADED in body and len(self.log.weight_loads) < MAX_WEIGHT_LOADS:
            self.log.weight_loads.append(line)
        if IMPORT_SKIPPED in body and len(self.log.skipped_imports) < MAX_SKIPPED_IMPORTS:
            if all(seen.body != body for seen in self.log.skipped_imports):  # once, not per rank
                self.log.skipped_imports.append(line)
        if any(mark in body for mark in EXIT_MARKS):
            exit_status = EXIT_STATUS.search(body)
            if exit_status:
                self.log.exit_status = exit_status["code"]
        if any(mark in body for mark in SIGNAL_MARKS):
            signal = KILLED.search(body.strip())
            if signal:
                self.log.exit_status = _signal_status(signal)
        if any(hint in body for hint in LAUNCH_HINTS) and find_launch_command(body):
            self.log.commands.append(line)
            if body.rstrip().endswith("\\"):
                self.continued = (line, 1)
        if "sglang" in body or "Version: " in body:
            self._note_version(line)

    def _continue_command(self, line: Line) -> None:
        """Join a `\\`-continued line to the launch command above it, as the shell does."""
        head, count = self.continued or (line, 0)
        joined = f"{head.body.rstrip()[:-1].rstrip()} {line.body.strip()}"
        self.log.commands[-1] = replace(head, body=joined)
        more = joined.endswith("\\") and count < MAX_CONTINUED_LINES
        self.continued = (self.log.commands[-1], count + 1) if more else None

    def _note_version(self, line: Line) -> None:
        """A version the input states (pip output, a version print): the best evidence of
        which SGLang wrote it."""
        adjacent = self.recent and self.recent[-1].number == line.number - 1
        version = stated_version(line.body, self.recent[-1].body if adjacent else None)
        if version and len(self.log.stated_versions) < MAX_STATED_VERSIONS:
            self.log.stated_versions.append((version, line))

    def _add_candidate(self, line: Line) -> None:
        if len(self.log.candidates) >= MAX_CANDIDATES:
            return
        self.log.candidates.append(line)
        self.log.context[line.number] = [*self.recent, line]
        self.pending_context.append((line.number, CONTEXT_LINES))

    def _extend_context(self, line: Line) -> None:
        if not self.pending_context:
            return
        still: list[tuple[int, int]] = []
        for number, left in self.pending_context:
            self.log.context[number].append(line)
            if left > 1:
                still.append((number, left - 1))
        self.pending_context = still

    def _remember(self, line: Line) -> None:
        self.recent.append(line)
        self.tail.append(line)
        self.log.summary.lines = line.number

    def finish(self, total_lines: int | None = None, tail: list[Line] | None = None) -> ScannedLog:
        """Close open blocks; the fast path passes the line count and tail it kept itself."""
        if total_lines is not None:
            self.log.summary.lines = total_lines
        if tail is not None:
            self.tail = deque(tail, maxlen=TAIL_LINES)
        self._finish_traceback(at_end=True)
        self._finish_fault()
        if self.usage is not None:
            first, length = self.usage
            self.log.usage_dumps.append(self._usage_dump(first, None, length))
        self.log.tail = list(self.tail)
        return self.log


def scan_lines(summary: InputSummary, lines: Iterable[str], triggers: Sequence[str]) -> ScannedLog:
    """Scan decoded text lines of one input (the first ones also tell its line prefixes)."""
    scanner = Scanner(summary, triggers)
    stream = iter(lines)
    head = list(islice(stream, SAMPLE_LINES))
    reading = read_paste(visible_lines(head))
    note_reading(summary, reading)
    if reading.repairs:
        return scan_repaired(scanner, summary.path, chain(head, stream), reading)
    prefixes = reading.prefixes
    strip = prefixes.body_span if prefixes is not NO_PREFIXES else None
    for number, raw in enumerate(chain(head, stream), start=1):
        scanner.feed(split_prefix(summary.path, number, raw, strip))
    return scanner.finish()


def scan_repaired(
    scanner: Scanner, source: str, lines: Iterable[str], reading: PasteReading
) -> ScannedLog:
    """Feed every line, repaired as the paste needs (engine/paste.py)."""
    prefixes = reading.prefixes
    strip = prefixes.body_span if prefixes is not NO_PREFIXES else None
    rejoiner = Rejoiner(reading.repairs, prefixes)
    for number, text, pasted in rejoiner.lines(lines):
        scanner.feed(split_prefix(source, number, text, strip, pasted))
    return scanner.finish(total_lines=rejoiner.count)


def visible_lines(lines: Iterable[str]) -> list[str]:
    """Lines as the prefix detector sees them: as a terminal shows them."""
    return [visible(ln) for ln in lines]


def note_reading(summary: InputSummary, reading: PasteReading) -> None:
    if reading.prefixes is not NO_PREFIXES:
        summary.notes.append("line prefixes read past: " + ", ".join(reading.prefixes.names))
    if reading.repairs.names:
        summary.notes.append("paste repaired: " + ", ".join(reading.repairs.names))


def _signal_status(found: regex.Match[str]) -> str:
    """The exit status a signal death notice means (`-9` for SIGKILL, as Python's)."""
    if found["status"]:
        return f"-{found['status']}"
    name = found["signal"] or found["alone"] or found["fatal"] or found["oom"]
    return SIGNAL_STATUS.get(name, SIGKILL_STATUS)
