"""Frames as evidence of a flag: a traceback through code SGLang runs only when a flag is
set (sglang/guarded_code.py: the host memory pool of the hierarchical cache exists only
under `if self.enable_hierarchical_cache:`) names that flag.

With a launch command (or the log's `server_args=ServerArgs(...)` record) a flag is named
only when the command gives it a value the guard needs: a command that leaves it off or at
its default proves that way was not taken. Without one, a flag every way into the code needs
is named. The explanation cites the frame and the guard's site.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from analyzer.core.model import Frame, Traceback
from analyzer.sglang.catalog import FlagCatalog

if TYPE_CHECKING:
    from analyzer.blame.flags_shown import FlagsShown
    from analyzer.sglang.guarded_code import Guard, Need
    from analyzer.sglang.launch_command import LaunchCommand

SGLANG_CODE = "sglang/srt/"
OFF_WORDS = frozenset({"false", "0", "none", "no", "off", ""})


@dataclass(frozen=True)
class GuardedFrame:
    """A flag named because `frame` runs only under `guard`."""

    flag: str
    frame: Frame
    guard: Guard


def guarded_frames(
    traceback: Traceback | None,
    catalog: FlagCatalog,
    command: LaunchCommand | None,
    version: str | None,
) -> list[GuardedFrame]:
    """The flags the traceback's SGLang frames (innermost first) show set, one per flag."""
    if traceback is None:
        return []
    # imported here: a log without a traceback never loads the map
    from analyzer.sglang.guarded_code import guarded_code_for

    code = guarded_code_for(version)
    if code is None:
        return []
    values = _values(command, catalog) if command is not None else None
    found: dict[str, GuardedFrame] = {}
    for part in (traceback, *traceback.chain):
        for frame in reversed(part.frames):
            if SGLANG_CODE not in frame.file.replace("\\", "/"):
                continue
            guards = code.guards(frame.file, frame.function)
            for flag, guard in _named(guards, values, catalog):
                found.setdefault(flag, GuardedFrame(flag, frame, guard))
    return list(found.values())


def _named(
    guards: list[Guard], values: dict[str, str | None] | None, catalog: FlagCatalog
) -> list[tuple[str, Guard]]:
    if not guards:
        return []
    if values is None:  # no command: the flags every way in needs
        common = set.intersection(*(set(g.flags) for g in guards))
        return [(f, guards[0]) for f in guards[0].flags if f in common and catalog.spec(f)]
    named = []
    for guard in guards:
        if all(_holds(need, values, catalog) for need in guard.needs):
            named += [(f, guard) for f in guard.flags]
    return named


def _values(command: LaunchCommand, catalog: FlagCatalog) -> dict[str, str | None]:
    """Canonical flag -> the value the command gives it (None for a switch)."""
    values: dict[str, str | None] = {}
    for argument in command.arguments:
        canonical = catalog.canonical(argument.flag) if argument.flag else None
        if canonical is not None:
            values[canonical] = argument.value
    return values


def _holds(need: Need, values: dict[str, str | None], catalog: FlagCatalog) -> bool:
    """Whether the command's value of the flag meets the need (absent: it is at its default,
    which the guard rules out)."""
    flag = catalog.canonical(need.flag)
    if flag is None or flag not in values:
        return False
    value = values[flag]
    if value is None:  # a switch, or a flag whose value the command did not show
        return need.op in ("truthy", "not_none")
    text = value.strip().strip("'\"").lower()
    if need.op == "truthy":
        return text not in OFF_WORDS
    if need.op == "not_none":
        return text not in ("none", "")
    if need.op in ("eq", "ne"):
        equal = text == str(need.value).lower()
        return equal if need.op == "eq" else not equal
    if need.op in ("in", "not_in"):
        inside = text in {str(v).lower() for v in need.value}
        return inside if need.op == "in" else not inside
    if need.op in ("gt", "ge", "lt", "le"):
        try:
            number = float(text)
        except ValueError:
            return False
        return {"gt": number > need.value, "ge": number >= need.value,
                "lt": number < need.value, "le": number <= need.value}[need.op]  # fmt: skip
    return need.op == "falsy" and text in OFF_WORDS


def possibly_set(
    command: LaunchCommand | None, catalog: FlagCatalog
) -> Callable[[str], bool] | None:
    """Whether the command (or the `server_args=ServerArgs(...)` record) leaves a flag
    possibly on: it sets it to a value other than off (None: no command, anything goes).
    features.toml's frames, like the mined guards, name no flag the command leaves off."""
    if command is None:
        return None
    values = _values(command, catalog)

    def possible(flag: str) -> bool:
        canonical = catalog.canonical(flag)
        if canonical is None or canonical not in values:
            return False
        value = values[canonical]
        return value is None or value.strip().strip("'\"").lower() not in OFF_WORDS

    return possible


def input_release(shown: FlagsShown | None, catalog: FlagCatalog) -> str | None:
    """The release the input showed (None: it did not say; every map is consulted)."""
    return shown.version if shown is not None else catalog.version


def with_evidence(
    explanation: str,
    flags: list[str],
    traceback: Traceback | None,
    catalog: FlagCatalog,
    command: LaunchCommand | None,
    shown: FlagsShown | None,
) -> str:
    """The explanation, with the lines (no command known) and the frames that showed
    offending `flags` set."""
    from analyzer.blame.flags_shown import with_shown

    explanation = with_shown(explanation, flags, shown if command is None else None, traceback)
    guarded = guarded_frames(traceback, catalog, command, input_release(shown, catalog))
    said = [
        f"{g.flag} (the traceback runs through {g.frame.function} in "
        f"{_tail(g.frame.file)}, which SGLang {g.guard.release} runs only with it set: "
        f"guard at {g.guard.site})"
        for g in guarded
        if g.flag in flags
    ]
    if not said:
        return explanation
    return f"{explanation} Code that runs only with a flag set failed: {'; '.join(said)}.".strip()


def _tail(path: str) -> str:
    path = path.replace("\\", "/")
    at = path.rfind(SGLANG_CODE)
    return path[at + len("sglang/") :] if at >= 0 else path
