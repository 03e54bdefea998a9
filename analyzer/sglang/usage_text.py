"""argparse's usage text read back into the options of the parser that printed it.

When SGLang's parser rejects a command it prints its whole usage first (`usage:
launch_server.py [-h] --model-path MODEL_PATH [--tp-size TP_SIZE] ...`): the exact
inventory of the user's release, including releases older than every shipped catalog
(0.1-0.4 had `--enable-flashinfer`, which 0.5.23 would expand to another flag). The shapes
follow CPython's argparse.HelpFormatter (_format_usage, _format_actions_usage,
_format_args): an optional action is `[-x]` (no value) or `[-x METAVAR]`, a required one
has no brackets, nargs shape the metavar (`[X]`, `[X ...]`, `X [X ...]`, `X X`), choices
are the metavar `{a,b}`, a mutually exclusive group is `[--a | --b]` (`(...)` when
required), a BooleanOptionalAction is `[--x | --no-x]`. The usage shows an action's first
option string only; wrapping moves whole parts to indented lines, so the lines joined with
spaces are the text argparse built.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import regex

from analyzer.core.model import InputSummary, ScannedLog
from analyzer.sglang.catalog import FlagCatalog, FlagSpec, all_catalogs

USAGE_PREFIX = "usage:"
TOKEN = regex.compile(r"\{[^{}]*\}|[\[\]()|]|[^\s\[\]()|{}]+")
OPTION = regex.compile(r"-{1,2}[A-Za-z0-9][\w.-]*")
# prog of SGLang's server parser: `launch_server.py` (python -m sglang.launch_server),
# `sglang serve`; every release's server parser has --model-path
SERVER_PROGRAMS = ("launch_server", "sglang")
SERVER_OPTION = "--model-path"
NAMED_OPTIONS = 4  # the unlisted options a report names


@dataclass(frozen=True)
class UsageOption:
    """One action as the usage shows it: its first option string (both of a
    BooleanOptionalAction), whether a value follows, and the choices of its metavar."""

    strings: tuple[str, ...]
    takes_value: bool
    choices: tuple[str, ...] | None = None
    required: bool = False


@dataclass(frozen=True)
class ParserUsage:
    """The options one usage text lists, in its order."""

    prog: str
    options: tuple[UsageOption, ...]

    @cached_property
    def spellings(self) -> frozenset[str]:
        return frozenset(s for o in self.options for s in o.strings)

    @property
    def is_server(self) -> bool:
        """The usage of SGLang's server parser (not a benchmark's, not another tool's)."""
        named = any(p in self.prog for p in SERVER_PROGRAMS)
        return named and SERVER_OPTION in self.spellings


def read_usage(text: str) -> ParserUsage | None:
    """The options of a usage text (`usage: PROG PARTS...`), None when it is not one."""
    at = text.find(USAGE_PREFIX)
    if at < 0:
        return None
    tokens = TOKEN.findall(text[at + len(USAGE_PREFIX) :])
    prog_words = []
    while tokens and not (tokens[0] in "[(" or tokens[0].startswith("-")):
        prog_words.append(tokens.pop(0))
    return ParserUsage(" ".join(prog_words), tuple(_options(tokens)))


@dataclass
class _Open:
    """The option being read: its strings, the value words after it, how many brackets
    were open where it began."""

    strings: list[str]
    values: list[str]
    depth: int
    required: bool
    after_bar: bool = False


def _options(tokens: list[str]) -> list[UsageOption]:
    found: list[UsageOption] = []
    brackets: list[str] = []  # the `[` and `(` open at the token
    current: _Open | None = None
    for token in tokens:
        if token in "[(":
            brackets.append(token)
        elif token in "])":
            if brackets:
                brackets.pop()
            if current is not None and len(brackets) < current.depth:
                found.append(_option(current))
                current = None
        elif token == "|":
            if current is not None:
                current.after_bar = True
        elif OPTION.fullmatch(token):  # a metavar never starts with a dash
            if current is not None and current.after_bar and _negation(current, token):
                current.strings.append(token)
                current.after_bar = False
                continue
            if current is not None:
                found.append(_option(current))
            current = _Open([token], [], len(brackets), "[" not in brackets)
        elif current is not None and not current.after_bar:
            current.values.append(token)
        # any other word is a positional's metavar, not an option
    if current is not None:
        found.append(_option(current))
    return found


def _negation(current: _Open, token: str) -> bool:
    """`--x | --no-x` is one BooleanOptionalAction, not a group of two switches."""
    first = current.strings[0]
    return not current.values and first.startswith("--") and token == "--no-" + first[2:]


