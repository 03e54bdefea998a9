"""Flag history across the shipped catalogs: when a flag left SGLang, when one arrived.

A flag that argparse rejects is often not a typo but a version mismatch: the user
learned `--cuda-graph-max-bs` on 0.5.19 and runs 0.5.23, or copied a 0.5.23 command
onto an older install. Comparing the shipped catalogs (each built from that
release's own parser) tells which, and a setting that kept its ServerArgs field
(`dest`) under a new name is a rename we can apply. Shipped catalogs are sparse, so
a change is dated as "between the last release that had it and the first that did
not", never to a release we have not seen.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache

from analyzer.core.package_files import package_files
from analyzer.sglang.catalog import (
    CATALOG_PACKAGE,
    FlagCatalog,
    FlagSpec,
    all_catalogs,
    version_key,
)

KNOWN = ("exact", "alias")
# SGLang's deprecation help: "[Deprecated] Use --x instead.", "Deprecated. Use --x=v instead.",
# "(Deprecated: use --x=auto) ...", "... is deprecated now. Please use --x instead."
SUCCESSOR = re.compile(
    r"(?i)(?P<lead>^\W*deprecated\W+)?\buse\s+[`'\"]?(?P<flag>--[a-z0-9]+(?:-[a-z0-9]+)*)"
    r"(?:[= ](?P<value>(?!instead\b)[A-Za-z0-9_.]*[A-Za-z0-9_]))?[`'\"]?(?P<instead>\s+instead)?"
)
SAME_HELP_WORDS = 4  # a help text this long, word for word, is one setting's
CHAIN = 4  # successors followed through releases at most


@dataclass(frozen=True)
class FlagVersionChange:
    """How a flag unknown to the catalog in use relates to the other shipped releases.

    `kind` "removed": `last_seen` still had it, `gone_in` (the next shipped) did not.
    `kind` "added": `first_seen` is the oldest shipped release that has it, `gone_in`
    the newest shipped one before it that does not.
    `kind` "unlisted": the catalog in use is the user's usage text (a release the shipped
    ones cannot place), and the shipped releases `first_seen` to `last_seen` have it.
    `replacement` is the option of the catalog in use that sets the same field, or the one
    a deprecation help text names as its successor (`value`: the value it names with it).
    """

    flag: str
    kind: str
    replacement: str | None
    last_seen: str | None = None
    gone_in: str | None = None
    first_seen: str | None = None
    value: str | None = None

    def explain(self, current: str) -> str:
        """One sentence for the advice, naming only flags of the catalog in use."""
        same = f"; use {self.replacement} (the same setting)" if self.replacement else ""
        if self.replacement and self.value is not None:
            same = f"; use {self.replacement} {self.value} (its deprecation names it)"
        if self.kind == "unlisted":
            return (
                f"{self.flag} is an option of sglang {self.first_seen}-{self.last_seen}, but "
                "the usage text of this release does not list it"
                + (same or ", nor an option for the same setting: no rename is offered")
            )
        if self.kind == "removed":
            return f"{self.flag} was removed between sglang {self.last_seen} and {self.gone_in}" + (
                same or f": sglang {current} has no option for that setting"
            )
        there = (
            f"; in sglang {current} the same setting is {self.replacement}"
            if self.replacement
            else ""
        )
        return (
            f"{self.flag} is new in sglang {self.first_seen} (absent from {self.gone_in}): "
            f"sglang {current} does not have it{there}"
        )


class FlagHistory:
    """Lookups over every shipped catalog, oldest first."""

    def __init__(self, catalogs: list[FlagCatalog]) -> None:
        self.catalogs = sorted(catalogs, key=lambda c: version_key(c.version))

    def change(self, typed: str, current: FlagCatalog) -> FlagVersionChange | None:
        """Why `typed` is not an option of `current`, if another shipped release knows it."""
        flag = typed.split("=", 1)[0]
        if current.resolve(flag).kind in KNOWN:
            return None
        if current.from_usage:
            knowing = [c for c in self.catalogs if _knows(c, flag)]
            if not knowing:
                return None
            spec = knowing[-1].resolve(flag).spec
            replacement = _same_setting(spec, knowing[-1], current)
            first, last = knowing[0].version, knowing[-1].version
            return FlagVersionChange(flag, "unlisted", replacement, last, first_seen=first)
        here = version_key(current.version)
        older = [c for c in self.catalogs if version_key(c.version) < here]
        newer = [c for c in self.catalogs if version_key(c.version) > here]
        last = next((c for c in reversed(older) if _knows(c, flag)), None)
        if last is not None:
            gone = next((c for c in self.catalogs if _after(c, last)), current)
            spec = last.resolve(flag).spec
            replacement, value = _same_setting(spec, last, current), None
            if replacement is None:
                replacement, value = self.successor(flag, current)
            return FlagVersionChange(
                flag, "removed", replacement, last.version, gone.version, value=value
            )
        first = next((c for c in newer if _knows(c, flag)), None)
        if first is not None:
            before = [
                c for c in self.catalogs if version_key(c.version) < version_key(first.version)
            ]
            spec = first.resolve(flag).spec
            return FlagVersionChange(
                flag,
                "added",
                _same_setting(spec, first, current),
                first_seen=first.version,
                gone_in=before[-1].version if before else current.version,
            )
        return None

    def successor(
        self, flag: str, current: FlagCatalog, depth: int = CHAIN
    ) -> tuple[str | None, str | None]:
        """The option of `current` that took over a removed flag's job: the one its
        deprecation help names (followed through later renames), else the one option whose
        help says word for word what its help said. With the value the help names."""
        for catalog in reversed(self.catalogs):
            spec = catalog.resolve(flag).spec
            if spec is None or catalog.resolve(flag).kind not in KNOWN:
                continue
            said = deprecations().get(catalog.version, {})
            named = _named_successor(said.get(flag) or said.get(spec.long) or spec.help)
            if named is not None and depth > 0:
                target, value = named
                found = current.resolve(target)
                if found.kind in KNOWN and found.spec is not None:
                    fits = (
                        found.spec.takes_value == spec.takes_value
                        if value is None
                        else (current.check_value(found.spec.long, value) is None)
                    )
                    if fits:
                        return found.spec.long, value
                later = self.successor(target, current, depth - 1)
                if later[0] is not None:
                    return later[0], later[1] or value
            same = _same_help(spec, current)
            if same is not None:
                return same, None
        return None, None

    def spelling(self, flag: str, current: FlagCatalog) -> str:
        """`flag` as the newest shipped release writes the option, when `current` accepts
        that spelling too: 0.5.6.post2-0.5.13 list `--tensor-parallel-size` first, 0.5.23
        `--tp-size`, so one option is reported under one name whichever release logged it."""
        spec = current.resolve(flag).spec
        if spec is None:
            return flag
        newest = self.catalogs[-1] if self.catalogs else current
        for option in spec.option_strings:
            found = newest.resolve(option)
            if found.kind in KNOWN and found.spec and found.spec.long in spec.option_strings:
                return found.spec.long
        return spec.long

    def meant(self, typed: str) -> list[str]:
        """The options a spelling argparse rejected names in the shipped releases: itself
        in another release (an alias there), or its dashed form (`--reasoning_parser`),
        each as the newest release that has it writes it; the typed spelling left out."""
        flag = typed.split("=", 1)[0]
        found: list[str] = []
        for spelling in dict.fromkeys((flag, flag.replace("_", "-"))):
            for catalog in reversed(self.catalogs):
                resolution = catalog.resolve(spelling)
                if resolution.kind in KNOWN and resolution.spec is not None:
                    found.append(self.spelling(resolution.spec.long, catalog))
                    break
        return [f for f in dict.fromkeys(found) if f != flag]


def _knows(catalog: FlagCatalog, flag: str) -> bool:
    return catalog.resolve(flag).kind in KNOWN


def _after(catalog: FlagCatalog, last: FlagCatalog) -> bool:
    return version_key(catalog.version) > version_key(last.version)


def _same_setting(spec: FlagSpec | None, source: FlagCatalog, current: FlagCatalog) -> str | None:
    """The option of `current` for the same ServerArgs field, used the same way.

    The same field (`dest`) first, else an alias both releases share (a rename that kept
    the old spelling for a while). A switch that became a valued option (or back) is not
    a rename we can apply blindly.
    """
    if spec is None:
        return None
    targets = [current.by_dest(spec.dest)]
    targets += [current.resolve(option).spec for option in source.spellings(spec.dest)]
    for target in targets:
        if target is not None and target.takes_value == spec.takes_value:
            return target.long
    return None


@cache
def deprecations() -> dict[str, dict[str, str]]:
    """Per release, a retired flag's deprecation text (analyzer/sglang/flag_successors_build.py)."""
    path = package_files(CATALOG_PACKAGE).joinpath("flag_successors.json")
    try:
        return json.loads(path.read_text("utf-8")).get("releases", {})
    except (OSError, ValueError):
        return {}


def _named_successor(help_text: str) -> tuple[str, str | None] | None:
    for found in SUCCESSOR.finditer(help_text):
        if found["lead"] is not None or found["instead"] is not None:
            return found["flag"], found["value"]
    return None


def _same_help(spec: FlagSpec, current: FlagCatalog) -> str | None:
    text = " ".join(spec.help.split())
    if len(text.split()) < SAME_HELP_WORDS:
        return None
    same = {
        s.long
        for s in current.specs
        if " ".join(s.help.split()) == text and s.takes_value == spec.takes_value
    }
    return same.pop() if len(same) == 1 else None


@cache
def shipped_history() -> FlagHistory:
    """The history over the catalogs shipped in this package."""
    return FlagHistory(all_catalogs())
