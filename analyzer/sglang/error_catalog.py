"""SGLang's error catalog: every raise / assert site of a release, looked up by message or
by traceback frame.

Many SGLang errors name no flag (`Currently standalone speculative decoding does not
support dp attention.`, a bare `AssertionError`), but the source line that raised them
is guarded by a condition that reads server arguments. `analyzer/sglang/error_catalog_build.py`
mines those sites from each release's source into `catalogs/errors-VERSION.json`; this
module loads them (lazily: the analyzer pays nothing until an exception line needs it;
parsed once, then kept between runs by core/parse_cache.py)
and answers two questions:

- `match(exception_type, message)`: which sites can have printed this message. Hundreds
  of patterns must not slow a scan, so an Aho-Corasick pass over every entry's literal
  fragments picks the candidates, and only their patterns are compiled, on first use.
- `site_at(file_suffix, line)`: the site a traceback frame points at, for a bare
  `AssertionError` that has no message to match (line ranges are per release).

It imports nothing from the rest of the analyzer, so the classification code can use it
wherever it ends up living.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache, cached_property
from pathlib import Path
from typing import Any

import regex

from analyzer.core import bounded_json
from analyzer.core.package_files import package_files
from analyzer.core.parse_cache import cached

CATALOG_PACKAGE = "analyzer.catalogs"
PREFIX, SUFFIX = "errors-", ".json"
# A pattern gets this long per message; lazy wildcards on a huge line must not hang a run.
MATCH_TIMEOUT = 0.05
# a site whose message has less fixed text than this (`{a}: {b}`) fits too many messages
MIN_FIXED_TEXT = 12
# a message shorter than this is not read as the opening of a later release's longer one
MIN_SHORTENED = 24
# a message cut short (a client's body, a paste) is read as the opening of one site's
# message from this length on
MIN_CUT = 48
_FIELD = re.compile(r"\{[^{}]*\}")
# Building the Aho-Corasick automaton over a release's ~2,000 literals takes longer than
# testing each literal with `in` on a few messages: up to this many characters of messages
# are searched that way, then the automaton is built.
PLAIN_SEARCH_CHARS = 6_000


class ErrorCatalogError(Exception):
    """An error catalog that cannot be found or read."""


@dataclass(frozen=True)
class ErrorSite:
    """One raise / assert / log-and-exit site in SGLang's source.

    `message` is the template as written (`{expr}` for run-time values, literal braces
    doubled); `pattern` is a regex matching the whole rendered message; `condition` is
    the guarding `if` (or the assert test) as source text; `flags` are the options the
    condition and the message read, `condition_flags` those the condition reads;
    `context` the enclosing guards (innermost first) and `context_flags` their flags.
    """

    file: str
    function: str
    line: int
    end_line: int
    kind: str
    exception: str
    message: str
    pattern: str
    literals: tuple[str, ...]
    condition: str
    reads: tuple[str, ...]
    flags: tuple[str, ...]
    condition_reads: tuple[str, ...] = ()
    condition_flags: tuple[str, ...] = ()
    context: tuple[str, ...] = ()
    context_flags: tuple[str, ...] = ()
    startup: bool = False
    first_line_pattern: str | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ErrorSite:
        return cls(
            file=data["file"],
            function=data["function"],
            line=int(data["line"]),
            end_line=int(data["end_line"]),
            kind=data["kind"],
            exception=data["exception"],
            message=data["message"],
            pattern=data["pattern"],
            literals=tuple(data.get("literals", ())),
            condition=data.get("condition", ""),
            reads=tuple(data.get("reads", ())),
            flags=tuple(data.get("flags", ())),
            condition_reads=tuple(data.get("condition_reads", ())),
            condition_flags=tuple(data.get("condition_flags", ())),
            context=tuple(data.get("context", ())),
            context_flags=tuple(data.get("context_flags", ())),
            startup=bool(data.get("startup", False)),
            first_line_pattern=data.get("first_line_pattern"),
        )

    @property
    def specificity(self) -> int:
        """How much of the message is fixed text: more wins when several sites match."""
        text = self.message.replace("{{", "{").replace("}}", "}")
        return len(_FIELD.sub("", text)) if "{" in self.message else len(text)

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    def matches(self, message: str) -> bool:
        """Whether this site can have printed `message` (the whole message, or only its
        first line when the log shows one line of a multi-line message)."""
        text = message.strip()
        if _fullmatch(self.pattern, text):
            return True
        return self.first_line_pattern is not None and _fullmatch(
            self.first_line_pattern, text.split("\n", 1)[0]
        )


@cache
def _compiled(pattern: str) -> regex.Pattern[str]:
    return regex.compile(r"\s*(?:" + pattern + r")\s*", regex.DOTALL)


def _fullmatch(pattern: str, text: str) -> bool:
    try:
        return _compiled(pattern).fullmatch(text, timeout=MATCH_TIMEOUT) is not None
    except TimeoutError:
        return False


def _opens(template: str, text: str) -> bool:
    """Whether `text` is the fixed opening of `template`, cut at a word boundary."""
    fixed = template.replace("{{", "\0").split("{", 1)[0].replace("\0", "{")
    return (
        len(fixed) > len(text)
        and fixed.startswith(text)
        and not fixed[len(text)].isalnum()
        and not text[-1].isspace()
    )


def exception_name(exception_type: str | None) -> str | None:
    """`sglang.srt.foo.BarError` and `BarError` name the same class in a traceback."""
    if not exception_type:
        return None
    return exception_type.strip().rsplit(".", 1)[-1]


@dataclass
class ErrorCatalog:
    """The error sites of one SGLang release."""

    version: str
    entries: tuple[ErrorSite, ...]
    flag_catalog: str | None = None
    _prefilter: Any = field(default=None, repr=False)
    _plain_chars: int = field(default=0, repr=False, compare=False)  # searched without it

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ErrorCatalog:
        entries = tuple(ErrorSite.from_json(e) for e in data.get("entries", ()))
        return cls(str(data.get("sglang_version")), entries, data.get("flag_catalog"))

    @cached_property
    def _literal_index(self) -> tuple[list[str], list[list[int]]]:
        """Every distinct literal, and for each the entries that need it."""
        literals: dict[str, list[int]] = {}
        for index, site in enumerate(self.entries):
            for literal in site.literals:
                literals.setdefault(literal, []).append(index)
        ordered = sorted(literals)
        return ordered, [literals[lit] for lit in ordered]

    def _candidates(self, message: str) -> list[int]:
        """Entries all of whose literals occur in the message (one Aho-Corasick pass, once
        enough text was searched to pay for building the automaton)."""
        literals, owners = self._literal_index
        if not literals:
            return []
        if self._prefilter is None and self._plain_chars + len(message) > PLAIN_SEARCH_CHARS:
            self._prefilter = _automaton(literals)
        if self._prefilter is None:
            self._plain_chars += len(message)
        found = {i for i, _start, _end in _find_all(self._prefilter, literals, message)}
        hits: dict[int, int] = {}
        for i in found:
            for entry in owners[i]:
                hits[entry] = hits.get(entry, 0) + 1
        return sorted(e for e, n in hits.items() if n == len(self.entries[e].literals))

    def may_hold(self, text: str) -> bool:
        """Whether some site's literals all occur in `text` (many lines joined: one pass
        tells whether any of them can hold a whole message)."""
        return bool(self._candidates(text))

    def match(self, exception_type: str | None, message: str) -> list[ErrorSite]:
        """The sites that can have raised `exception_type: message`, most specific first.

        `exception_type` may be qualified or None (any type). Sites whose message has no
        literal text (`raise ValueError(msg)` with msg unknown) are never returned: they
        would match anything; find those with `site_at`.
        """
        wanted = exception_name(exception_type)
        found = [
            self.entries[i]
            for i in self._candidates(message)
            if wanted is None or self.entries[i].exception == wanted
        ]
        found = [site for site in found if site.matches(message)]
        return sorted(found, key=lambda s: (-s.specificity, s.file, s.line))

    def place(
        self, exception_type: str | None, message: str, function: str | None = None
    ) -> list[ErrorSite]:
        """The sites that printed `message`, most specific first: by the whole message, else
        (given the raising frame's `function`) a site of that function whose fixed opening
        starts with it, up to a word boundary. An older release than the catalog's often
        raised the same check with a shorter message (`multi-node data parallel is not
        supported`, later `... unless dp attention!`)."""
        found = [s for s in self.match(exception_type, message) if s.specificity >= MIN_FIXED_TEXT]
        if found or not function:
            return found
        text = message.strip()
        if len(text) < MIN_SHORTENED:
            return []
        wanted = exception_name(exception_type)
        return [
            site
            for site in self.entries
            if site.function.rsplit(".", 1)[-1] == function
            and (wanted is None or site.exception == wanted)
            and _opens(site.message, text)
        ]

    def cut_short(self, message: str) -> list[ErrorSite]:
        """The site whose message `message` opens, cut at a word boundary (a client or a
        page kept only its first part): only when one site's message opens so."""
        text = message.strip().rstrip(".")
        if len(text) < MIN_CUT:
            return []
        found = [s for s in self._by_opening.get(text[:MIN_CUT], ()) if _opens(s.message, text)]
        return found if len({(s.file, s.function, s.message) for s in found}) == 1 else []

    @cached_property
    def _by_opening(self) -> dict[str, list[ErrorSite]]:
        """Sites by the first MIN_CUT characters of their message's fixed opening."""
        index: dict[str, list[ErrorSite]] = {}
        for site in self.entries:
            fixed = site.message.replace("{{", "\0").split("{", 1)[0].replace("\0", "{")
            if len(fixed) > MIN_CUT:
                index.setdefault(fixed[:MIN_CUT], []).append(site)
        return index

    @cached_property
    def _by_basename(self) -> dict[str, list[ErrorSite]]:
        index: dict[str, list[ErrorSite]] = {}
        for site in self.entries:
            index.setdefault(site.file.rsplit("/", 1)[-1], []).append(site)
        return index

    def site_at(self, file_suffix: str, line: int, function: str | None = None) -> ErrorSite | None:
        """The site whose statement spans `line` in the file a traceback frame names
        (`/usr/lib/python3/site-packages/sglang/srt/server_args.py` or `server_args.py`);
        the innermost when ranges nest. `function` (the frame's name) narrows it."""
        path = file_suffix.replace("\\", "/")
        if "sglang/" in path:
            path = path.rsplit("sglang/", 1)[1]
        found = [
            site
            for site in self._by_basename.get(path.rsplit("/", 1)[-1], [])
            if site.line <= line <= site.end_line
            and (site.file.endswith(path) or path.endswith("/" + site.file) or path == site.file)
            and (function is None or site.function.rsplit(".", 1)[-1] == function)
        ]
        if not found:
            return None
        return min(found, key=lambda s: (s.end_line - s.line, s.line, s.file))

    def grep(self, text: str | None = None) -> list[ErrorSite]:
        """Entries whose message, condition, function, file or flags contain `text`
        (case-insensitive); all entries without it."""
        if not text:
            return list(self.entries)
        needle = text.lower()
        return [
            site
            for site in self.entries
            if needle
            in "\n".join(
                (site.message, site.condition, site.function, site.file, " ".join(site.flags))
            ).lower()
        ]


def _automaton(literals: Sequence[str]) -> Any:
    try:
        from ahocorasick_rs import AhoCorasick
    except ImportError:  # pragma: no cover - a declared dependency; plain find is the fallback
        return None
    return AhoCorasick(list(literals))


def _find_all(automaton: Any, literals: Sequence[str], text: str) -> Iterable[tuple[int, int, int]]:
    if automaton is not None:
        return automaton.find_matches_as_indexes(text, overlapping=True)
    return [(i, 0, 0) for i, literal in enumerate(literals) if literal in text]


@dataclass(frozen=True)
class FlagResolution:
    """Of the sites whose condition reads a server argument, how many name a flag."""

    sites: int
    reading: int
    resolved: int

    @property
    def share(self) -> float:
        return self.resolved / self.reading if self.reading else 0.0


def flag_resolution(catalog: ErrorCatalog, startup_only: bool = True) -> FlagResolution:
    """The catalog's headline figure: sites whose guarding condition reads a server
    argument (an attribute of ServerArgs or a view of it, directly or through a local,
    property or helper), and the share of them whose condition maps to >= 1 flag."""
    sites = [s for s in catalog.entries if s.startup or not startup_only]
    reading = [s for s in sites if s.condition_reads]
    resolved = [s for s in reading if s.condition_flags]
    return FlagResolution(len(sites), len(reading), len(resolved))


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", version))


@cache
def shipped_error_versions() -> list[str]:
    """Releases with a shipped error catalog, oldest first."""
    names = [p.name for p in package_files(CATALOG_PACKAGE).iterdir()]
    found = [n[len(PREFIX) : -len(SUFFIX)] for n in names if n.startswith(PREFIX)]
    return sorted((v for v in found if _is_version(v)), key=_version_key)


def _is_version(text: str) -> bool:
    return bool(re.fullmatch(r"\d+(?:\.\d+)*(?:\.?post\d+)?", text))


@cache
def load_error_catalog(version: str | None = None) -> ErrorCatalog:
    """The shipped error catalog of `version` (its own, else the nearest older release's),
    or of the newest release; read on first use, once."""
    versions = shipped_error_versions()
    if not versions:
        raise ErrorCatalogError("no error catalog is shipped in this package")
    chosen = version or versions[-1]
    if chosen not in versions:
        older = [v for v in versions if _version_key(v) <= _version_key(chosen)]
        if not older:
            raise ErrorCatalogError(
                f"no error catalog for sglang {chosen} (shipped: {', '.join(versions)})"
            )
        chosen = older[-1]
    path = package_files(CATALOG_PACKAGE).joinpath(f"{PREFIX}{chosen}{SUFFIX}")
    try:
        return cached(
            f"errors-{chosen}",
            [path, Path(__file__)],
            lambda: ErrorCatalog.from_json(bounded_json.loads(path.read_text("utf-8"))),
        )
    except (OSError, ValueError, KeyError) as exc:
        raise ErrorCatalogError(f"cannot read the error catalog of sglang {chosen}: {exc}") from exc
