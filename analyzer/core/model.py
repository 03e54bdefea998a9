"""The plain data that flows between the pipeline stages.

read -> scan -> match -> link -> fix -> incident -> render. Each stage takes the
dataclasses of the one before it and returns its own; nothing here parses text,
so renderers never re-read a log.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SCHEMA_VERSION = 1

SEVERITIES = ("fatal", "error", "warning", "info")


def severity_rank(severity: str) -> int:
    """0 for the most severe; unknown severities sort last."""
    return SEVERITIES.index(severity) if severity in SEVERITIES else len(SEVERITIES)


@dataclass(frozen=True)
class Line:
    """One input line, 1-based, ANSI stripped, with SGLang's prefix split off.

    `text` is the whole line as the user saw it (minus colour codes);
    `body` is what follows the `[time DPn TPn]` / Ray-actor prefix.
    `ref` points into a transcript (message/part id) when the line came from one.
    `wrappers`: how many layers of the user's tools' prefixes the line carried (a launcher's
    own line among the worker output it relays carries fewer).
    `pasted`: the line as it was pasted, when undoing the paste changed it (HTML entities,
    a terminal's `\\r` overwrites, a hard-wrapped line rejoined: its lines, `\\n` between);
    `text` is then the repaired line.
    """

    source: str
    number: int
    text: str
    body: str
    timestamp: str | None = None
    ranks: tuple[tuple[str, int], ...] = ()
    actor: str | None = None
    ref: str | None = None
    wrappers: int = 0
    pasted: str | None = None

    @property
    def rank_label(self) -> str | None:
        """'TP3' / 'DP1 TP3' or the Ray actor; None for unprefixed lines."""
        if self.ranks:
            return " ".join(f"{k}{v}" for k, v in self.ranks)
        return self.actor


@dataclass(frozen=True)
class Frame:
    """One `File "...", line N, in func` frame and the source line printed under it."""

    file: str
    lineno: int
    function: str
    code: str = ""


@dataclass(frozen=True)
class Traceback:
    """A Python traceback, chained ones included (`chain` holds the earlier causes)."""

    lines: tuple[Line, ...]
    frames: tuple[Frame, ...]
    exception_type: str
    exception_message: str
    chain: tuple[Traceback, ...] = ()

    @property
    def first(self) -> Line:
        return self.lines[0]

    @property
    def exception_line(self) -> Line:
        """The `Type: message` line that ends the traceback."""
        for line in reversed(self.lines):
            if line.body.startswith(self.exception_type):
                return line
        return self.lines[-1]

    @property
    def last_frame(self) -> Frame | None:
        return self.frames[-1] if self.frames else None


@dataclass(frozen=True)
class FaultDump:
    """CPython faulthandler's dump (Python/traceback.c _Py_DumpTracebackThreads): a header
    (`Fatal Python error: Aborted` on a fatal signal, `Timeout (0:10:00)!` from
    dump_traceback_later), then each thread's frames, innermost first; only the current
    thread's (the one the signal hit) are kept, outermost first as in a traceback."""

    header: Line | None  # None: a paste cut above the thread blocks
    signal: str  # faulthandler's name of the signal (`Aborted`), "" when no header says
    hang: bool  # dump_traceback_later's `Timeout (...)!`: a hang dump, no death
    thread: Line | None  # `Current thread 0x... (most recent call first):` or `Stack (...)`
    frames: tuple[Frame, ...] = ()  # the current thread's, outermost first
    frame_lines: tuple[Line, ...] = ()  # the line of each of `frames`

    @property
    def first(self) -> Line | None:
        return self.header or self.thread


@dataclass(frozen=True)
class UsageDump:
    """argparse's `usage: ...` block and the `prog: error: ...` line after it."""

    first: Line
    error: Line | None
    length: int
    # the long options the usage text lists: the parser's own inventory, a version's fingerprint
    options: frozenset[str] = frozenset()
    # the usage text itself, its lines joined (analyzer/sglang/usage_text.py reads it)
    text: str = ""


@dataclass
class InputSummary:
    """What was read from one input, for the JSON `inputs` list."""

    path: str
    kind: str = "sglang_log"
    lines: int = 0
    notes: list[str] = field(default_factory=list)
    # the flag catalog the input was analyzed with, and why that one (analyzer/sglang/releases.py)
    catalog_version: str | None = None
    catalog_reason: str | None = None


@dataclass(frozen=True)
class FailureSignal:
    """A line that shows a failure (analyzer/signals/failure_lines.py): its kind, and for a
    catalog message the index of its entry."""

    line: Line
    kind: str
    entry: int | None = None


@dataclass
class ScannedLog:
    """Everything the scanner kept from one input: bounded, never the whole file."""

    summary: InputSummary
    candidates: list[Line] = field(default_factory=list)
    tracebacks: list[Traceback] = field(default_factory=list)
    usage_dumps: list[UsageDump] = field(default_factory=list)
    server_args: dict[str, Any] | None = None
    server_args_line: Line | None = None
    commands: list[Line] = field(default_factory=list)
    tail: list[Line] = field(default_factory=list)
    context: dict[int, list[Line]] = field(default_factory=dict)
    phases: list[tuple[int, str]] = field(default_factory=list)
    # each rank's (or the unprefixed lines') last startup phase and the line that began it
    last_phase: dict[str, tuple[str, Line]] = field(default_factory=dict)
    startup_began: bool = False
    ready: Line | None = None
    exit_status: str | None = None
    # `Load weight end. ... type=Arch` lines: which classes were loaded (a draft's among them)
    weight_loads: list[Line] = field(default_factory=list)
    # versions the input names (`sglang==0.5.13`, pip show), in order
    stated_versions: list[tuple[str, Line]] = field(default_factory=list)
    # `Ignore import error when loading sglang.srt.models.X: ...`: modules SGLang went on without
    skipped_imports: list[Line] = field(default_factory=list)
    # CPython faulthandler's dumps (a fatal signal's, a timeout's), in order
    fault_dumps: list[FaultDump] = field(default_factory=list)
    # every line that shows a failure, whatever rule knows it (analyzer/signals/)
    signals: list[FailureSignal] = field(default_factory=list)


@dataclass(frozen=True)
class Match:
    """A rule that fired: where, on what, with which named groups."""

    rule_id: str
    line: Line
    span: tuple[int, int] | None
    groups: dict[str, str]
    evidence: tuple[Line, ...]
    ranks: tuple[str, ...] = ()
    traceback: Traceback | None = None


@dataclass(frozen=True)
class Edit:
    """One change to a launch command: rename|set|add|remove a flag."""

    op: str
    flag: str
    to: str | None = None
    value: str | None = None
    # a removal that loses what the user asked for: SGLang has no counterpart of the flag
    intent_lost: bool = False

    def as_json(self) -> dict[str, Any]:
        found: dict[str, Any] = {
            "op": self.op,
            "flag": self.flag,
            "to": self.to,
            "value": self.value,
        }
        if self.intent_lost:
            found["intent_lost"] = True
        return found


@dataclass
class Finding:
    """A match after its flags are linked and its explanation is filled in."""

    match: Match
    rule_class: str
    title: str
    severity: str
    flags: list[str]
    explanation: str
    advice: list[str]
    edits: list[Edit] = field(default_factory=list)
    priority: int = 50


@dataclass(frozen=True)
class RaiseSite:
    """The statement in SGLang's source that raised the error (from the error catalog):
    `file` as `sglang/srt/...`, the guarding condition as source text."""

    file: str
    line: int
    function: str
    condition: str

    def as_json(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "line": self.line,
            "function": self.function,
            "condition": self.condition,
        }


@dataclass
class Incident:
    """One entry of the report: a finding with its command and corrected command."""

    rule_class: str
    rule: str
    title: str
    severity: str
    source: str
    line: int
    ranks: list[str]
    evidence: list[Line]
    span: tuple[int, int] | None
    offending_flags: list[str]
    explanation: str
    advice: list[str]
    command: str | None = None
    command_source: str | None = None
    corrected_command: str | None = None
    edits: list[Edit] = field(default_factory=list)
    attempt: int | None = None
    # set when asked (--verify): what the installed SGLang said about corrected_command
    verification: Verification | None = None
    raise_site: RaiseSite | None = None
    # other clean corrected commands, next best first (analyzer/repair/search.py)
    alternatives: list[Alternative] = field(default_factory=list)
    # the rule's data says no launch-flag edit fixes it (the install, the network, memory
    # other processes hold): no corrected command is expected
    fix_outside_command: bool = False
    # the report's index of the incident this one follows from (an OOM because other
    # processes held the GPUs; a watchdog timeout on another node); `cause` is that incident
    # until the report is ordered
    consequence_of: int | None = None
    cause: Incident | None = field(default=None, repr=False, compare=False)
    # a multi-node run (analyzer/nodes/): the node whose log shows it
    node: str | None = None


@dataclass
class Alternative:
    """Another corrected command the checks predict clean, with its edits and (--verify)
    what SGLang said about it."""

    command: str
    edits: list[Edit]
    verification: Verification | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "command": self.command,
            "edits": [e.as_json() for e in self.edits],
            "verification": self.verification.as_json() if self.verification else None,
        }


