"""Which flags are to blame, and why: the one answer every incident takes its flags from.

From a finding (or a traceback no rule explains), its evidence (the traceback, the SGLang
site that raised it, the lines that show flags set), the launch command and the catalog:
the finding's own flags, those whose code path failed (fault_flags.py), the features the
traceback ran through (features.py), the flags its exception message spells and those the
raise site reads (link.py), merged in one order per kind of finding. The reasons are the
evidence sentences `Blame.reasons` adds to the incident's explanation.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from analyzer.blame.fault_flags import fault_flags
from analyzer.blame.guarded_frames import possibly_set, with_evidence
from analyzer.blame.link import canonical_flag, exception_flags, reported_flags, site_flags
from analyzer.blame.loading_blame import loading_flags
from analyzer.sglang.features import traceback_flags

if TYPE_CHECKING:
    from analyzer.blame.flags_shown import FlagsShown
    from analyzer.blame.raise_sites import FoundSite
    from analyzer.core.model import Finding, Match, Traceback
    from analyzer.sglang.catalog import FlagCatalog
    from analyzer.sglang.launch_command import LaunchCommand


@dataclass(frozen=True)
class Blame:
    """The offending flags of one incident, and the evidence that names them."""

    flags: list[str]  # as the report writes them (reported_flags)
    faulty: list[str]  # the set flags whose code path failed: the frames and lines say why
    traceback: Traceback | None
    catalog: FlagCatalog
    command: LaunchCommand | None
    shown: FlagsShown | None

    def reasons(self, explanation: str) -> str:
        """The explanation, with the lines and the guarded frames that showed the faulty
        flags set."""
        return with_evidence(
            explanation, self.faulty, self.traceback, self.catalog, self.command, self.shown
        )


def attribute(
    finding: Finding | None,
    traceback: Traceback | None,
    command: LaunchCommand | None,
    catalog: FlagCatalog,
    shown: FlagsShown | None = None,
    site: FoundSite | None = None,
    rule_flags: Iterable[str] = (),
    proposed: Iterable[str] = (),
    code_paths: bool = True,
    loading: Iterable[str] | None = None,
) -> Blame:
    """The flags to blame for `finding` (None: the traceback no rule explains).

    A rule's finding: the flags its message names (not the rule's fixed `rule_flags`), then
    those whose code path failed that the user set (`code_paths`: also the feature code
    paths), then its own and the `proposed` fix's (often its advice: --disable-cuda-graph
    for any capture failure), the features the traceback ran through, the flags the
    exception message spells and those the raise `site` reads. A traceback no rule
    explains: with a site, the site's flags first; without one, the message's first.
    A loading failure (`loading`: its evidence lines) blames the path that failed, not the
    sizes its frames passed through (loading_blame.py).
    """
    faulty = fault_flags(traceback, catalog, command, code_paths, shown)
    ran = traceback_flags(traceback, possibly_set(command, catalog))
    named = exception_flags(traceback, catalog, command)
    blamed = site_flags(site.site, catalog, command) if site is not None else []
    if finding is not None:
        fixed = {canonical_flag(f, catalog) for f in rule_flags}
        first = [f for f in finding.flags if f not in fixed]
        order = [first, faulty, [*finding.flags, *proposed], ran, named, blamed]
    elif site is None:
        order = [named, faulty, ran]
    else:
        order = [blamed, faulty, ran, named]
    flags: list[str] = []
    for part in order:
        flags.extend(f for f in part if f not in flags)
    if loading is not None:
        flags = loading_flags(flags, {*faulty, *ran}, loading, command)
    return Blame(reported_flags(flags, catalog), faulty, traceback, catalog, command, shown)


def raise_site(match: Match, version: str, named_release: str | None = None) -> FoundSite | None:
    """The SGLang site that raised the exception a traceback rule matched."""
    traceback = match.traceback
    if traceback is None:
        return None
    # imported here: a log without a traceback never loads an error catalog
    from analyzer.blame.raise_sites import error_catalog_for, find_site

    errors = error_catalog_for(version)
    if errors is None:
        return None
    parts = (traceback, *traceback.chain)
    part = next((p for p in parts if p.exception_line == match.line), traceback)
    return _in_release(find_site(part, errors), named_release)


def unexplained_site(
    traceback: Traceback, version: str, named_release: str | None = None
) -> FoundSite | None:
    """The SGLang site that raised a traceback no rule explains (or a cause it chains)."""
    from analyzer.blame.raise_sites import error_catalog_for, find_site_in_chain

    errors = error_catalog_for(version)
    found = find_site_in_chain(traceback, errors) if errors else None
    return _in_release(found, named_release)


def _in_release(found: FoundSite | None, named_release: str | None) -> FoundSite | None:
    """`found`, placed in the release that only the input's exception messages told."""
    if found is not None and named_release:
        return replace(found, release=named_release)
    return found
