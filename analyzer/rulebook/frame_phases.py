"""Frame phases as data: the startup phase a traceback cut before its exception line was in.

`analyzer/catalogs/frame_phases.toml` maps SGLang's files and functions to the phases of its
startup (distributed init, model loading, CUDA graph capture) and each phase to the class its
failures have; a phase with `code` claims the innermost source line shown (a tensor being
allocated), one with `frameless` an exception pasted without frames whose message only that
step raises. Read only for a traceback no rule explains, so a log rules explain never loads it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from fnmatch import fnmatchcase
from functools import cache
from typing import Any

from analyzer.core.model import Frame, ScannedLog, Traceback
from analyzer.rulebook.raise_site_rules import glob_path, string_list
from analyzer.rulebook.vocabulary import PHASE_RULE_PREFIX, catalog_entries
from analyzer.sglang.features import feature_phase
from analyzer.sglang.releases import package_path

PHASES_PACKAGE, PHASES_FILE = "analyzer.catalogs", "frame_phases.toml"
KNOWN_KEYS = {
    "id", "class", "text", "code", "frameless", "advice", "frames", "cases", "whole", "log",
}  # fmt: skip


@dataclass(frozen=True)
class FrameSet:
    """Frames of these files (globs inside the sglang package) and functions (none: any)."""

    files: tuple[str, ...]
    functions: tuple[str, ...] = ()
    whole: bool = False  # also classes a complete traceback raised in these frames

    def holds(self, path: str, function: str) -> bool:
        return any(glob_path(path, f) for f in self.files) and (
            not self.functions or any(fnmatchcase(function, f) for f in self.functions)
        )


@dataclass(frozen=True)
class PhaseCase:
    """A frame (`srt/x.py:function`), a source line or an exception line pasted alone
    (`message`) the phase must (not) claim."""

    frame: str | None
    code: str | None
    fires: bool
    message: str | None = None


@dataclass(frozen=True)
class FramePhase:
    """A startup phase, told by the frames a traceback ran through."""

    id: str
    rule_class: str
    text: str  # "model loading": what the explanation says the traceback was in
    code: re.Pattern[str] | None = None
    # an exception line alone (`Type: message`) only this step raises
    frameless: tuple[re.Pattern[str], ...] = ()
    frames: tuple[FrameSet, ...] = ()
    advice: tuple[str, ...] = ()
    cases: tuple[PhaseCase, ...] = ()
    whole: bool = False  # also classes a complete traceback no rule explains
    log: tuple[str, ...] = ()  # the log's phase markers (engine/scan.py) it is the step of

    @property
    def rule_id(self) -> str:
        """The `rule` an incident classified by this phase reports."""
        return f"{PHASE_RULE_PREFIX}{self.id}"

    def holding(self, path: str, function: str) -> FrameSet | None:
        """The frame set of the phase that holds the frame, if any."""
        name = function.rsplit(".", 1)[-1]
        return next((s for s in self.frames if s.holds(path, name)), None)


@dataclass(frozen=True)
class PhaseFound:
    """The phase of a cut traceback and the frame that placed it there."""

    phase: FramePhase
    frame: Frame
    whole: bool = False  # the frame is one where any exception is of the phase's class

    @property
    def where(self) -> str:
        """The frame's file inside the package (`sglang/srt/...`), else as printed."""
        path = package_path(self.frame.file)
        return f"sglang/{path}" if path else self.frame.file

    @property
    def placement(self) -> str:
        """What put the failure in the phase, for the explanation."""
        frame = self.frame
        where = (
            frame.code if self.phase.code else f"{self.where}:{frame.lineno} in {frame.function}"
        )
        return f"Its frames place the failure in {self.phase.text} (`{where}`)"


@cache
def frame_phases() -> tuple[FramePhase, ...]:
    """The shipped phases (raises RuleError when the file is malformed)."""
    return catalog_entries(PHASES_PACKAGE, PHASES_FILE, "phase", _phase)


def phase_of(frames: tuple[Frame, ...]) -> PhaseFound | None:
    """The phase a traceback's frames were in: the innermost source line shown, if a `code`
    phase claims it, else the outermost SGLang frame a phase holds (the step that failed)."""
    phases = frame_phases()
    shown = next((f for f in reversed(frames) if f.code), None)
    for phase in phases:
        if phase.code and shown is not None and phase.code.search(shown.code):
            return PhaseFound(phase, shown)
    for frame in frames:
        path = package_path(frame.file)
        if path is None:
            continue
        for phase in phases:
            if (held := phase.holding(path, frame.function)) is not None:
                return PhaseFound(phase, frame, held.whole)
    return None


