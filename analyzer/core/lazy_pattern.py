"""A `regex` pattern compiled on first use.

`regex` compiles in Python, and compiling every pattern a module might need was most of
a small log's run time: most never meet a line they could match. A pattern whose every
match opens with the same literal text (`^KeyError: '`, `OutOfMemoryError`) answers a
text without that text as no match, without compiling at all.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import regex

_NAMED_GROUP = re.compile(r"\(\?P?<([A-Za-z_]\w*)>")
_METACHARACTERS = frozenset(".^$*+?{}[]|()\\")
_QUANTIFIERS = frozenset("*+?{")
MIN_OPENING = 3
_UNREAD = object()
# bound onto the instance once compiled, so the hot path pays no extra call
_METHODS = ("search", "match", "fullmatch", "finditer", "findall", "sub", "subn", "split")


class LazyPattern:
    def __init__(self, source: str, flags: int = 0) -> None:
        self.pattern = source
        self.flags = flags
        self._compiled: regex.Pattern | None = None
        self._openings: tuple[str, ...] | None | object = _UNREAD

    @property
    def compiled(self) -> regex.Pattern:
        if self._compiled is None:
            self._compiled = regex.compile(self.pattern, self.flags)
            for name in _METHODS:
                setattr(self, name, getattr(self._compiled, name))
        return self._compiled

    @property
    def group_names(self) -> set[str]:
        """The named groups, read from the source without compiling it."""
        return set(_NAMED_GROUP.findall(self.pattern))

    def search(self, text: str, *args: Any, **kwargs: Any) -> Any:
        openings = self._openings_for(args, kwargs)
        if openings is not None and not any(opening in text for opening in openings):
            return None  # answered without compiling: most patterns never meet their text
        return self.compiled.search(text, *args, **kwargs)

    def match(self, text: str, *args: Any, **kwargs: Any) -> Any:
        openings = self._openings_for(args, kwargs)
        if openings is not None and not text.startswith(openings):
            return None
        return self.compiled.match(text, *args, **kwargs)

    def _openings_for(
        self, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[str, ...] | None:
        """Texts one of which every match starts with, for a call on a whole text."""
        if args or not kwargs.keys() <= {"timeout"}:
            return None
        return self.openings

    @property
    def openings(self) -> tuple[str, ...] | None:
        """required_opening() of the source, read once (and kept in the parse cache)."""
        if self._openings is _UNREAD:
            self._openings = None if self.flags else required_opening(self.pattern)
        return self._openings  # type: ignore[return-value]

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.compiled, name)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, LazyPattern)
            and other.pattern == self.pattern
            and other.flags == self.flags
        )

    def __hash__(self) -> int:
        return hash(self.pattern)

    def __repr__(self) -> str:
        return f"LazyPattern({self.pattern!r})"

    def __reduce__(self) -> tuple[type, tuple[str, int], dict[str, Any]]:
        # pickled (core/parse_cache.py) as its source and openings: a compiled pattern is
        # not kept, and reading the openings again walked the source on every run
        return (LazyPattern, (self.pattern, self.flags), {"_openings": self.openings})


def required_opening(source: str) -> tuple[str, ...] | None:
    """Literal texts one of which every match of `source` starts with (None: none sure).

    Read conservatively: the plain characters after an optional `^`, up to the first
    special one, into a group that opens there (each branch's, unless the group is
    optional or repeated), for each branch of the pattern, in a pattern without inline
    flags (a case-insensitive or verbose part would change what the characters match) or
    POSIX classes. A character a quantifier follows is left out."""
    plain = source
    for group in ("(?:", "(?P<", "(?=", "(?!", "(?<"):
        plain = plain.replace(group, "")
    if "(?" in plain or "[:" in source or _closing(f"({source})", 0) != len(source) + 1:
        return None
    openings = []
    for first, stop in _branches(source, 0, len(source)):
        first += 1 if source.startswith("^", first) else 0
        openings.extend(_openings(source, first, stop))
    if not openings or min(map(len, openings)) < MIN_OPENING:
        return None
    return tuple(sorted(set(openings)))


def _openings(source: str, i: int, end: int) -> list[str]:
    """The literal texts source[i:end] can start with (a group that opens there too)."""
    chars: list[str] = []
    while i < end:
        char = source[i]
        if char == "\\":
            escaped = source[i + 1 : i + 2]
            if not escaped or escaped.isalnum() or escaped == "_":
                break
            chars.append(escaped)
            i += 2
        elif char == "(":
            prefix = "".join(chars)
            return [prefix + opening for opening in _group_openings(source, i)] or [prefix]
        elif char in _METACHARACTERS:
            if char in _QUANTIFIERS and chars:
                chars.pop()
            break
        else:
            chars.append(char)
            i += 1
    return ["".join(chars)]


def _group_openings(source: str, start: int) -> list[str]:
    """What a group at `start` opens with, one text per branch; none for a lookaround, an
    optional or repeated group, or a branch that opens with nothing sure."""
    if source.startswith("(?:", start):
        body = start + 3
    elif source.startswith(("(?P<", "(?<"), start) and not source.startswith(
        ("(?<=", "(?<!"), start
    ):
        body = source.find(">", start) + 1
    elif source.startswith("(?", start):
        return []
    else:
        body = start + 1
    close = _closing(source, start)
    if body <= start or close is None or source[close + 1 : close + 2] in _QUANTIFIERS:
        return []
    found = [
        o for first, stop in _branches(source, body, close) for o in _openings(source, first, stop)
    ]
    return [] if "" in found else found


def _branches(source: str, start: int, end: int) -> list[tuple[int, int]]:
    """The (start, end) of each `|`-separated branch of source[start:end] at its own level."""
    found, first = [], start
    for i, char, depth in _structure(source, start, end):
        if char == "|" and depth == 0:
            found.append((first, i))
            first = i + 1
    return [*found, (first, end)]


def _closing(source: str, start: int) -> int | None:
    """The index of the `)` that closes the group opening at `start`."""
    return next(
        (i for i, char, depth in _structure(source, start) if char == ")" and depth == 0), None
    )


def _structure(source: str, start: int, end: int | None = None) -> Iterator[tuple[int, str, int]]:
    """(index, character, group depth after it) of each character of source[start:end]
    outside escapes and character sets."""
    depth, i, in_set = 0, start, False
    end = len(source) if end is None else end
    while i < end:
        char = source[i]
        if char == "\\":
            i += 2
            continue
        if in_set:
            in_set = char != "]"
        elif char == "[":
            in_set = True
            i += 1 if source[i + 1 : i + 2] == "^" else 0
            i += 1 if source[i + 1 : i + 2] == "]" else 0
        else:
            depth += {"(": 1, ")": -1}.get(char, 0)
            yield i, char, depth
        i += 1
