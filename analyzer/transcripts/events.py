"""What a session transcript holds, whatever tool wrote it: shell calls, user messages, files.

Every reader (opencode, Claude Code, Codex, terminal text) turns its format into a stream
of these events, oldest first, so the attempt builder never knows which tool wrote the
transcript. Events are yielded one at a time: a transcript is never held whole.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ShellCall:
    """One command the session ran, and what it printed.

    `ref` names the record in the transcript (opencode `msg/part` ids, Claude's tool_use
    id, Codex's call_id); text transcripts have none and use `command_line` /
    `output_line`, the 1-based file lines where the command and its output start.
    `output_of` is set when the call only shows another call's output (Claude Code's
    BashOutput for a background shell): it is that call's ref.
    """

    command: str
    output: str
    exit_code: int | None = None
    timestamp: str | None = None
    ref: str | None = None
    command_line: int | None = None
    output_line: int | None = None
    status: str | None = None
    output_of: str | None = None
    background_id: str | None = None
    omitted: tuple[int, int] | None = None

    def output_lines(self) -> Iterator[tuple[int, str]]:
        """(number, text) of each output line: the file line in text transcripts, else the
        1-based line within the output (the record is named by `ref`)."""
        first = self.output_line if self.output_line is not None else 1
        skip_at, skipped = self.omitted or (-1, 0)
        for index, text in enumerate(self.output.split("\n") if self.output else ()):
            yield first + index + (skipped if index >= skip_at >= 0 else 0), text

    def command_lines(self) -> Iterator[tuple[int, str]]:
        """(number, text) of each line of the command, numbered like output_lines."""
        first = self.command_line if self.command_line is not None else 1
        for index, text in enumerate(self.command.split("\n")):
            yield first + index, text


@dataclass(frozen=True)
class UserMessage:
    """What the user typed ("crashed", "it hangs")."""

    text: str
    timestamp: str | None = None
    ref: str | None = None
    line: int | None = None


@dataclass(frozen=True)
class FileWrite:
    """A file the session wrote with an editor tool (a launch script, for instance)."""

    path: str
    content: str
    timestamp: str | None = None
    ref: str | None = None


Event = ShellCall | UserMessage | FileWrite


@dataclass
class Transcript:
    """One transcript input: its kind, a one-shot stream of events, and reading notes.

    `lines` and `notes` are complete only once `events` has been consumed.
    """

    path: str
    kind: str
    events: Iterator[Event]
    lines: int = 0
    notes: list[str] = field(default_factory=list)
    sessions: list[str] = field(default_factory=list)  # the ids it holds, for --session


def iso_from_epoch_ms(value: object) -> str | None:
    """opencode's epoch-millisecond times as ISO-8601 UTC (what the other formats use)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    from datetime import datetime, timezone

    try:
        moment = datetime.fromtimestamp(value / 1000, tz=timezone.utc)
    except (OverflowError, OSError, ValueError):
        return None
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