@dataclass(frozen=True)
class Verification:
    """What SGLang said about a command: status, its version, and its own message.

    `status`: "pass" | "fail" (SGLang ran and judged), "unavailable" | "timeout" (it could
    not); then `catalog_check` says what the flag catalog check found instead.
    """

    status: str
    sglang_version: str | None
    message: str
    seconds: float = 0.0
    catalog_check: str | None = None

    def describe(self) -> str:
        """The one line the CLI and the reports print for a verification."""
        if self.status == "pass":
            return f"verified with sglang {self.sglang_version}"
        if self.status == "fail":
            return f"rejected by sglang {self.sglang_version}: {self.message}"
        text = f"not verified ({self.status}): {self.message}"
        return f"{text}; {self.catalog_check}" if self.catalog_check else text

    def as_json(self) -> dict[str, str | None]:
        """Without the duration: the same verdict gives the same bytes."""
        return {
            "status": self.status,
            "sglang_version": self.sglang_version,
            "message": self.message,
            "catalog_check": self.catalog_check,
        }


@dataclass(frozen=True)
class FlagChange:
    """One difference between two launch commands (`before`/`after` None: absent)."""

    flag: str
    before: str | None
    after: str | None

    def as_json(self) -> dict[str, Any]:
        return {"flag": self.flag, "before": self.before, "after": self.after}


@dataclass
class Attempt:
    """One launch in a session transcript, for the report's timeline.

    `outcome` is ready | failed | stopped | unknown; `rule_class` is the class of the
    attempt's first incident. `flag_diff` compares the command with `diff_from`, the last
    attempt before it that came up.
    """

    number: int
    source: str
    line: int
    ref: str | None
    timestamp: str | None
    command: str
    log_path: str | None
    outcome: str
    rule_class: str | None = None
    signals: list[str] = field(default_factory=list)
    diff_from: int | None = None
    flag_diff: list[FlagChange] = field(default_factory=list)


@dataclass
class Report:
    """The whole analysis: inputs, incidents root cause first, and the fallback view."""

    inputs: list[InputSummary]
    incidents: list[Incident]
    verdict: str
    last_lines: list[Line] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    catalog_version: str | None = None
    attempts: list[Attempt] = field(default_factory=list)
    # decode metrics of each log (analyzer.metrics' RunMetrics), read only when a format
    # draws them (the HTML charts); the core model carries them without knowing their type
    runs: list[Any] = field(default_factory=list)
    # a multi-node run: one entry per node (analyzer.nodes.story.NodeStory), empty otherwise
    nodes: list[Any] = field(default_factory=list)