def whole_phase_of(frames: tuple[Frame, ...]) -> PhaseFound | None:
    """The `whole` phase a complete traceback was raised in, by its frames only (an
    allocation's source line says nothing of an exception other than running out)."""
    found = phase_of(tuple(replace(f, code="") for f in frames))
    return found if found is not None and found.whole else None


@dataclass(frozen=True)
class LogPhaseFound:
    """The phase an exception fell in by the log's own step lines: the last marker before it."""

    phase: FramePhase
    marker: str  # the marker's name (engine/scan.py PHASE_MARKERS)
    line: int

    @property
    def placement(self) -> str:
        """What put the failure in the phase, for the explanation."""
        return (
            f"No frame of it places it, but the log had begun {self.phase.text} (line "
            f"{self.line}) and printed no later step before it: the failure is in "
            f"{self.phase.text}"
        )


@dataclass(frozen=True)
class MessagePhaseFound:
    """The phase of an exception pasted without frames, by its message alone."""

    phase: FramePhase
    message: str

    @property
    def placement(self) -> str:
        """What put the failure in the phase, for the explanation."""
        return f"No frame of it is shown, but only {self.phase.text} raises this message"


def message_phase_of(message: str) -> MessagePhaseFound | None:
    """The phase whose `frameless` patterns claim an exception line (`Type: message`)."""
    for phase in frame_phases():
        if any(p.search(message) for p in phase.frameless):
            return MessagePhaseFound(phase, message)
    return None


def log_phase_of(markers: list[tuple[int, str]], line: int) -> LogPhaseFound | None:
    """The phase whose step the log was in at `line`: the last step marker printed before
    it (a step that ended printed its end marker, which no phase claims)."""
    before = [(number, name) for number, name in markers if number < line]
    if not before:
        return None
    number, name = before[-1]
    phase = next((p for p in frame_phases() if name in p.log), None)
    return LogPhaseFound(phase, name, number) if phase is not None else None


def feature_phase_of(traceback: Traceback, whole: bool = False) -> PhaseFound | None:
    """The phase a traceback was in by a feature's code that only runs inside one (SGLang's
    torch.compile of the model runs only while the graph runner captures: catalogs/features.toml
    `phase`), in any chained part: for a traceback whose SGLang frames were cut away.
    `whole`: only a phase that classes a complete traceback."""
    found = feature_phase(traceback)
    if found is None:
        return None
    phase = next((p for p in frame_phases() if p.id == found[0]), None)
    if phase is None or (whole and not phase.whole):
        return None
    return PhaseFound(phase, found[1], phase.whole)


def _phase(data: dict[str, Any]) -> FramePhase:
    unknown = sorted(set(data) - KNOWN_KEYS)
    if unknown:
        raise ValueError(f"unknown key(s) {', '.join(unknown)}")
    whole = bool(data.get("whole", False))
    frames = tuple(
        FrameSet(
            string_list(f, "files"), string_list(f, "functions"), whole or bool(f.get("whole"))
        )
        for f in data.get("frames", [])
    )
    code = data.get("code")
    if not frames and not code:
        raise ValueError("a phase needs frames or code")
    return FramePhase(
        id=str(data["id"]),
        rule_class=str(data["class"]),
        text=str(data["text"]),
        code=re.compile(code) if code else None,
        frameless=tuple(re.compile(p) for p in string_list(data, "frameless")),
        frames=frames,
        advice=string_list(data, "advice"),
        whole=whole,
        log=string_list(data, "log"),
        cases=tuple(
            PhaseCase(c.get("frame"), c.get("code"), bool(c["fires"]), c.get("message"))
            for c in data.get("cases", [])
        ),
    )


def traceback_phase(traceback: Traceback) -> PhaseFound | None:
    """For a traceback cut before its exception line: the startup phase its frames were in;
    for a complete one: the phase that classes whatever is raised inside it (`whole`)."""
    whole = bool(traceback.exception_type)
    found = whole_phase_of(traceback.frames) if whole else phase_of(traceback.frames)
    # a feature's code that runs only inside one phase (torch.compile of the model: capture)
    return found or feature_phase_of(traceback, whole)


def log_phase(traceback: Traceback, log: ScannedLog) -> MessagePhaseFound | LogPhaseFound | None:
    """For an exception no frame places (none pasted, or only SGLang's callers' cut off):
    pasted alone, the step only which raises its message; else the step the log had begun
    before it. Frames all outside SGLang are someone else's program (a client, a user
    script): the server's step says nothing of them."""
    frames = traceback.frames
    if not frames and traceback.exception_type:
        text = f"{traceback.exception_type}: {traceback.exception_message}".rstrip(": ")
        if (by_message := message_phase_of(text)) is not None:
            return by_message
    if frames and all(package_path(f.file) is None for f in frames):
        return None
    return log_phase_of(log.phases, traceback.first.number)
