"""From an exception to the SGLang statement that raised it (the error catalog's site).

An exception line is looked up by its message (`ErrorCatalog.place`: one Aho-Corasick
pass over the release's literals, patterns compiled on first use; an older release's
shorter form of a message read with the raising frame's function); a message the catalog
cannot place (a bare `AssertionError`, `raise ValueError(msg)`) by the traceback's
innermost frame, whose file and line are release-specific (`ErrorCatalog.site_at`). A
traceback may have no frames at all (an exception line alone): then only the message
speaks; one with frames is placed by its message only at a site in its innermost frame's
file. The site's family (analyzer/catalogs/raise_sites.toml) gives a class when no rule does.
"""

from __future__ import annotations

from dataclasses import dataclass

from analyzer.core.model import RaiseSite, Traceback
from analyzer.engine.paste_shapes import opened_body
from analyzer.rulebook.raise_site_rules import SiteFamily, family_of
from analyzer.sglang.error_catalog import (
    ErrorCatalog,
    ErrorCatalogError,
    ErrorSite,
    load_error_catalog,
)

# a condition is quoted up to this length in an explanation (the JSON keeps it whole)
QUOTED_CONDITION = 240


@dataclass(frozen=True)
class FoundSite:
    """The catalog entry an exception came from, how it was found, and its family."""

    site: ErrorSite
    family: SiteFamily | None
    found_by: str  # "message" | "frame"
    release: str | None = None  # named when only the message told which release raised it

    @property
    def where(self) -> str:
        """`sglang/srt/arg_groups/speculative_hook.py:1160 in _handle_eagle_family`."""
        return f"sglang/{self.site.file}:{self.site.line} in {self.site.function}"

    def reported(self) -> RaiseSite:
        site = self.site
        return RaiseSite(f"sglang/{site.file}", site.line, site.function, site.condition)

    def sentence(self) -> str:
        """One sentence for an explanation: the site and the condition that failed."""
        condition = self.site.condition
        if len(condition) > QUOTED_CONDITION:
            condition = condition[: QUOTED_CONDITION - 3] + "..."
        where = f"{self.where} (sglang {self.release}'s source)" if self.release else self.where
        if not condition:
            return f"Raised at {where}."
        if self.site.kind == "assert":
            return f"Raised at {where}: the assertion `{condition}` failed."
        return f"Raised at {where}, because `{condition}`."


def error_catalog_for(version: str | None) -> ErrorCatalog | None:
    """The error catalog of the input's release (nearest older when it has none), or
    None when no shipped catalog is that old."""
    try:
        return load_error_catalog(version)
    except ErrorCatalogError:
        return None


def find_site(traceback: Traceback, errors: ErrorCatalog) -> FoundSite | None:
    """The site that raised this traceback's exception (not its chained causes)."""
    frame = traceback.last_frame
    message = traceback.exception_message.strip()
    if message:
        found = errors.place(traceback.exception_type, message, frame.function if frame else None)
        if not found and frame is None:
            found = errors.cut_short(message)  # the message alone, cut short by its paste
        if frame is not None:
            # the innermost frame is where it was raised: a site in another file has the
            # same words (Python's own "module 'x' has no attribute 'y'"), not this error
            found = [s for s in found if _same_file(frame.file, s.file)]
            if not found and (body := opened_body(message.split("\n", 1)[0])) is not None:
                # a client's exception relaying the server's error body: the server raised it
                found = errors.place(None, body) or errors.cut_short(body)
                frame = None
        if found:
            spanning = [s for s in found if s.line <= frame.lineno <= s.end_line] if frame else []
            site = (spanning or found)[0]
            return FoundSite(site, family_of(site), "message")
    if frame is None:
        return None
    site = errors.site_at(frame.file, frame.lineno, frame.function)
    if site is None:
        return None
    return FoundSite(site, family_of(site), "frame")


def find_site_in_chain(traceback: Traceback, errors: ErrorCatalog) -> FoundSite | None:
    """The site of the final exception, else of the latest chained cause that has one."""
    for part in (traceback, *reversed(traceback.chain)):
        found = find_site(part, errors)
        if found is not None:
            return found
    return None


def _same_file(frame_file: str, site_file: str) -> bool:
    return frame_file.replace("\\", "/").endswith("sglang/" + site_file)
