"""Stage 4: link each match to SGLang's flags and fill in the rule's text.

Flags come from the rule (fixed) or from a named group (argparse's leftovers,
a failing assert's source line). Typed names, aliases, prefixes and ServerArgs
field names all become SGLang's canonical long option via the catalog; a flag
the catalog does not know (an unrecognized one) is kept as the user typed it.
"""

from __future__ import annotations

import re
import string
from dataclasses import replace
from typing import TYPE_CHECKING

from analyzer.core.model import Finding, Match, Traceback
from analyzer.rulebook.vocabulary import Advice, Rule
from analyzer.sglang.catalog import FlagCatalog
from analyzer.sglang.features import phrase_flags
from analyzer.sglang.flag_history import shipped_history

if TYPE_CHECKING:
    from analyzer.sglang.error_catalog import ErrorSite
    from analyzer.sglang.launch_command import LaunchCommand

# with no command to compare against, a site names at most this many flags
UNKNOWN_COMMAND_FLAGS = 3

# stdlib re: these need nothing of `regex`, and compile in a third of the time at start-up
TOKEN = re.compile(r"(?<![\w/.-])--?[A-Za-z][\w-]*|(?<![\w/.-])[a-z]+(?:_[a-z0-9]+)+\b")


def link(match: Match, rule: Rule, catalog: FlagCatalog) -> Finding:
    """Turn a match into a Finding with canonical flags and filled-in text."""
    groups = match.groups
    return Finding(
        match=match,
        rule_class=rule.rule_class,
        title=_fill(rule.title, groups),
        severity=rule.severity,
        flags=linked_flags(rule, groups, catalog),
        explanation=_fill(rule.explanation, groups),
        advice=[_fill(a.text, groups) for a in rule.advice if _applies(a, groups)],
        priority=rule.priority,
    )


def linked_flags(rule: Rule, groups: dict[str, str], catalog: FlagCatalog) -> list[str]:
    """The rule's fixed flags, then those named in its flags group (as flags, ServerArgs
    fields or the features SGLang's messages name), canonical and unique."""
    names = list(rule.flags)
    if rule.flags_group:
        text = groups.get(rule.flags_group, "")
        names.extend(TOKEN.findall(text))
        names.extend(_phrase_dests(text, catalog))
        names.extend(phrase_flags(text))
    flags: list[str] = []
    for name in names:
        flag = canonical_flag(name, catalog)
        if flag and flag not in flags:
            flags.append(flag)
    return flags


def site_flags(site: ErrorSite, catalog: FlagCatalog, command: LaunchCommand | None) -> list[str]:
    """The flags a raise site blames, canonical.

    With the launch command: those the condition or the message read that the command
    sets (a flag left at its default did not cause the error; a reconstructed command
    holds only the values that differ from the default). The enclosing guards' flags are
    left out: the ones set only enable the check (`speculative_algorithm in (...)`), and
    the ones that name a missing flag are not set. Without the command: the condition's
    own flags, else the message's, at most a few.
    """
    condition = _canonical_all(site.condition_flags, catalog)
    if command is None:
        picked = condition or _canonical_all(site.flags, catalog)
        return picked[:UNKNOWN_COMMAND_FLAGS]
    given = set(_canonical_all(command.flags(), catalog))
    candidates = _canonical_all((*site.condition_flags, *site.flags), catalog)
    return [flag for flag in candidates if flag in given]


def exception_flags(
    traceback: Traceback | None, catalog: FlagCatalog, command: LaunchCommand | None
) -> list[str]:
    """The flags a traceback's exception messages (its chained causes' too) spell.

    SGLang's runtime messages name the setting at fault in three ways: as the option
    (`Not enough memory. Please try to increase --mem-fraction-static.`,
    distributed/bootstrap.py: `--enable-tp-lm-head-all-to-all requires ...`), as the
    ServerArgs field (`len(partitions)=... does not match pp_size=...`,
    distributed/utils.py get_pp_indices) or in prose (`... divisible by TP size`,
    `longer than the model's context length`). An option is the flag SGLang asks about,
    set or not. A field or prose is a value SGLang read: with the launch command known,
    only a flag the command sets is the one at fault (a default is no one's choice).
    """
    if traceback is None:
        return []
    given = set(_canonical_all(command.flags(), catalog)) if command is not None else None
    found: list[str] = []
    for part in (traceback, *traceback.chain):
        text = part.exception_message
        if not text:
            continue
        options = [t for t in TOKEN.findall(text) if t.startswith("--")]
        found += [f for f in (catalog.canonical(o) for o in options) if f]
        fields = [t for t in TOKEN.findall(text) if not t.startswith("-")]
        fields += SERVER_ARGS_ATTRIBUTE.findall(text)  # `Invalid self.disaggregation_mode=...`
        # prose is words between spaces: not a path's or an identifier's pieces
        prose = " ".join(w for w in text.split() if not PROSE_EXCLUDED.search(w))
        fields += _phrase_dests(prose, catalog, MESSAGE_PROSE_SIZES)
        named = [s.long for s in (catalog.by_dest(d) for d in fields) if s]
        found += [f for f in named if given is None or f in given]
    return list(dict.fromkeys(found))


