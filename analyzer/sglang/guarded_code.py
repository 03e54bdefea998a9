"""SGLang's flag-guarded code: the functions a release runs only when a flag is set.

`analyzer/sglang/guarded_code_build.py` mines them from each release's source into
`catalogs/guarded-VERSION.json`; this module loads them (on first use, once) and answers
`guards(frame_file, function)`: the ways that function comes to run, each the flag values it
needs and the SGLang site whose guard gives them. A log of a known release is read with its
own map (else the nearest older, else the oldest); a log that says nothing of its release
with the newest map that lists the function's file (a function's guard outlives its line
numbers; a file listed without the function says that release runs it unguarded).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from analyzer.core import bounded_json
from analyzer.core.package_files import package_files
from analyzer.sglang.catalog import version_key

CATALOG_PACKAGE = "analyzer.catalogs"
PREFIX, SUFFIX = "guarded-", ".json"
SRT = "sglang/srt/"


@dataclass(frozen=True)
class Need:
    """A value a flag must have: op in truthy, falsy, none, not_none, eq, ne, in, not_in,
    gt, ge, lt, le (value: the constant compared with)."""

    flag: str
    op: str
    value: Any = None


@dataclass(frozen=True)
class Guard:
    """One way a function comes to run: the flag values it needs, the guard's site, and
    the release whose map told it."""

    needs: tuple[Need, ...]
    site: str
    release: str

    @property
    def flags(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(n.flag for n in self.needs))


class GuardedCode:
    """`files`: `srt/...py` -> function -> its guards, for the releases consulted in order."""

    def __init__(self, maps: list[tuple[str, dict[str, dict[str, list[dict]]]]]) -> None:
        self.maps = maps

    def guards(self, frame_file: str, function: str) -> list[Guard]:
        """The guards of the function a traceback frame names (none: it runs unguarded, or
        lies outside sglang/srt)."""
        path = frame_file.replace("\\", "/")
        at = path.rfind(SRT)
        if at < 0:
            return []
        rel = path[at + len("sglang/") :]
        for release, files in self.maps:
            if rel in files:  # the newest release that guards any of the file's code decides
                return [_guard(e, release) for e in files[rel].get(function, [])]
        return []


def _guard(entry: dict, release: str) -> Guard:
    needs = tuple(
        Need(flag, op, tuple(value) if isinstance(value, list) else value)
        for flag, op, value in entry["needs"]
    )
    return Guard(needs, entry["site"], release)


@cache
def shipped_guarded_versions() -> tuple[str, ...]:
    names = [p.name for p in package_files(CATALOG_PACKAGE).iterdir()]
    found = [
        n[len(PREFIX) : -len(SUFFIX)] for n in names if n.startswith(PREFIX) and n.endswith(SUFFIX)
    ]
    return tuple(sorted(found, key=version_key))


@cache
def _load(version: str) -> dict[str, dict[str, list[dict]]]:
    path = package_files(CATALOG_PACKAGE).joinpath(f"{PREFIX}{version}{SUFFIX}")
    try:
        return bounded_json.loads(path.read_text("utf-8"))["files"]
    except (OSError, ValueError, KeyError):
        return {}


@cache
def guarded_code_for(version: str | None) -> GuardedCode | None:
    """The map of `version` (its own, else the nearest older, else the oldest shipped); with
    no version, every shipped map, the newest first."""
    versions = shipped_guarded_versions()
    if not versions:
        return None
    if version is None:
        chosen = list(reversed(versions))
    elif version in versions:
        chosen = [version]
    else:
        older = [v for v in versions if version_key(v) <= version_key(version)]
        chosen = [older[-1] if older else versions[0]]
    return GuardedCode([(v, _load(v)) for v in chosen])
