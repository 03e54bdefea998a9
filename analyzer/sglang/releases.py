"""Which SGLang wrote this input: the stage that picks the flag catalog to judge it by.

A flag is only wrong relative to a release (`--cuda-graph-max-bs` is fine on 0.5.19
and ambiguous on 0.5.23), so the catalog must be the user's, not ours. Evidence, in
the order it is trusted:

1. `--sglang-version` on our command line;
2. a version the input states (`sglang==0.5.13`, `pip show sglang`);
3. traceback frames: `server_args.py, line 3021, in __post_init__` fits only the
   releases whose `__post_init__` spans line 3021 (catalogs carry these fingerprints);
4. the options argparse's usage text lists, and the logged `server_args` fields: a release that lacks one of them did not log it;
5. the launch flags: argparse accepted every flag it did not complain about, and it
   rejected the ones it did;
6. when nothing above narrowed the choice: the exception messages, placed by each
   release's error catalog (a message reworded later names the releases that print it).

Each clue narrows the shipped releases; the newest one left is chosen (also when
there is no clue at all). A clue that would leave none is set aside: the input may
come from a release we ship no catalog for.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from analyzer.core.model import Frame, Line, ScannedLog, Traceback
from analyzer.sglang.catalog import FlagCatalog, nearest_shipped, version_key
from analyzer.sglang.launch_command import parse_launch_command

if TYPE_CHECKING:
    from analyzer.sglang.error_catalog import ErrorCatalog

REJECTED = (
    re.compile(r"unrecognized arguments: (?P<flags>.+)$"),
    re.compile(r"ambiguous option: (?P<flags>--[\w-]+)"),
)
MIN_SERVER_ARGS_FIELDS = 20
MESSAGE_TRACEBACKS = 3


@dataclass(frozen=True)
class VersionChoice:
    """The catalog version to use, and the evidence in one phrase (`evidence` False: no
    clue narrowed the choice, the newest was taken)."""

    version: str
    reason: str
    evidence: bool = True  # False: the input says nothing of its release (the newest is used)
    by_messages: bool = False  # only the exception messages told the release


@dataclass(frozen=True)
class _Clue:
    """One piece of evidence: the releases it leaves standing, and why."""

    versions: frozenset[str]
    reason: str


def choose_version(
    log: ScannedLog,
    catalogs: Sequence[FlagCatalog],
    forced: str | None = None,
    command: str | None = None,
) -> VersionChoice:
    """The catalog version for one scanned input (`command`: the user's --command)."""
    if forced:
        return _stated(forced, "--sglang-version")
    if log.stated_versions:
        version, line = log.stated_versions[-1]
        return _stated(version, f"stated in the input (line {line.number})")
    launch = [command] if command else [ln.body for ln in log.commands]
    found = [
        _traceback_clue(log, catalogs),
        _usage_clue(log, catalogs),
        _server_args_clue(log, catalogs),
        _flags_clue(launch, _rejected_flags(log), catalogs),
    ]
    choice = narrow(catalogs, [c for c in found if c is not None])
    return choice if choice.evidence else by_messages(choice, log, catalogs)


def by_messages(
    choice: VersionChoice, log: ScannedLog, catalogs: Sequence[FlagCatalog]
) -> VersionChoice:
    """A choice no clue narrowed, narrowed by the input's exception messages (read only
    then: the error catalogs are large, and every other clue is better evidence)."""
    clue = _message_clue(log)
    return replace(narrow(catalogs, [clue]), by_messages=True) if clue else choice


def choose_for_text(
    stated: Sequence[tuple[str, Line]],
    launches: Sequence[str],
    catalogs: Sequence[FlagCatalog],
    forced: str | None = None,
) -> VersionChoice:
    """The same choice for a transcript: what it states, else its launch commands' flags."""
    if forced:
        return _stated(forced, "--sglang-version")
    if stated:
        version, line = stated[-1]
        return _stated(version, f"stated in the transcript (line {line.number})")
    clue = _flags_clue(list(launches), set(), catalogs)
    return narrow(catalogs, [clue] if clue else [])


def narrow(catalogs: Sequence[FlagCatalog], clues: Sequence[_Clue]) -> VersionChoice:
    """Intersect the clues that leave a release standing; the newest remaining wins."""
    left = {c.version for c in catalogs}
    used = []
    for clue in clues:
        narrower = clue.versions & left
        if narrower and narrower != left:
            left = narrower
            used.append(clue.reason)
    newest = max(left, key=version_key)
    if not used:
        return VersionChoice(
            newest, "no version evidence in the input: the newest catalog", evidence=False
        )
    return VersionChoice(newest, "; ".join(used))


def _stated(version: str, where: str) -> VersionChoice:
    chosen = nearest_shipped(version)
    if chosen == version:
        return VersionChoice(chosen, f"sglang {version} {where}")
    return VersionChoice(
        chosen, f"sglang {version} {where}; no catalog for it, using the nearest older one"
    )


def _traceback_clue(log: ScannedLog, catalogs: Sequence[FlagCatalog]) -> _Clue | None:
    """Releases whose source has every fingerprinted frame's function at that line."""
    frames = [f for tb in log.tracebacks for t in (tb, *tb.chain) for f in t.frames]
    known = {name for c in catalogs for name in c.source_lines}
    placed = [(path, f) for f in frames if (path := package_path(f.file)) in known]
    placed = [(path, f) for path, f in placed if f.function != "<module>"]
    if not placed:
        return None
    fits = frozenset(c.version for c in catalogs if all(_fits(c, p, f) for p, f in placed))
    where = f"{placed[-1][0]}:{placed[-1][1].lineno} in {placed[-1][1].function}"
    return _Clue(fits, f"traceback lines fit sglang {_span(fits)} ({where})")


def package_path(file: str) -> str | None:
    """`.../site-packages/sglang/srt/server_args.py` -> `srt/server_args.py`."""
    marker = "/sglang/"
    at = file.replace("\\", "/").rfind(marker)
    return file.replace("\\", "/")[at + len(marker) :] if at >= 0 else None


def _fits(catalog: FlagCatalog, path: str, frame: Frame) -> bool:
    ranges = catalog.source_lines.get(path, {}).get(frame.function)
    if not ranges:
        return False
    for span in ranges.split():
        first, last = span.split("-")
        if int(first) <= frame.lineno <= int(last):
            return True
    return False


def _message_clue(log: ScannedLog) -> _Clue | None:
    """Releases whose error catalog places an exception message of the input's last
    tracebacks (or exception lines alone)."""
    from analyzer.sglang.error_catalog import load_error_catalog, shipped_error_versions

    parts = [
        part
        for traceback in log.tracebacks[-MESSAGE_TRACEBACKS:]
        for part in (traceback, *traceback.chain)
        if part.exception_message.strip()
    ]
    versions = shipped_error_versions()
    if not parts or not versions:
        return None
    if any(_placed(load_error_catalog(versions[-1]), part) for part in parts):
        return None  # the newest places it: it is chosen anyway, the older ones stay unread
    fits = frozenset(
        version
        for version in versions[:-1]
        if any(_placed(load_error_catalog(version), part) for part in parts)
    )
    if not fits:
        return None
    return _Clue(fits, f"the exception message is one sglang {_span(fits)} raises")


def _placed(errors: ErrorCatalog, part: Traceback) -> bool:
    frame = part.last_frame
    message = part.exception_message.strip()
    return bool(errors.place(part.exception_type, message, frame.function if frame else None))


def _usage_clue(log: ScannedLog, catalogs: Sequence[FlagCatalog]) -> _Clue | None:
    """Releases whose parser lists the options argparse's usage text listed (the closest
    match: a usage text cut short lists fewer)."""
    listed = set().union(*(d.options for d in log.usage_dumps))
    if len(listed) < MIN_SERVER_ARGS_FIELDS:
        return None
    score = {c.version: _overlap(listed, _usage_options(c)) for c in catalogs}
    best = max(score.values())
    fits = frozenset(v for v, n in score.items() if n == best)
    return _Clue(fits, f"the usage text argparse printed fits sglang {_span(fits)}")


def _usage_options(catalog: FlagCatalog) -> set[str]:
    """What argparse's usage line shows of each option: its first spelling."""
    return {s.option_strings[0] for s in catalog.specs if s.option_strings}


def _overlap(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b)


def _server_args_clue(log: ScannedLog, catalogs: Sequence[FlagCatalog]) -> _Clue | None:
    """Releases that know the most of the logged ServerArgs fields (some fields have no
    flag in any release, so the fewest unknown, not none)."""
    fields = set(log.server_args or ())
    if len(fields) < MIN_SERVER_ARGS_FIELDS:
        return None
    unknown = {c.version: len([f for f in fields if c.by_dest(f) is None]) for c in catalogs}
    best = min(unknown.values())
    fits = frozenset(v for v, n in unknown.items() if n == best)
    return _Clue(fits, f"logged server_args fields fit sglang {_span(fits)}")


def _rejected_flags(log: ScannedLog) -> set[str]:
    """Flags argparse itself said it rejected (unrecognized, ambiguous)."""
    lines = [d.error for d in log.usage_dumps if d.error] + list(log.candidates)
    rejected: set[str] = set()
    for line in lines:
        for pattern in REJECTED:
            found = pattern.search(line.body)
            if found:
                rejected.update(w.split("=", 1)[0] for w in found["flags"].split() if w[:2] == "--")
    return rejected


def _flags_clue(
    launches: list[str], rejected: set[str], catalogs: Sequence[FlagCatalog]
) -> _Clue | None:
    """Releases that accept every flag of the launch argparse did not reject, and do not
    know the rejected ones by their full name."""
    typed = _typed_flags(launches, catalogs[-1].takes_value)
    if not typed and not rejected:
        return None
    fits = frozenset(
        c.version
        for c in catalogs
        if all(c.resolve(f).kind != "unknown" for f in typed - rejected)
        and all(c.resolve(f).kind not in ("exact", "alias") for f in rejected)
    )
    return _Clue(fits, f"the launch flags fit sglang {_span(fits)}")


def _typed_flags(launches: list[str], takes_value: Callable[[str], bool | None]) -> set[str]:
    flags: set[str] = set()
    for text in launches:
        command = parse_launch_command(text, takes_value)
        if command is not None:
            flags.update(a.flag for a in command.arguments if a.flag.startswith("--"))
    return flags


def _span(versions: frozenset[str]) -> str:
    ordered = sorted(versions, key=version_key)
    if not ordered:
        return "no shipped release"
    return ", ".join(ordered)
