"""SGLang's flag-on lines: messages a release logs only when a flag is set.

`analyzer/sglang/flag_lines_build.py` mines them from each release's source into
`catalogs/flaglines-VERSION.json`; this module loads one (on first use, once) and tells which
flags a log line shows on. A log of a release older than every shipped map is read with the
oldest one, as the code-path map is (sglang/code_paths.py). A log that says nothing of its
release is read with the messages at least two shipped releases log under the same guard
(their flags those all of them agree on): a message one release guards may be logged
unguarded by another, and one guarded alike across releases is the least likely to be.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

from analyzer.core import bounded_json
from analyzer.sglang.catalog import version_key

CATALOG_PACKAGE = "analyzer.catalogs"
PREFIX, SUFFIX = "flaglines-", ".json"
WILDCARD = r"[^\n]*?"


@dataclass(frozen=True)
class FlagLine:
    """One message: the flags it shows on, its matcher, its longest literal piece (the
    anchor a line must hold before the matcher runs) and the SGLang site that logs it."""

    flags: tuple[str, ...]
    pattern: str
    anchor: str
    site: str

    def matches(self, text: str) -> bool:
        return _compiled(self.pattern).search(text) is not None


@cache
def _compiled(pattern: str) -> re.Pattern[str]:
    """Compiled on the first line holding its anchor: most are never needed."""
    return re.compile(pattern)


class FlagLines:
    def __init__(self, version: str, entries: list[FlagLine]) -> None:
        self.version = version
        self.entries = entries
        self.by_anchor: dict[str, list[FlagLine]] = {}
        for entry in entries:
            self.by_anchor.setdefault(entry.anchor, []).append(entry)

    @property
    def anchors(self) -> list[str]:
        return sorted(self.by_anchor)

    def flags_shown(self, text: str) -> list[FlagLine]:
        """The messages a line is (an empty list for almost every line)."""
        return [
            entry
            for anchor, entries in self.by_anchor.items()
            if anchor in text
            for entry in entries
            if entry.matches(text)
        ]


def _entry(data: dict) -> FlagLine:
    pieces = [p if isinstance(p, str) else None for p in data["pieces"]]
    pattern = "".join(WILDCARD if p is None else re.escape(p) for p in pieces)
    anchor = max((p for p in pieces if p is not None), key=len)
    return FlagLine(tuple(data["flags"]), pattern, anchor, data.get("site", ""))


@cache
def shipped_flag_line_versions() -> tuple[str, ...]:
    names = [p.name for p in resources.files(CATALOG_PACKAGE).iterdir()]
    found = [
        n[len(PREFIX) : -len(SUFFIX)] for n in names if n.startswith(PREFIX) and n.endswith(SUFFIX)
    ]
    return tuple(sorted(found, key=version_key))


@cache
def flag_lines_for(version: str | None) -> FlagLines | None:
    """The flag-on lines of `version` (its own, else the nearest older, else the oldest);
    for None (the release is unknown) those shared by two shipped releases or more."""
    versions = shipped_flag_line_versions()
    if not versions:
        return None
    if version is None:
        return _shared(versions)
    chosen = version
    if version not in versions:
        older = [v for v in versions if version_key(v) <= version_key(version)]
        chosen = older[-1] if older else versions[0]
    data = _load(chosen)
    if data is None:
        return None
    try:
        return FlagLines(chosen, [_entry(e) for e in data])
    except (KeyError, ValueError, re.error):
        return None


def _shared(versions: tuple[str, ...]) -> FlagLines | None:
    flags: dict[tuple, set[str]] = {}
    seen: dict[tuple, int] = {}
    first: dict[tuple, dict] = {}
    for version in versions:
        for entry in _load(version) or []:
            key = tuple(p if isinstance(p, str) else None for p in entry["pieces"])
            flags[key] = flags[key] & set(entry["flags"]) if key in flags else set(entry["flags"])
            seen[key] = seen.get(key, 0) + 1
            first.setdefault(key, entry)
    shared = [
        {**first[key], "flags": sorted(flags[key])}
        for key in sorted(first, key=repr)
        if seen[key] >= 2 and flags[key]
    ]
    try:
        return FlagLines("shared", [_entry(e) for e in shared])
    except (KeyError, ValueError, re.error):
        return None


def _load(version: str) -> list[dict] | None:
    path = resources.files(CATALOG_PACKAGE).joinpath(f"{PREFIX}{version}{SUFFIX}")
    try:
        return bounded_json.loads(path.read_text("utf-8"))["entries"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
