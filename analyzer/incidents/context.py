"""What every stage of one run reads: the user's options, the rules, the flag catalog."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from analyzer.blame.flags_shown import FlagsShown
from analyzer.core.model import InputSummary
from analyzer.rulebook.vocabulary import Rule
from analyzer.sglang.catalog import FlagCatalog, load_catalog
from analyzer.sglang.releases import VersionChoice


@dataclass
class Options:
    """What the user asked for on the command line."""

    rules_dirs: list[str] = field(default_factory=list)
    command: str | None = None
    sglang_version: str | None = None
    redact: bool = True
    simple_scan: bool = False
    input_format: str | None = None  # auto | log | opencode | claude | codex | text
    verify: bool = False  # ask the installed SGLang about every corrected command
    session: str | None = None  # the opencode session to read (default: the one active last)


@dataclass
class Context:
    """What every stage of one run reads: the rules, the flag catalog, the options."""

    rules: list[Rule]
    by_id: dict[str, Rule]
    catalog: FlagCatalog
    options: Options
    named_release: str | None = None  # a release only exception messages told: named in sites
    shown: FlagsShown | None = None  # the flags the input's lines show on (no command known)


def with_catalog(context: Context, summary: InputSummary, choice: VersionChoice) -> Context:
    summary.catalog_version, summary.catalog_reason = choice.version, choice.reason
    named = choice.version if choice.by_messages else None
    if choice.version == context.catalog.version:
        return replace(context, named_release=named)
    return replace(context, catalog=load_catalog(choice.version), named_release=named)