def _option(read: _Open) -> UsageOption:
    choices = None
    if read.values and read.values[0].startswith("{"):
        choices = tuple(c for c in read.values[0][1:-1].split(",") if c)
    return UsageOption(tuple(read.strings), bool(read.values), choices, read.required)


def server_usage(log: ScannedLog) -> ParserUsage | None:
    """The last complete usage text of SGLang's server parser in the input (from its
    `usage:` line to argparse's `error:` line: a dump cut short lists too few)."""
    for dump in reversed(log.usage_dumps):
        if dump.error is None or not dump.first.body.startswith(USAGE_PREFIX):
            continue
        usage = read_usage(dump.text)
        if usage is not None and usage.is_server:
            return usage
    return None


def catalog_for_usage(log: ScannedLog, catalog: FlagCatalog, summary: InputSummary) -> FlagCatalog:
    """The catalog to judge the input's flags by: the user's usage text (and the input's
    catalog reason says so) when it lists options `catalog` lacks, else `catalog`."""
    judged = judge_by_usage(log, catalog, all_catalogs())
    if judged is None:
        return catalog
    if judged[1] not in (summary.catalog_reason or ""):  # a transcript's views: said once
        summary.catalog_reason = f"{summary.catalog_reason}; {judged[1]}"
    return judged[0]


def judge_by_usage(
    log: ScannedLog, catalog: FlagCatalog, shipped: Sequence[FlagCatalog]
) -> tuple[FlagCatalog, str] | None:
    """The catalog to judge the input's flags by, and why, when SGLang's usage text lists
    options the chosen `catalog` lacks (a release older than the catalogs, or another);
    None when there is no such usage text or the catalog has every option it lists."""
    usage = server_usage(log)
    if usage is None:
        return None
    unlisted = unlisted_by(catalog, usage)
    if not unlisted:
        return None
    older = all(unlisted_by(c, usage) for c in shipped)
    release = "older than every shipped catalog (or another build)" if older else "another one"
    named = ", ".join(unlisted[:NAMED_OPTIONS])
    more = f" and {len(unlisted) - NAMED_OPTIONS} more" if len(unlisted) > NAMED_OPTIONS else ""
    note = (
        f"SGLang's usage text lists {named}{more}, options sglang {catalog.version} lacks: "
        f"the release is {release}, and the launch flags were judged by the options its "
        "usage text lists"
    )
    return usage_catalog(usage, catalog), note


def unlisted_by(catalog: FlagCatalog, usage: ParserUsage) -> list[str]:
    """The options the usage lists that `catalog` does not have (empty: the usage is the
    catalog's release, or one it covers)."""
    return sorted(s for s in usage.spellings if catalog.resolve(s).kind not in ("exact", "alias"))


def usage_catalog(usage: ParserUsage, catalog: FlagCatalog) -> FlagCatalog:
    """The user's parser as a catalog: exactly the options its usage lists, each with the
    value, choices and requiredness the usage shows; type, default and help come from
    `catalog` where it has the option. Aliases the usage cannot show are left out: only
    what the user's release is known to accept is judged accepted or offered."""
    options = [_usage_option(o, _same_option(catalog, o.strings[0])) for o in usage.options]
    data = {
        "sglang_version": catalog.version,
        "usage_prog": usage.prog,
        "allow_abbrev": True,
        "options": options,
        "source_lines": catalog.source_lines,
    }
    return FlagCatalog(data)


def _same_option(catalog: FlagCatalog, flag: str) -> FlagSpec | None:
    """The catalog's option spelled exactly `flag` (not one a prefix would expand to)."""
    resolution = catalog.resolve(flag)
    return resolution.spec if resolution.kind in ("exact", "alias") else None


def _usage_option(option: UsageOption, spec: FlagSpec | None) -> dict[str, Any]:
    switch = "BooleanOptionalAction" if len(option.strings) > 1 else "store_true"
    action, nargs = ("store", None) if option.takes_value else (switch, 0)
    if spec is not None and spec.takes_value == option.takes_value:
        action, nargs = spec.action, spec.nargs
    return {
        "option_strings": list(option.strings),
        "dest": spec.dest if spec else option.strings[0].lstrip("-").replace("-", "_"),
        "type": spec.type if spec and option.takes_value else None,
        "choices": list(option.choices) if option.choices is not None else None,
        "default": spec.default if spec else None,
        "nargs": nargs,
        "required": option.required,
        "action": action,
        "help": spec.help if spec else "",
    }