def reported_flags(flags: list[str], catalog: FlagCatalog) -> list[str]:
    """An incident's flags as the report writes them: each option under the newest
    release's spelling of it (`--tp-size`, also for a 0.5.6.post2 log), no duplicates."""
    history = shipped_history()
    return list(dict.fromkeys(history.spelling(flag, catalog) for flag in flags))


def _canonical_all(names, catalog: FlagCatalog) -> list[str]:
    flags: list[str] = []
    for name in names:
        flag = canonical_flag(name, catalog) if name.startswith("-") else None
        if flag and flag not in flags:
            flags.append(flag)
    return flags


WORD = re.compile(r"[A-Za-z][A-Za-z0-9]*")


# a rule's flags group reads prose fields of three words and more; an exception message
# two as well (`TP size`, `context length`, `page size`: 176 `TP size` in 0.5.23's source)
GROUP_PROSE_SIZES = (5, 4, 3)
MESSAGE_PROSE_SIZES = (5, 4, 3, 2)
SERVER_ARGS_ATTRIBUTE = re.compile(r"\b(?:self|server_args)\.([a-z][a-z0-9]*(?:_[a-z0-9]+)+)\b")
PROSE_EXCLUDED = re.compile(r"[_/\\=.:]\w")


def _phrase_dests(
    text: str, catalog: FlagCatalog, sizes: tuple[int, ...] = GROUP_PROSE_SIZES
) -> list[str]:
    """ServerArgs fields written as prose: "Tokenizer worker num must >= 1"."""
    words = [w.lower() for w in WORD.findall(text)]
    found = []
    for size in sizes:
        for start in range(len(words) - size + 1):
            dest = "_".join(words[start : start + size])
            if catalog.by_dest(dest):
                found.append(dest)
    return found


def canonical_flag(name: str, catalog: FlagCatalog) -> str | None:
    """`--tp` -> `--tp-size`, `speculative_eagle_topk` -> `--speculative-eagle-topk`.

    Unknown dashed names are returned as typed; unknown bare words are dropped
    (they were prose, not flags).
    """
    if name.startswith("-"):
        return catalog.canonical(name) or name.split("=", 1)[0]
    spec = catalog.by_dest(name)
    return spec.long if spec else None


def feature_text(
    rule: Rule, groups: dict[str, str], shown: frozenset[str]
) -> tuple[str, list[str]]:
    """The explanation text and advice of the rule that hold only for a feature the input
    shows (link leaves them out)."""
    explanation = " ".join(
        _fill(text, groups) for f, text in rule.feature_explanation if f in shown
    )
    advice = [
        _fill(a.text, groups)
        for a in rule.advice
        if a.feature in shown and _applies(replace(a, feature=None), groups)
    ]
    return explanation, advice


def _applies(advice: Advice, groups: dict[str, str]) -> bool:
    if advice.feature is not None:  # feature_text's, once the input's features are known
        return False
    if advice.when is None:
        return True
    value = groups.get(advice.when, "")
    return bool(value) and (advice.is_ is None or value == advice.is_)


class _Blank(dict):
    def __missing__(self, key: str) -> str:
        return ""


def _fill(text: str, groups: dict[str, str]) -> str:
    """Fill `{group}` placeholders; a missing group becomes empty text."""
    try:
        return string.Formatter().vformat(text, (), _Blank(groups)).strip()
    except (ValueError, IndexError):
        return text
