"""Raise-site families as data: which class an error raised at a mined SGLang site has.

`analyzer/catalogs/raise_sites.toml` (beside the error catalogs it annotates) maps
families of sites (file globs, function globs, exception types, a message shape) to a
class, a title and advice. The first family that fits a
site wins. The hand rules beside it win wherever they match; a family classifies the
errors no rule recognises.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fnmatch import fnmatchcase
from functools import cache
from typing import TYPE_CHECKING, Any

from analyzer.core.model import SEVERITIES
from analyzer.rulebook.vocabulary import FAMILY_RULE_PREFIX, catalog_entries

if TYPE_CHECKING:
    from analyzer.sglang.error_catalog import ErrorSite

FAMILIES_PACKAGE, FAMILIES_FILE = "analyzer.catalogs", "raise_sites.toml"
KNOWN_KEYS = {
    "id", "class", "title", "severity", "files", "functions", "exceptions", "message",
    "condition", "flagless", "advice", "cases",
}  # fmt: skip


@dataclass(frozen=True)
class FamilyCase:
    """A site of a shipped release (`srt/x.py:LINE`) the family must (not) claim."""

    version: str
    site: str
    fires: bool


@dataclass(frozen=True)
class SiteFamily:
    """Raise sites (by file, function, exception type, message) that share one class."""

    id: str
    rule_class: str
    title: str
    severity: str = "fatal"
    files: tuple[str, ...] = ()
    functions: tuple[str, ...] = ()
    exceptions: tuple[str, ...] = ()
    message: re.Pattern[str] | None = None
    # a regex searched in the site's guarding condition; `flagless`: the site reads no flag
    condition: re.Pattern[str] | None = None
    flagless: bool = False
    advice: tuple[str, ...] = ()
    cases: tuple[FamilyCase, ...] = ()

    @property
    def rule_id(self) -> str:
        """The `rule` an incident classified by this family reports."""
        return f"{FAMILY_RULE_PREFIX}{self.id}"

    def fits(self, site: ErrorSite) -> bool:
        function = site.function.rsplit(".", 1)[-1]
        return (
            (not self.files or any(glob_path(site.file, f) for f in self.files))
            and (not self.functions or any(fnmatchcase(function, f) for f in self.functions))
            and (not self.exceptions or site.exception in self.exceptions)
            and (self.message is None or self.message.search(site.message) is not None)
            and (self.condition is None or self.condition.search(site.condition) is not None)
            and not (self.flagless and (site.flags or site.condition_flags or site.context_flags))
        )


def glob_path(path: str, pattern: str) -> bool:
    """fnmatch where `**/` also matches no folder at all."""
    return fnmatchcase(path, pattern) or fnmatchcase(path, pattern.replace("**/", ""))


@cache
def site_families() -> tuple[SiteFamily, ...]:
    """The shipped families, in the order they are tried (raises RuleError when malformed)."""
    return catalog_entries(FAMILIES_PACKAGE, FAMILIES_FILE, "family", _family)


def family_of(site: ErrorSite) -> SiteFamily | None:
    """The first family that fits the site, or None."""
    return next((f for f in site_families() if f.fits(site)), None)


def _family(data: dict[str, Any]) -> SiteFamily:
    unknown = sorted(set(data) - KNOWN_KEYS)
    if unknown:
        raise ValueError(f"unknown key(s) {', '.join(unknown)}")
    severity = data.get("severity", "fatal")
    if severity not in SEVERITIES:
        raise ValueError(f"severity must be one of {', '.join(SEVERITIES)}")
    message = data.get("message")
    condition = data.get("condition")
    return SiteFamily(
        id=str(data["id"]),
        rule_class=str(data["class"]),
        title=str(data["title"]),
        severity=severity,
        files=string_list(data, "files"),
        functions=string_list(data, "functions"),
        exceptions=string_list(data, "exceptions"),
        message=re.compile(message) if message else None,
        condition=re.compile(condition) if condition else None,
        flagless=bool(data.get("flagless", False)),
        advice=string_list(data, "advice"),
        cases=tuple(
            FamilyCase(str(c["version"]), str(c["site"]), bool(c["fires"]))
            for c in data.get("cases", [])
        ),
    )


def string_list(data: dict[str, Any], key: str) -> tuple[str, ...]:
    value = data.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{key!r} must be a list of strings")
    return tuple(value)


@dataclass(frozen=True)
class Coverage:
    """Of a release's catalog entries, how many a family classes and how many of those
    also name at least one flag (in the condition or the message)."""

    entries: int
    classed: int
    classed_with_flag: int

    @property
    def share(self) -> float:
        return self.classed_with_flag / self.entries if self.entries else 0.0


def coverage(entries: tuple[ErrorSite, ...]) -> Coverage:
    """One release's row of the raise-site family table in docs/blame.md."""
    classed = [s for s in entries if family_of(s) is not None]
    return Coverage(len(entries), len(classed), len([s for s in classed if s.flags]))
