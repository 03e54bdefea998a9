"""What a session saw of each SGLang launch: the attempts, their log views and observations.

Plain data, built by attempts.py from the transcript's events and read by diagnose.py and
the pipeline."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from analyzer.core.model import Line
from analyzer.engine.scan import READY_MARKER
from analyzer.engine.survival import SERVING
from analyzer.sglang.launch_command import LaunchCommand
from analyzer.transcripts import shell
from analyzer.transcripts.command_outputs import NumberedLine
from analyzer.transcripts.events import ShellCall

# the ready line, and any sign it served: batches run, requests answered
READY_SIGNS = (READY_MARKER, "Uvicorn running on", *SERVING)


@dataclass
class LogView:
    """Log text the session saw for an attempt: the launch's own output or a later look."""

    how: str
    command: str
    lines: list[NumberedLine]
    ref: str | None
    timestamp: str | None
    partial: bool
    seq: int = 0  # order among the attempt's views and observations


@dataclass
class Observation:
    """One diagnostic fact, with the transcript lines it rests on.

    kind: ls | processes | gpus | health | kill | kernel_kill | shell_error | user
    """

    kind: str
    data: Any
    lines: list[NumberedLine]
    ref: str | None
    timestamp: str | None
    command: str = ""
    command_line: NumberedLine | None = None
    seq: int = 0  # order among the attempt's views and observations


@dataclass
class Launch:
    """Where and how an attempt was launched.

    `text` is what the session ran (the statement holding the launch; for a script, the
    script's launch line); `parsed` is SGLang's command read from it (None when the shell
    text is too broken to read one); `problems` are shell readings nobody meant.
    """

    call: ShellCall
    text: str
    parsed: LaunchCommand | None
    log_path: str | None
    background: bool
    problems: list[shell.Problem]
    lines: list[tuple[NumberedLine, str | None]]
    ref: str | None
    script: str | None = None
    interpreter: str | None = None


@dataclass
class Attempt:
    number: int
    launch: Launch
    views: list[LogView] = field(default_factory=list)
    observations: list[Observation] = field(default_factory=list)
    gpus_before: Observation | None = None
    dropped_views: int = 0

    @property
    def timestamp(self) -> str | None:
        return self.launch.call.timestamp

    def launch_lines(self, source: str) -> list[Line]:
        """The transcript lines of the launch command (ref: the record's command)."""
        return [Line(source, n, t, t, ref=ref) for (n, t), ref in self.launch.lines]

    def of_kind(self, kind: str) -> list[Observation]:
        return [o for o in self.observations if o.kind == kind]

    def ready(self) -> bool:
        """The server came up: its ready line was seen or a health poll answered."""
        return self.last_alive() is not None

    def last_alive(self) -> int | None:
        """The `seq` of the last view or health poll that shows the server up and serving."""
        alive = [
            v.seq
            for v in self.views
            if any(sign in text for _, text in v.lines for sign in READY_SIGNS)
        ]
        alive += [o.seq for o in self.of_kind("health") if o.data.ok]
        return max(alive, default=None)


@dataclass
class ClientFailure:
    """A client the session ran (or the user pasted) that failed: its name, how, the lines.

    `unreachable`: it only could not reach the server, which makes it the client's failure
    only if the server answered after it (`seq`); `refused`: the server answered that the
    request was wrong. `attempt` is the launch it ran under."""

    client: str
    what: str
    decisive: NumberedLine
    lines: list[NumberedLine]
    ref: str | None
    command: str = ""
    unreachable: bool = False
    refused: bool = False
    attempt: int | None = None
    seq: int = 0


@dataclass
class Session:
    attempts: list[Attempt]
    notes: list[str]
    made_dirs: set[str]
    # versions the session's commands printed (pip, sglang.__version__), in order
    stated_versions: list[tuple[str, Line]] = field(default_factory=list)
    clients: list[ClientFailure] = field(default_factory=list)
    # the `seq` of the last poll the server answered while the session had launched nothing
    answered: int | None = None
    # SGLang log text the session saw while it had launched nothing it could read: a log
    # looked at, a container's logs, a script's output
    loose_views: list[LogView] = field(default_factory=list)
