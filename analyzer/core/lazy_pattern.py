"""A `regex` pattern compiled on first use.

`regex` compiles in Python, and compiling every pattern a module might need was most of
a small log's run time: most never meet a line they could match. A pattern whose every
match opens with the same literal text (`^KeyError: '`, `OutOfMemoryError`) answers a
text without that text as no match, without compiling at all.
"""

from __future__ import annotations

import re
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
        self._opening: str | None | object = _UNREAD

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
        opening = self._opening_for(args, kwargs)
        if opening is not None and opening not in text:
            return None  # answered without compiling: most patterns never meet their text
        return self.compiled.search(text, *args, **kwargs)

    def match(self, text: str, *args: Any, **kwargs: Any) -> Any:
        opening = self._opening_for(args, kwargs)
        if opening is not None and not text.startswith(opening):
            return None
        return self.compiled.match(text, *args, **kwargs)

    def _opening_for(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
        """The text every match starts with, for a call on a whole text (else None)."""
        if args or not kwargs.keys() <= {"timeout"}:
            return None
        if self._opening is _UNREAD:
            self._opening = None if self.flags else required_opening(self.pattern)
        return self._opening  # type: ignore[return-value]

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

    def __reduce__(self) -> tuple[type, tuple[str, int]]:
        # pickled (core/parse_cache.py) as its source: a compiled pattern is not kept
        return (LazyPattern, (self.pattern, self.flags))


def required_opening(source: str) -> str | None:
    """The literal text every match of `source` starts with (None: none that is sure).

    Read conservatively: the plain characters after an optional `^`, up to the first
    special one, in a pattern without inline flags (a case-insensitive or verbose part
    would change what they match), POSIX classes, or `|` outside any group (the text
    would be only one branch's). A character a quantifier follows is left out."""
    if (
        "(?"
        in source.replace("(?:", "")
        .replace("(?P<", "")
        .replace("(?=", "")
        .replace("(?!", "")
        .replace("(?<", "")
        or "[:" in source
        or _has_top_level_branch(source)
    ):
        return None
    chars: list[str] = []
    i = 1 if source.startswith("^") else 0
    while i < len(source):
        char = source[i]
        if char == "\\":
            escaped = source[i + 1 : i + 2]
            if not escaped or escaped.isalnum() or escaped == "_":
                break
            chars.append(escaped)
            i += 2
        elif char in _METACHARACTERS:
            if char in _QUANTIFIERS and chars:
                chars.pop()
            break
        else:
            chars.append(char)
            i += 1
    opening = "".join(chars)
    return opening if len(opening) >= MIN_OPENING else None


def _has_top_level_branch(source: str) -> bool:
    depth, i, in_set = 0, 0, False
    while i < len(source):
        char = source[i]
        if char == "\\":
            i += 2
            continue
        if in_set:
            in_set = char != "]"
        elif char == "[":
            in_set = True
            if source[i + 1 : i + 2] == "^":
                i += 1
            if source[i + 1 : i + 2] == "]":  # a `]` first in a set is a member
                i += 1
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "|" and depth == 0:
            return True
        i += 1
    return depth != 0 or in_set  # unbalanced: not read, so not trusted
